// One cluster's upgrade, from BeforeClusterUpgrade to AfterClusterUpgrade,
// through every intermediate version of a chained upgrade. CAPI's hook calls
// arrive as `recordHook` updates (only when they bring something new); each
// becomes a gate (`hook@version`) that the workflow opens once its step ran.
// Failure is a state, not an exception: an abort or an expected error halts
// the upgrade (every hook answers Failure), undoes what it scaled, and waits
// for `resume` / `retry` for as long as it takes. Only bugs throw.
import {
  allHandlersFinished,
  condition,
  continueAsNew,
  isCancellation,
  proxyActivities,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import { setVersioningBehavior } from '../versioning.ts';
import type { UpgradeActivities } from '../../activities/upgrade-types.ts';
import type { ClusterUpgradeInput, ClusterUpgradeStatus } from '../../model/cluster-upgrade.ts';
import { gateKey, tooManyGatesMessage } from '../../model/cluster-upgrade.ts';
import {
  abortSignal,
  clusterUpgradeStatusQuery,
  recordHookUpdate,
  resumeSignal,
  retrySignal,
  updatePolicySignal,
} from '../messages.ts';
import { closeSilence } from './alerts.ts';
import { releaseCapacity, runStep } from './steps.ts';
import { iso, UpgradeState } from './state.ts';

// Events are best effort: a few quick tries, then the upgrade goes on without it.
const eventActivities = proxyActivities<UpgradeActivities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', maximumAttempts: 3 },
});

/** Before the run ends or continues as new: its Events recorded, its handlers done. */
async function settled(s: UpgradeState): Promise<void> {
  await s.events.settled();
  await condition(allHandlersFinished);
}

export async function clusterUpgradeWorkflow(input: ClusterUpgradeInput): Promise<ClusterUpgradeStatus> {
  const s = new UpgradeState(input, (e) => eventActivities.recordClusterEvent(e));
  const status = s.status;
  const limit = input.continueAsNewAtEvents !== undefined ? { continueAsNewAtEvents: input.continueAsNewAtEvents } : {};

  setHandler(recordHookUpdate, (call) => s.accept(call), {
    validator: (call) => {
      // Rejected updates leave no trace in history: repeats cost nothing.
      if (!s.isNew(call)) throw new Error(`${call.hook} ${call.version} is already recorded`);
      // Bounded memo: validators do not run on replay and a refusal adds no event, so no patch is needed.
      if (s.full(call)) throw new Error(tooManyGatesMessage(call));
    },
  });
  setHandler(abortSignal, (arg) => s.onAbort(arg));
  setHandler(resumeSignal, () => s.onResume());
  setHandler(retrySignal, () => s.onRetry());
  setHandler(updatePolicySignal, (update) => s.onPolicy(update));
  setHandler(clusterUpgradeStatusQuery, () => status);

  if (!input.carried) recordFirstCall(s, input);
  s.publish();

  for (;;) {
    await condition(() => s.queue.length > 0 || s.interrupted() || s.halted() || workflowInfo().continueAsNewSuggested);
    if (s.superseding) {
      const next = s.superseding;
      const reason = `superseded by an upgrade to ${next.targetVersion}`;
      await releaseCapacity(s);
      await closeSilence(s);
      s.setCondition(status.conditions, 'Aborted', 'True', 'Superseded', reason);
      s.setPhase('Aborted', reason);
      await settled(s);
      return await continueAsNew<typeof clusterUpgradeWorkflow>({ cluster: status.cluster, firstCall: next, ...limit });
    }
    if (s.halted()) {
      if ((await hold(s)) === 'end') {
        status.completeTime = iso(Date.now());
        s.publish();
        await settled(s);
        return status;
      }
      continue;
    }
    // Continue as new mid-upgrade before the history grows long (the stopped step runs again there).
    if (s.historyFull()) {
      await settled(s);
      return await continueAsNew<typeof clusterUpgradeWorkflow>({
        cluster: status.cluster,
        firstCall: input.firstCall,
        carried: status,
        carriedQueue: s.queue,
        ...limit,
      });
    }
    const call = s.queue.shift();
    if (!call) continue;
    let opened = false;
    try {
      opened = await s.runStep(call, () => runStep(s, call));
    } catch (err) {
      // Cancelled by an abort or a supersede: the step runs again after resume.
      if (!isCancellation(err)) throw err;
    }
    // An interrupted step runs again after a resume; a failed one was put back by fail().
    if (!opened && status.phase !== 'Failed') s.queue.unshift(call);
    if (opened && call.hook === 'AfterClusterUpgrade') {
      await settled(s);
      return status;
    }
  }
}

/** A new run's first call (a carried run has it already). */
function recordFirstCall(s: UpgradeState, input: ClusterUpgradeInput): void {
  const first = input.firstCall;
  // The start may carry the first call as an update too: record it once.
  if (!(gateKey(first.hook, first.version) in s.status.gates)) s.accept(first);
  // First seen mid-upgrade (no BeforeClusterUpgrade): the start was not ours to schedule.
  if (first.hook !== 'BeforeClusterUpgrade') {
    s.setCondition(
      s.status.conditions,
      'Scheduled',
      'True',
      'AlreadyInProgress',
      input.previousRunId
        ? `picked up mid-upgrade after run ${input.previousRunId} closed`
        : 'the upgrade was already in progress when first seen',
    );
    s.setPhase('Upgrading');
  }
}

/**
 * Aborted or failed: scale back what was reserved, then wait, without a deadline, for
 * `resume` / `retry` (or a final abort: the cluster is being deleted). No history grows while
 * held; every hook answers Failure from the memo.
 */
async function hold(s: UpgradeState): Promise<'resume' | 'end'> {
  await releaseCapacity(s);
  await closeSilence(s);
  if (s.abort?.final) return 'end';
  await condition(() => s.resumeRequested || s.superseding !== undefined || s.abort?.final === true);
  if (s.abort?.final) {
    await releaseCapacity(s);
    return 'end';
  }
  if (s.superseding) return 'resume';
  s.resume();
  return 'resume';
}

// Worker Versioning: waits for days in maintenance windows, so it moves to the current build at its
// next task (old builds drain). Every change must replay its histories (test/workflow/replay.test.ts)
// or be patched().
setVersioningBehavior('AUTO_UPGRADE', clusterUpgradeWorkflow);
