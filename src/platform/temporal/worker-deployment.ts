// Makes a worker build the Worker Deployment's current version, once its
// workers poll: new workflows (and AUTO_UPGRADE ones at their next task) go to
// it; PINNED runs finish on the build they started on. Used by the post-rollout
// Job (config/versioning, `node dist/ops/promote-worker-version.js`) and the
// test harness. The same as `temporal worker deployment set-current-version`.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Client, ConnectionLike } from '@temporalio/client';
import { grpcStatus } from './grpc-status.ts';
import type { WorkerVersioning } from './worker-versioning.ts';

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

/** The open runs that need `version`'s workers: pinned to it and still running. */
export function pinnedRunsQuery(version: WorkerVersioning): string {
  return (
    `TemporalWorkerDeploymentVersion = ${JSON.stringify(`${version.deploymentName}:${version.buildId}`)}` +
    ` AND TemporalWorkflowVersioningBehavior = "Pinned" AND ExecutionStatus = "Running"`
  );
}

export interface DrainOptions {
  /** Give up (and let the worker stop) after this long. */
  timeoutMs: number;
  pollMs?: number;
  /** While the build is still current, wait this long for a newer one to be made current (a rollout). */
  settleMs?: number;
}

export type DrainOutcome = 'drained' | 'still-current' | 'timeout';

/**
 * A stopping worker of `version` waits here: while a newer build rolls out, its pods stop before
 * the new build is current and before the runs pinned to this one have finished. Ends when no
 * pinned run needs the build any more (`drained`), when it is still current after `settleMs` (a
 * scale-down: other replicas serve it), or at the timeout. Errors count as "not yet".
 */
export async function waitForDrain(
  client: Client,
  version: WorkerVersioning,
  options: DrainOptions,
): Promise<DrainOutcome> {
  const start = Date.now();
  const deadline = start + options.timeoutMs;
  const settleUntil = start + (options.settleMs ?? 30_000);
  for (;;) {
    try {
      const current = await currentBuildId(client.connection, client.options.namespace, version.deploymentName);
      if (current === version.buildId) {
        if (Date.now() >= settleUntil) return 'still-current';
      } else if ((await client.workflow.count(pinnedRunsQuery(version))).count === 0) return 'drained';
    } catch {
      // Temporal unreachable or busy: try again until the deadline.
    }
    if (Date.now() >= deadline) return 'timeout';
    await sleep(options.pollMs ?? 5_000);
  }
}
