// One in-place update of one Machine: preflight, cordon, drain, upgrade the
// node through an executor, wait for the kubelet, uncordon. Started by
// UpdateMachine, which then reads the memo on every poll.
//
// With maxConcurrentMachineUpdates, the cluster's slots workflow starts the run
// when it lets the update in (the api queues it there); runs started otherwise
// (no limit, retries, older runs) ask it for their place.
//
// What CAPI sees on a bad day (every path ends with the node given back or marked):
// - abort while queued (`abort` to the slots workflow, with the update's workflow
//   id, or BeforeClusterDelete): the run is started only to end as aborted.
// - abort (signal, BeforeClusterDelete, a newer desired spec, the Machine being
//   deleted, seen by the drain and the upgrade wait) before the executor
//   started: the step is cancelled at once, the node uncordoned if we cordoned
//   it; UpdateMachine answers Failure naming the abort and the run ends.
// - the same abort once the executor started (its Job existed or an agent took
//   the request), or while a failure after the executor holds the node: the
//   executor is stopped after its last words are kept (stopNodeUpgrade's result),
//   and the node is treated as after such a failure: it stays cordoned, marked
//   InPlaceUpdateFailed; UpdateMachine answers Failure saying so and the run ends.
// - a failure before the executor touched the node: the node is uncordoned (it
//   is as it was); after: it stays cordoned with the Node condition
//   InPlaceUpdateFailed=True, which a MachineHealthCheck can remediate.
//   Either way the run stays open, answers Failure, and starts over when
//   UpdateMachine is called again after a backoff or on the `retry` signal.
// - the Machine's cluster.x-k8s.io/skip-remediation (set before the drain, so a
//   MachineHealthCheck does not replace it while the kubelet restarts) is
//   removed on every exit above, before the answer changes.
import {
  ActivityCancellationType,
  CancellationScope,
  condition,
  isCancellation,
  proxyActivities,
  setHandler,
  upsertSearchAttributes,
} from '@temporalio/workflow';
import { setVersioningBehavior } from './versioning.ts';
import type { DrainOptions, MachineRef, MachineUpdateActivities } from '../activities/machine-update-types.ts';
import { abortSignal, forceDrainSignal, machineUpdateStatusQuery, retrySignal, skipDrainSignal } from './messages.ts';
import {
  MACHINE_DELETED,
  NODE_AGENT_MISSING,
  machineUpdateQueuedDetail,
  type MachineUpdateInput,
  type MachineUpdateStatus,
} from '../model/machine-update.ts';
import {
  failureReason,
  failureType,
  localQuick as quick,
  preflightWithin,
  remoteQuick,
  retry,
} from './machine-update/activities.ts';
import { MachineUpdateEvents } from './machine-update/events.ts';
import { MachineUpdateSlot } from './machine-update/slot.ts';
import { MachineUpdateState } from './machine-update/state.ts';
import { NodeName } from '../model/search-attributes.ts';

/** Backoff before a failed update may start over: base, 2×, 4× … at most 30× the base (1 minute by default). */
export function retryBackoffMs(attempt: number, baseMs = 60_000): number {
  return Math.min(30, 2 ** Math.max(0, attempt - 1)) * baseMs;
}
/** A failed update nobody retries ends after this long (its answer stays Failure). */
const FAILED_RETENTION = '7 days';

class Aborted extends Error {}

export async function machineUpdateWorkflow(input: MachineUpdateInput): Promise<MachineUpdateStatus> {
  // Preflight, cordon, uncordon, node conditions, cleanup (`quick`): single API calls, run as local
  // activities (no server round trip). Each milestone's Event rides on the step that reaches it.
  const state = new MachineUpdateState(input);
  const { status } = state;
  const events = new MachineUpdateEvents(input, status);
  const event = events.add.bind(events);
  const stepEvent = events.forStep.bind(events);
  const eventsRecorded = async () => {
    await events.settled();
  };
  let abortReason: string | undefined;
  let skipDrain = false;
  let forceDrain = false;
  // The step in flight runs in its own scope: an abort cancels it, on-call signals restart a drain.
  let stepScope: CancellationScope | undefined;

  setHandler(abortSignal, (arg) => {
    if (abortReason !== undefined) return;
    abortReason = arg?.reason?.trim() || 'aborted by operator';
    status.abortRequested = abortReason;
    stepScope?.cancel();
    state.publish();
  });
  setHandler(skipDrainSignal, () => {
    skipDrain = true;
    if (status.step === 'Drain') stepScope?.cancel();
  });
  setHandler(forceDrainSignal, () => {
    forceDrain = true;
    if (status.step === 'Drain') stepScope?.cancel();
  });
  setHandler(retrySignal, () => {
    if (status.phase !== 'Failed') return;
    status.retryRequested = true;
    state.publish();
  });
  setHandler(machineUpdateStatusQuery, () => status);
  const slot = new MachineUpdateSlot(input);

  const checkpoint = () => {
    if (abortReason !== undefined) throw new Aborted(abortReason);
  };
  /** Runs one step's activity so that an abort cancels it at once. */
  const step = async <T>(fn: () => Promise<T>): Promise<T> => {
    checkpoint();
    stepScope = new CancellationScope();
    try {
      return await stepScope.run(fn);
    } catch (err) {
      // Once an abort is asked for, the step ends as the abort whatever it ended with.
      if (abortReason !== undefined) throw new Aborted(abortReason);
      throw err;
    } finally {
      stepScope = undefined;
    }
  };

  // Heartbeats carry cancellation to the long activities; the SDK sends them at
  // 80% of the timeout at most, so a short one keeps an abort prompt there too.
  const drainActivities = proxyActivities<MachineUpdateActivities>({
    startToCloseTimeout: input.drainTimeoutMs + 60_000,
    heartbeatTimeout: '10 seconds',
    // Worker restarts must not use up the drain: its deadline is wall time since it began.
    retry: { initialInterval: retry.initialInterval, backoffCoefficient: 2, maximumInterval: retry.maximumInterval },
  });
  const upgradeActivities = proxyActivities<MachineUpdateActivities>({
    startToCloseTimeout: input.nodeUpgradeTimeoutMs + 60_000,
    heartbeatTimeout: '10 seconds',
    retry,
    // Wait for the upgrade to take its cancellation before stopping the executor: an upgradeNode
    // still creating its Job must not race the stop (the SDK's default does not wait).
    cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
  });

  let cluster: MachineRef = { namespace: input.machine.namespace, name: input.clusterName };
  let cordonedByUs = false;
  let executorStarted = false;
  /** skip-remediation may be on the Machine (set before the hold's answer: a cancelled hold may have landed). */
  let remediationHeld = false;
  /** Takes skip-remediation off the Machine when this run may have put it there; never cancelled. */
  const releaseRemediation = async () => {
    if (!remediationHeld) return;
    await CancellationScope.nonCancellable(() => quick.releaseRemediation({ machine: input.machine }));
    remediationHeld = false;
  };
  const succeededMessage = `updated in place to ${input.version}`;
  /** The uncordon recorded MachineUpdateSucceeded (a node we did not cordon has no uncordon). */
  let succeededEventSent = false;
  const requestName = (attempt: number) =>
    `${input.machine.name}-${input.specHash}${attempt > 1 ? `-${attempt}` : ''}`.slice(0, 63).replace(/-+$/, '');

  const attemptUpdate = async () => {
    await slot.acquire(state, () => abortReason !== undefined);
    checkpoint();
    const pre =
      input.preflightTimeoutMs !== undefined
        ? await preflightWithin(input.machine, input.preflightTimeoutMs, step, state)
        : await step(() => quick.preflight({ machine: input.machine }));
    status.nodeName = pre.nodeName;
    cluster = { namespace: input.machine.namespace, name: pre.clusterName };
    upsertSearchAttributes([{ key: NodeName, value: pre.nodeName }]);
    const startedMessage = `updating node ${pre.nodeName} in place to ${input.version} (${input.executor} executor)`;
    const started = stepEvent('MachineUpdateStarted', startedMessage);

    state.enter('Cordon', `cordoning node ${pre.nodeName}`);
    const { wasUnschedulable } = await step(() => quick.cordon({ cluster, nodeName: pre.nodeName, event: started }));
    if (!cordonedByUs) {
      status.wasCordoned = wasUnschedulable;
      cordonedByUs = !wasUnschedulable;
    }

    state.enter('Drain', `draining node ${pre.nodeName}`);
    // From here until the node is back Ready and uncordoned, its kubelet may restart.
    remediationHeld = true;
    await step(() => quick.holdRemediation({ machine: input.machine }));
    const pdbForceDrainTimeoutMs = pre.pdbForceDrainTimeoutMs ?? input.pdbForceDrainTimeoutMs;
    // Unset in runs started before it existed: their drain options stay as they were.
    const skipPodSelector = pre.drainSkipPodSelector ?? input.drainSkipPodSelector;
    // Wall time since the drain began, kept here so restarts and on-call restarts don't reset it.
    const drainStartedAtMs = Date.now();
    const drained = stepEvent('NodeDrained', `node ${pre.nodeName} drained`);
    let drainedEventSent = false;
    for (;;) {
      if (skipDrain) break;
      const options: DrainOptions = {
        deleteEmptyDirData: input.deleteEmptyDirData,
        force: input.forceDrainUnmanagedPods,
        timeoutMs: input.drainTimeoutMs,
        startedAtMs: drainStartedAtMs,
        ...(pdbForceDrainTimeoutMs !== undefined ? { pdbForceDrainTimeoutMs } : {}),
        ...(skipPodSelector !== undefined ? { skipPodSelector } : {}),
        ...(forceDrain ? { forceNow: true } : {}),
      };
      try {
        await step(() =>
          drainActivities.drain({
            cluster,
            nodeName: pre.nodeName,
            options,
            machine: input.machine,
            event: drained,
          }),
        );
        drainedEventSent = true;
        break;
      } catch (err) {
        // Cancelled by skipDrain/forceDrain: go round; an abort was turned into Aborted by step().
        if (!isCancellation(err)) throw err;
      }
    }

    if (!drainedEventSent) {
      event(
        'NodeDrained',
        'Normal',
        skipDrain ? `drain of node ${pre.nodeName} skipped (skipDrain)` : `node ${pre.nodeName} drained`,
      );
    }
    state.enter('UpgradeNode', `upgrading node ${pre.nodeName} (${input.executor} executor)`);
    executorStarted = true;
    await step(() =>
      upgradeActivities.upgradeNode({
        cluster,
        machine: input.machine,
        nodeName: pre.nodeName,
        version: input.version,
        files: input.files ?? [],
        ...(input.bootstrapConfig ? { bootstrapConfig: input.bootstrapConfig } : {}),
        executor: input.executor,
        ...(input.objectRefs ? { objectRefs: input.objectRefs } : {}),
        requestName: requestName(status.attempt ?? 1),
        timeoutMs: input.nodeUpgradeTimeoutMs,
      }),
    );
    status.upgraded = true;

    state.enter('WaitForNode', `waiting for node ${pre.nodeName} to report ${input.version} and Ready`);
    const upgradedMessage = `node ${pre.nodeName} reports ${input.version} and is Ready`;
    const upgraded = stepEvent('NodeUpgraded', upgradedMessage);
    await step(() =>
      upgradeActivities.waitForNodeVersion({
        cluster,
        nodeName: pre.nodeName,
        version: input.version,
        timeoutMs: input.nodeUpgradeTimeoutMs,
        event: upgraded,
      }),
    );
    await quick.clearNodeUpdateFailed({ cluster, nodeName: pre.nodeName });

    if (cordonedByUs) {
      state.enter('Uncordon', `uncordoning node ${pre.nodeName}`);
      const done = stepEvent('MachineUpdateSucceeded', succeededMessage);
      await quick.uncordon({ cluster, nodeName: pre.nodeName, event: done });
      succeededEventSent = true;
      cordonedByUs = false;
    }
    await releaseRemediation();
    await slot.release();
  };

  /** Gives back what this update took: its executor's objects, and the node if we cordoned it. */
  const cleanUp = async (uncordon: boolean) => {
    // Not cancellable: an abort must not leave a Job behind or a node cordoned.
    await CancellationScope.nonCancellable(async () => {
      if (executorStarted && status.nodeName) {
        await quick.cleanupNodeUpgrade({
          cluster,
          nodeName: status.nodeName,
          executor: input.executor,
          requestName: requestName(status.attempt ?? 1),
        });
      }
      if (uncordon && cordonedByUs && status.nodeName) {
        await quick.uncordon({ cluster, nodeName: status.nodeName });
        cordonedByUs = false;
      }
      // The node is given back (or ours to keep no more): let the next machine in.
      if (uncordon) await slot.release();
    });
  };

  /**
   * An abort once the executor was under way: keeps what it said, stops it, and says whether it had
   * started on the node (when not, the node is as it was and is given back as before any executor).
   */
  const stopExecutor = async (): Promise<boolean> =>
    await CancellationScope.nonCancellable(async () => {
      if (!status.nodeName) return false;
      const { started } = await remoteQuick.stopNodeUpgrade({
        cluster,
        nodeName: status.nodeName,
        executor: input.executor,
        requestName: requestName(status.attempt ?? 1),
      });
      executorStarted = false; // stopped and deleted: nothing left for cleanUp
      return started;
    });
  /**
   * Ends an abort after the node was touched as a failure after the executor leaves it: cordoned
   * and marked (`marked`: the failure did that already, and its reason stays on the node).
   */
  const keepNode = async (reason = 'aborted', marked = false): Promise<MachineUpdateStatus> => {
    const nodeName = status.nodeName ?? '';
    await CancellationScope.nonCancellable(async () => {
      if (!marked) {
        const why = `${state.who}: aborted after the node upgrade started: ${reason}`;
        await quick.setNodeUpdateFailed({ cluster, nodeName, reason: why });
      }
      // Marked InPlaceUpdateFailed: a MachineHealthCheck may now replace it.
      await releaseRemediation();
      // The run ends: its place goes to the next machine (the node stays out of service).
      await slot.release();
    });
    state.abortedAfterExecutor(reason, nodeName);
    event(
      'MachineUpdateAborted',
      'Warning',
      `aborted after the node upgrade started: ${reason}; node ${nodeName} stays cordoned and marked InPlaceUpdateFailed`,
    );
    await eventsRecorded();
    return status;
  };

  if (input.abortedWhileQueued !== undefined) {
    // Aborted before its turn (started by the slots workflow only to say so): nothing was touched.
    abortReason = input.abortedWhileQueued;
    state.enter('Queued', machineUpdateQueuedDetail(input.clusterName, slot.limit));
    state.aborted(abortReason);
    event('MachineUpdateAborted', 'Warning', `aborted while queued: ${abortReason}`);
    await eventsRecorded();
    return status;
  }
  // Let in by the slots workflow: past the queue from the start (its Preflight step says since when).
  if (slot.heldFromStart) state.enter('Preflight', 'preflight checks');
  else state.publish();
  for (;;) {
    try {
      await attemptUpdate();
      state.succeeded();
      if (!succeededEventSent) event('MachineUpdateSucceeded', 'Normal', succeededMessage);
      await eventsRecorded();
      return status;
    } catch (err) {
      // `temporal workflow cancel` is an abort too; so is the Machine going away (scale-down,
      // remediation: Cluster API drains and deletes the node itself; before the executor we
      // must not flag it, after it the node is kept out of service like on any abort).
      if (!(err instanceof Aborted) && isCancellation(err)) abortReason ??= 'the workflow was cancelled';
      if (failureType(err) === MACHINE_DELETED) abortReason ??= failureReason(err);
      if (err instanceof Aborted || isCancellation(err) || failureType(err) === MACHINE_DELETED) {
        if (executorStarted && (await stopExecutor())) return await keepNode(abortReason);
        await cleanUp(true);
        await releaseRemediation();
        state.aborted(abortReason ?? 'aborted');
        event('MachineUpdateAborted', 'Warning', `aborted: ${abortReason ?? 'aborted'}`);
        await eventsRecorded();
        return status;
      }
      const reason = failureReason(err);
      // Before the executor ran (or when no agent ever took the request) the node is as it
      // was: give it back. After, its state is unknown: keep it cordoned and say so on the
      // Node, where remediation looks.
      const touched = executorStarted && failureType(err) !== NODE_AGENT_MISSING;
      await cleanUp(!touched);
      if (touched && status.nodeName) {
        await quick.setNodeUpdateFailed({ cluster, nodeName: status.nodeName, reason: `${state.who}: ${reason}` });
      }
      // Failed: remediation may take the Machine (InPlaceUpdateFailed) until a retry holds it again.
      await releaseRemediation();
      state.failed(
        reason,
        new Date(Date.now() + retryBackoffMs(status.attempt ?? 1, input.retryBackoffMs)).toISOString(),
      );
      event('MachineUpdateFailed', 'Warning', `update to ${input.version} failed: ${reason}`);
      await eventsRecorded();
      const woke = await condition(() => status.retryRequested === true || abortReason !== undefined, FAILED_RETENTION);
      if (!woke) {
        await slot.release();
        return status;
      }
      if (abortReason !== undefined) {
        // The failure left the node cordoned and marked: the abort does not give it back.
        if (touched && status.nodeName) return await keepNode(abortReason, true);
        await cleanUp(true);
        state.aborted(abortReason);
        event('MachineUpdateAborted', 'Warning', `aborted: ${abortReason}`);
        await eventsRecorded();
        return status;
      }
      executorStarted = false;
      state.retrying();
    }
  }
}

// Worker Versioning: one node's update takes minutes; it finishes on the build it started on, so its
// code may change freely with a new build id (no patch). A failed run waiting for `retry` keeps its
// build up to FAILED_RETENTION (docs/worker-versioning.md).
setVersioningBehavior('PINNED', machineUpdateWorkflow);
