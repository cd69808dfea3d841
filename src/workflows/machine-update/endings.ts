// The ways a machine update's attempt ends, each giving back what the run took
// (see workflow.ts for what CAPI sees on each): success, an abort (before or
// after the executor touched the node), a failure (which waits for a retry),
// and an abort that came while the update was still queued.
import { CancellationScope, isCancellation } from '@temporalio/workflow';
import {
  MACHINE_DELETED,
  NODE_AGENT_MISSING,
  NODE_UPGRADE_REFUSED,
  machineUpdateQueuedDetail,
  type MachineUpdateStatus,
} from '../../model/machine-update.ts';
import { failureReason, failureType } from '../failures.ts';
import { localQuick as quick, remoteQuick } from './activities.ts';
import { Aborted, type MachineUpdateState } from './state.ts';
import { releaseRemediation } from './steps.ts';

/** Backoff before a failed update may start over: base, 2×, 4× … at most 30× the base (1 minute by default). */
export function retryBackoffMs(attempt: number, baseMs = 60_000): number {
  return Math.min(30, 2 ** Math.max(0, attempt - 1)) * baseMs;
}

/** Done: answered Success once its Events are recorded. */
export async function succeeded(s: MachineUpdateState): Promise<MachineUpdateStatus> {
  s.succeeded();
  if (!s.succeededEventSent) s.events.add('MachineUpdateSucceeded', 'Normal', s.succeededMessage);
  await s.events.settled();
  return s.status;
}

/**
 * Whether `err` ends the attempt as an abort. `temporal workflow cancel` is an abort too; so is the
 * Machine going away (scale-down, remediation: Cluster API drains and deletes the node itself;
 * before the executor we must not flag it, after it the node is kept out of service like on any abort).
 */
export function isAbort(s: MachineUpdateState, err: unknown): boolean {
  if (!(err instanceof Aborted) && isCancellation(err)) s.abortReason ??= 'the workflow was cancelled';
  if (failureType(err) === MACHINE_DELETED) s.abortReason ??= failureReason(err);
  return err instanceof Aborted || isCancellation(err) || failureType(err) === MACHINE_DELETED;
}

/** An abort: the node given back as it was, unless the executor had started on it. */
export async function endAborted(s: MachineUpdateState): Promise<MachineUpdateStatus> {
  if (s.executorStarted && (await stopExecutor(s))) return await keepNode(s, s.abortReason);
  // An earlier attempt's executor left the node marked: it stays out of service, whatever this attempt did
  // (its executor, if any, was stopped above and had not started on the node: nothing else to clean up).
  if (s.nodeMarked) return await keepNode(s, s.abortReason, true);
  await cleanUp(s, true);
  await releaseRemediation(s);
  return await recordAborted(s, s.abortReason ?? 'aborted');
}

/**
 * A failed attempt. Before the executor ran (or when no agent ever took the request, or the upgrade
 * was refused before anything was created) the node is as it was: give it back, unless an earlier
 * attempt's executor touched it. After, its state is unknown: keep it cordoned and say so on the
 * Node, where remediation looks. Returns whether the node was kept so (touched).
 */
export async function recordFailure(s: MachineUpdateState, err: unknown): Promise<boolean> {
  const reason = failureReason(err);
  const type = failureType(err);
  const untouched = type === NODE_AGENT_MISSING || type === NODE_UPGRADE_REFUSED;
  const touchedNow = s.executorStarted && !untouched;
  const touched = s.nodeMarked || touchedNow;
  await cleanUp(s, !touched);
  // Marked once, by the attempt whose executor touched it: a later attempt's failure keeps that reason.
  if (touchedNow && s.status.nodeName) {
    await quick.setNodeUpdateFailed({ cluster: s.cluster, nodeName: s.status.nodeName, reason: `${s.who}: ${reason}` });
    s.nodeMarked = true;
  }
  // Failed: remediation may take the Machine (InPlaceUpdateFailed) until a retry holds it again.
  await releaseRemediation(s);
  const retryNotBefore = Date.now() + retryBackoffMs(s.status.attempt ?? 1, s.input.retryBackoffMs);
  s.failed(reason, new Date(retryNotBefore).toISOString());
  s.events.add('MachineUpdateFailed', 'Warning', `update to ${s.input.version} failed: ${reason}`);
  await s.events.settled();
  return touched;
}

/** Aborted while Failed: the failure's state of the node stays (a touched node is not given back). */
export async function abortedAfterFailure(s: MachineUpdateState, touched: boolean): Promise<MachineUpdateStatus> {
  const reason = s.abortReason ?? 'aborted';
  if (touched && s.status.nodeName) return await keepNode(s, reason, true);
  await cleanUp(s, true);
  return await recordAborted(s, reason);
}

/** Failed and nobody retried for the retention: the run ends, its answer stays Failure. */
export async function expired(s: MachineUpdateState): Promise<MachineUpdateStatus> {
  await s.slot.release();
  return s.status;
}

/** Aborted before its turn (started by the slots workflow only to say so): nothing was touched. */
export async function abortedWhileQueued(s: MachineUpdateState, reason: string): Promise<MachineUpdateStatus> {
  s.abortReason = reason;
  s.enter('Queued', machineUpdateQueuedDetail(s.input.clusterName, s.slot.limit));
  s.aborted(reason);
  s.events.add('MachineUpdateAborted', 'Warning', `aborted while queued: ${reason}`);
  await s.events.settled();
  return s.status;
}

async function recordAborted(s: MachineUpdateState, reason: string): Promise<MachineUpdateStatus> {
  s.aborted(reason);
  s.events.add('MachineUpdateAborted', 'Warning', `aborted: ${reason}`);
  await s.events.settled();
  return s.status;
}

/** Gives back what this update took: its executor's objects, and the node if we cordoned it. */
async function cleanUp(s: MachineUpdateState, uncordon: boolean): Promise<void> {
  // Not cancellable: an abort must not leave a Job behind or a node cordoned.
  await CancellationScope.nonCancellable(async () => {
    const nodeName = s.status.nodeName;
    if (s.executorStarted && nodeName) {
      await quick.cleanupNodeUpgrade({
        cluster: s.cluster,
        nodeName,
        executor: s.input.executor,
        requestName: s.requestName(),
      });
    }
    if (uncordon && s.cordonedByUs && s.status.nodeName) {
      await quick.uncordon({ cluster: s.cluster, nodeName: s.status.nodeName });
      s.cordonedByUs = false;
    }
    // The node is given back (or ours to keep no more): let the next machine in.
    if (uncordon) await s.slot.release();
  });
}

/**
 * An abort once the executor was under way: keeps what it said, stops it, and says whether it had
 * started on the node (when not, the node is as it was and is given back as before any executor).
 */
async function stopExecutor(s: MachineUpdateState): Promise<boolean> {
  return await CancellationScope.nonCancellable(async () => {
    if (!s.status.nodeName) return false;
    const { started } = await remoteQuick.stopNodeUpgrade({
      cluster: s.cluster,
      nodeName: s.status.nodeName,
      executor: s.input.executor,
      requestName: s.requestName(),
    });
    s.executorStarted = false; // stopped and deleted: nothing left for cleanUp
    return started;
  });
}

/**
 * Ends an abort after the node was touched as a failure after the executor leaves it: cordoned
 * and marked (`marked`: the failure did that already, and its reason stays on the node).
 */
async function keepNode(s: MachineUpdateState, reason = 'aborted', marked = false): Promise<MachineUpdateStatus> {
  const nodeName = s.status.nodeName ?? '';
  await CancellationScope.nonCancellable(async () => {
    if (!marked) {
      const why = `${s.who}: aborted after the node upgrade started: ${reason}`;
      await quick.setNodeUpdateFailed({ cluster: s.cluster, nodeName, reason: why });
    }
    // Marked InPlaceUpdateFailed: a MachineHealthCheck may now replace it.
    await releaseRemediation(s);
    // The run ends: its place goes to the next machine (the node stays out of service).
    await s.slot.release();
  });
  s.abortedAfterExecutor(reason, nodeName);
  const message = `aborted after the node upgrade started: ${reason}; node ${nodeName} stays cordoned and marked InPlaceUpdateFailed`;
  s.events.add('MachineUpdateAborted', 'Warning', message);
  await s.events.settled();
  return s.status;
}
