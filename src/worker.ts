// The Temporal worker: polls the task queue, runs the workflows (from a
// prebuilt bundle in production, bundled from source in development) and the
// activities.
import { AsyncCompletionClient } from '@temporalio/client';
import { NativeConnection, Worker, type WorkerOptions } from '@temporalio/worker';
import { createActivities, type ActivityDeps } from './activities/index.ts';
import { NodeUpgradeWatch } from './activities/node-upgrade-watch.ts';
import type { WorkerTuning } from './config/index.ts';
import {
  connectFailureMessage,
  connectionOptions,
  readTemporalCredentials,
  type TemporalEndpoint,
  type TemporalCredentials,
} from './platform/temporal/connection.ts';
import { workerDeploymentOptions, type WorkerVersioning } from './platform/temporal/worker-versioning.ts';

export interface WorkerConfig extends TemporalEndpoint {
  taskQueue: string;
  /** Already read (the process watches them for rotation); else read from the settings now. */
  credentials?: TemporalCredentials;
  /** Prebuilt bundle (see scripts/bundle-workflows.ts); else bundle from source. */
  workflowBundlePath?: string;
  /** Shut down gracefully within this time on SIGTERM (activities get cancelled after). */
  shutdownGraceTime?: string;
  tuning?: WorkerTuning;
  /** Registers as this Worker Deployment version; unset = unversioned (src/platform/temporal/worker-versioning.ts). */
  versioning?: WorkerVersioning;
}

/** The workflows' entry file next to this module: `.ts` when run from source, `.js` from dist. */
export function workflowsEntry(): string {
  const ext = import.meta.url.endsWith('.ts') ? '.ts' : '.js';
  return new URL(`./workflows/index${ext}`, import.meta.url).pathname;
}

export function workflowSource(bundlePath?: string): Pick<WorkerOptions, 'workflowBundle' | 'workflowsPath'> {
  if (bundlePath) return { workflowBundle: { codePath: bundlePath } };
  return { workflowsPath: workflowsEntry() };
}

export async function createWorker(config: WorkerConfig, deps: ActivityDeps = {}): Promise<Worker> {
  const credentials = config.credentials ?? readTemporalCredentials(config);
  let connection: NativeConnection;
  try {
    connection = await NativeConnection.connect(connectionOptions(config, credentials));
  } catch (err) {
    throw new Error(connectFailureMessage(config, err), { cause: err });
  }
  const { nodeUpgradePollMs, ...workerOptions } = config.tuning ?? { nodeUpgradePollMs: 500 };
  // Node upgrades are waited on here, outside activity slots (completed asynchronously).
  const upgradeWatch =
    deps.upgradeWatch ??
    new NodeUpgradeWatch(new AsyncCompletionClient({ connection, namespace: config.namespace }), {
      pollMs: nodeUpgradePollMs,
    });
  return await Worker.create({
    connection,
    namespace: config.namespace,
    taskQueue: config.taskQueue,
    ...workflowSource(config.workflowBundlePath),
    activities: createActivities({ ...deps, upgradeWatch }),
    shutdownGraceTime: config.shutdownGraceTime ?? '30 seconds',
    ...(config.versioning ? { workerDeploymentOptions: workerDeploymentOptions(config.versioning) } : {}),
    ...workerOptions,
  });
}
