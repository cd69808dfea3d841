// Makes a worker build the Worker Deployment's current version, once its
// workers poll: new workflows (and AUTO_UPGRADE ones at their next task) go to
// it; PINNED runs finish on the build they started on. Used by the post-rollout
// Job (config/versioning, `node dist/ops/promote-worker-version.js`) and the
// test harness. The same as `temporal worker deployment set-current-version`.
import { setTimeout as sleep } from 'node:timers/promises';
import type { ConnectionLike } from '@temporalio/client';
import { grpcStatus } from '../api/temporal-calls.ts';
import type { WorkerVersioning } from '../worker-versioning.ts';

const NOT_FOUND = 5;
const FAILED_PRECONDITION = 9;
const UNAVAILABLE = 14;

export interface PromoteOptions {
  /** Give up after this long (the new workers may still be rolling out). */
  timeoutMs: number;
  /** Wait between tries. */
  pollMs?: number;
  identity?: string;
}

export type PromoteResult = 'already-current' | 'promoted';

/** The deployment's current build id; undefined when unversioned workers get new workflows (or no deployment yet). */
export async function currentBuildId(
  connection: ConnectionLike,
  namespace: string,
  deploymentName: string,
): Promise<string | undefined> {
  try {
    const res = await connection.workflowService.describeWorkerDeployment({ namespace, deploymentName });
    return res.workerDeploymentInfo?.routingConfig?.currentDeploymentVersion?.buildId || undefined;
  } catch (err) {
    if (grpcStatus(err)?.code === NOT_FOUND) return undefined;
    throw err;
  }
}

/** Not yet: the version is unknown to the server, or its workers do not poll every task queue yet. */
const RETRYABLE = new Set<number>([NOT_FOUND, FAILED_PRECONDITION, UNAVAILABLE]);

export async function promoteWorkerVersion(
  connection: ConnectionLike,
  namespace: string,
  version: WorkerVersioning,
  options: PromoteOptions,
): Promise<PromoteResult> {
  const deadline = Date.now() + options.timeoutMs;
  for (;;) {
    try {
      if ((await currentBuildId(connection, namespace, version.deploymentName)) === version.buildId)
        return 'already-current';
      await connection.workflowService.setWorkerDeploymentCurrentVersion({
        namespace,
        deploymentName: version.deploymentName,
        buildId: version.buildId,
        identity: options.identity ?? 'capi-upgrade-orchestrator promote',
      });
      return 'promoted';
    } catch (err) {
      const code = grpcStatus(err)?.code;
      if (code === undefined || !RETRYABLE.has(code) || Date.now() >= deadline) {
        throw new Error(
          `could not make ${version.deploymentName}/${version.buildId} current: ${(err as Error).message}`,
          { cause: err },
        );
      }
    }
    await sleep(options.pollMs ?? 1_000);
  }
}
