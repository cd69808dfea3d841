// One function per step of a machine update, in the order they run. Each
// enters its step (the memo says so), runs its activity through `s.step` so
// that an abort cancels it at once, and records what it took on the state, so
// that endings.ts gives it back on every way out. Errors escape to the loop.
import {
  ApplicationFailure,
  CancellationScope,
  isCancellation,
  sleep,
  upsertSearchAttributes,
} from '@temporalio/workflow';
import type { DrainOptions, PreflightResult } from '../../activities/machine-update-types.ts';
import { formatDuration } from '../../domain/durations.ts';
import {
  BLOCKING_PODS_RUNNING,
  blockingPodsDetail,
  blockingSelectorText,
  DEFAULT_BLOCKING_POD_TIMEOUT_MS,
} from '../../domain/node-pacing.ts';
import { failureReason, failureType } from '../failures.ts';
import { NodeName } from '../../model/search-attributes.ts';
import { localPreflight, localQuick as quick, nodeActivities, PREFLIGHT_WAITS } from './activities.ts';
import { Aborted, type MachineUpdateState } from './state.ts';

/** One attempt, from the queue to the node given back; throws what ended it early. */
export async function attemptUpdate(s: MachineUpdateState): Promise<void> {
  const pre = await preflight(s);
  await holdForBlockingPods(s, pre);
  await cordon(s, pre.nodeName);
  const drainedEventSent = await drain(s, pre);
  // In the same workflow task as the upgrade's start, as it always was (the Event goes beside it).
  if (!drainedEventSent) {
    const message = s.skipDrain ? `drain of node ${pre.nodeName} skipped (skipDrain)` : `node ${pre.nodeName} drained`;
    s.events.add('NodeDrained', 'Normal', message);
  }
  await upgradeNode(s, pre.nodeName);
  await waitForNode(s, pre.nodeName);
  await uncordon(s, pre.nodeName);
  await releaseRemediation(s);
  await delayAfterNode(s, pre);
  await s.slot.release();
}

/** Queued (while the cluster's limit holds it back), then Preflight: finds the node and its cluster. */
async function preflight(s: MachineUpdateState): Promise<PreflightResult> {
  const { input } = s;
  await s.slot.acquire(s, () => s.abortReason !== undefined);
  s.checkpoint();
  const pre =
    input.preflightTimeoutMs !== undefined
      ? await preflightWithin(s, input.preflightTimeoutMs)
      : await s.step(() => quick.preflight({ machine: input.machine }));
  s.status.nodeName = pre.nodeName;
  s.cluster = { namespace: input.machine.namespace, name: pre.clusterName };
  upsertSearchAttributes([{ key: NodeName, value: pre.nodeName }]);
  return pre;
}

/** Preflight, waiting out "not yet" (node NotReady, maxUnavailable reached) up to `timeoutMs`; each call abortable. */
async function preflightWithin(s: MachineUpdateState, timeoutMs: number): Promise<PreflightResult> {
  const deadline = Date.now() + timeoutMs;
  const pause = pollPause(timeoutMs);
  for (;;) {
    try {
      return await s.step(() => localPreflight.preflight({ machine: s.input.machine }));
    } catch (err) {
      const type = failureType(err);
      if (type === undefined || !PREFLIGHT_WAITS.includes(type)) throw err;
      if (Date.now() >= deadline) {
        throw ApplicationFailure.nonRetryable(
          `${failureReason(err)} (waited ${formatDuration(timeoutMs)}, preflightTimeout)`,
          type,
        );
      }
      s.note(`preflight checks: waiting: ${failureReason(err)}`);
      await s.step(() => sleep(pause));
    }
  }
}

/** About 100 rounds of a wait whatever its timeout (1–30 s apart): the history stays short. */
function pollPause(timeoutMs: number): number {
  return Math.min(30_000, Math.max(1_000, Math.ceil(timeoutMs / 100)));
}

/**
 * Before the cordon, while pods matching the blocking pod selector run on the node (node-pacing.ts):
 * step BlockingPods names the selector and the pods, up to blockingPodTimeout; then the attempt
 * fails with the node untouched. No step when nothing matches (or no selector is set).
 */
async function holdForBlockingPods(s: MachineUpdateState, pre: PreflightResult): Promise<void> {
  const selector = pre.blockingPodSelector ?? s.input.blockingPodSelector;
  if (selector === undefined) return;
  const { nodeName } = pre;
  const shown = blockingSelectorText(selector, pre.blockingPodSelector !== undefined);
  const timeoutMs = pre.blockingPodTimeoutMs ?? s.input.blockingPodTimeoutMs ?? DEFAULT_BLOCKING_POD_TIMEOUT_MS;
  const check = () => s.step(() => quick.blockingPods({ cluster: s.cluster, nodeName, selector }));
  let found = await check();
  if (found.count === 0) return;
  const deadline = Date.now() + timeoutMs;
  const waiting = `waiting up to ${formatDuration(timeoutMs)} (blockingPodTimeout)`;
  s.enter('BlockingPods', `held: ${blockingPodsDetail(nodeName, shown, found)}; ${waiting}`);
  s.events.add(
    'NodeUpdateHeld',
    'Normal',
    `update of node ${nodeName} held: ${blockingPodsDetail(nodeName, shown, found)}`,
  );
  try {
    while (found.count > 0) {
      s.status.blockingPods = { selector: shown, count: found.count, ...(found.first ? { first: found.first } : {}) };
      s.note(`held: ${blockingPodsDetail(nodeName, shown, found)}; ${waiting}`);
      if (Date.now() >= deadline) {
        const reason = `${blockingPodsDetail(nodeName, shown, found)}: still there after ${formatDuration(timeoutMs)} (blockingPodTimeout)`;
        throw ApplicationFailure.nonRetryable(reason, BLOCKING_PODS_RUNNING);
      }
      await s.step(() => sleep(pollPause(timeoutMs)));
      found = await check();
    }
  } finally {
    delete s.status.blockingPods;
  }
}

/** Cordon; a node that was unschedulable before stays ours to leave alone. */
async function cordon(s: MachineUpdateState, nodeName: string): Promise<void> {
  const { input } = s;
  const startedMessage = `updating node ${nodeName} in place to ${input.version} (${input.executor} executor)`;
  const started = s.events.forStep('MachineUpdateStarted', startedMessage);
  s.enter('Cordon', `cordoning node ${nodeName}`);
  const { wasUnschedulable } = await s.step(() => quick.cordon({ cluster: s.cluster, nodeName, event: started }));
  if (!s.cordonedByUs) {
    s.status.wasCordoned = wasUnschedulable;
    s.cordonedByUs = !wasUnschedulable;
  }
}

/**
 * Drain, after holding remediation off. skipDrain ends it, forceDrain restarts it deleting
 * PDB-blocked pods; neither resets its deadline. True when the drain recorded NodeDrained.
 */
async function drain(s: MachineUpdateState, pre: PreflightResult): Promise<boolean> {
  const { input } = s;
  s.enter('Drain', `draining node ${pre.nodeName}`);
  // From here until the node is back Ready and uncordoned, its kubelet may restart.
  s.remediationHeld = true;
  await s.step(() => quick.holdRemediation({ machine: input.machine }));
  const pdbForceDrainTimeoutMs = pre.pdbForceDrainTimeoutMs ?? input.pdbForceDrainTimeoutMs;
  // Unset in runs started before it existed: their drain options stay as they were.
  const skipPodSelector = pre.drainSkipPodSelector ?? input.drainSkipPodSelector;
  // Wall time since the drain began, kept here so restarts and on-call restarts don't reset it.
  const drainStartedAtMs = Date.now();
  const drained = s.events.forStep('NodeDrained', `node ${pre.nodeName} drained`);
  const activities = nodeActivities(input);
  for (;;) {
    if (s.skipDrain) return false;
    const options: DrainOptions = {
      deleteEmptyDirData: input.deleteEmptyDirData,
      force: input.forceDrainUnmanagedPods,
      timeoutMs: input.drainTimeoutMs,
      startedAtMs: drainStartedAtMs,
      ...(pdbForceDrainTimeoutMs !== undefined ? { pdbForceDrainTimeoutMs } : {}),
      ...(skipPodSelector !== undefined ? { skipPodSelector } : {}),
      ...(s.forceDrain ? { forceNow: true } : {}),
    };
    try {
      await s.step(() =>
        activities.drain({
          cluster: s.cluster,
          nodeName: pre.nodeName,
          options,
          machine: input.machine,
          event: drained,
        }),
      );
      return true;
    } catch (err) {
      // Cancelled by skipDrain/forceDrain: go round; an abort was turned into Aborted by step().
      if (!isCancellation(err)) throw err;
    }
  }
}

/** The executor upgrades the node; from here a failure leaves it cordoned and marked. */
async function upgradeNode(s: MachineUpdateState, nodeName: string): Promise<void> {
  const { input } = s;
  s.enter('UpgradeNode', `upgrading node ${nodeName} (${input.executor} executor)`);
  s.executorStarted = true;
  await s.step(() =>
    nodeActivities(input).upgradeNode({
      cluster: s.cluster,
      machine: input.machine,
      nodeName,
      version: input.version,
      files: input.files ?? [],
      ...(input.bootstrapConfig ? { bootstrapConfig: input.bootstrapConfig } : {}),
      executor: input.executor,
      ...(input.objectRefs ? { objectRefs: input.objectRefs } : {}),
      requestName: s.requestName(),
      timeoutMs: input.nodeUpgradeTimeoutMs,
    }),
  );
  s.status.upgraded = true;
}

/** Waits for the kubelet to report the version and Ready, then clears an earlier failure's mark. */
async function waitForNode(s: MachineUpdateState, nodeName: string): Promise<void> {
  const { input } = s;
  s.enter('WaitForNode', `waiting for node ${nodeName} to report ${input.version} and Ready`);
  const upgraded = s.events.forStep('NodeUpgraded', `node ${nodeName} reports ${input.version} and is Ready`);
  await s.step(() =>
    nodeActivities(input).waitForNodeVersion({
      cluster: s.cluster,
      nodeName,
      version: input.version,
      timeoutMs: input.nodeUpgradeTimeoutMs,
      event: upgraded,
    }),
  );
  await quick.clearNodeUpdateFailed({ cluster: s.cluster, nodeName });
  s.nodeMarked = false;
}

/** Uncordon, when we cordoned it; it records MachineUpdateSucceeded. */
async function uncordon(s: MachineUpdateState, nodeName: string): Promise<void> {
  if (!s.cordonedByUs) return;
  s.enter('Uncordon', `uncordoning node ${nodeName}`);
  const done = s.events.forStep('MachineUpdateSucceeded', s.succeededMessage);
  await quick.uncordon({ cluster: s.cluster, nodeName, event: done });
  s.succeededEventSent = true;
  s.cordonedByUs = false;
}

/**
 * postUpdateDelay: the node is updated and given back; the update reports done and frees its place
 * (maxConcurrentMachineUpdates) only after the delay, so the next machine waits. An abort or a
 * cancellation ends the delay early: the node is already updated, so the update still succeeds.
 */
async function delayAfterNode(s: MachineUpdateState, pre: PreflightResult): Promise<void> {
  const delayMs = pre.postUpdateDelayMs ?? s.input.postUpdateDelayMs;
  if (!delayMs) return;
  const detail = `node ${pre.nodeName} updated; waiting ${formatDuration(delayMs)} before the next machine (postUpdateDelay)`;
  s.status.delayUntil = new Date(Date.now() + delayMs).toISOString();
  s.enter('PostUpdateDelay', detail);
  s.events.add('NodeUpdatePaused', 'Normal', detail);
  try {
    await s.step(() => sleep(delayMs));
  } catch (err) {
    if (!(err instanceof Aborted) && !isCancellation(err)) throw err;
  } finally {
    delete s.status.delayUntil;
  }
}

/** Takes skip-remediation off the Machine when this run may have put it there; never cancelled. */
export async function releaseRemediation(s: MachineUpdateState): Promise<void> {
  if (!s.remediationHeld) return;
  await CancellationScope.nonCancellable(() => quick.releaseRemediation({ machine: s.input.machine }));
  s.remediationHeld = false;
}
