// The per-cluster semaphore behind maxConcurrentMachineUpdates: one workflow per
// cluster (`machine-update-slots/<ns>/<cluster>`) lets at most `limit` machine
// updates past their queue at any moment, whatever the number of api replicas
// or workers, first come first served.
//
// Two kinds of request wait here (`acquireSlot`):
// - from the api, an update not started yet (`start`): the run is started when
//   it is let in, already holding its slot. A queued update costs nothing but
//   its place in this workflow's state, so 200 machines asked at once don't
//   start 200 runs that would only wait (they cost the first ones their speed).
// - from a running run (`runId`: a retry after a failure, or a run started
//   before queued starts existed): it is told with `slotGranted`.
// Runs give back with `releaseSlot`. A run that ends without giving back
// (terminated, timed out) is found by a liveness check: signalling a closed run
// fails, which frees its slot. `abort` (an operator, or BeforeClusterDelete with
// `final`) aborts queued updates: each is started only to end as aborted, so
// UpdateMachine answers the abort. The workflow ends after a minute with no
// holder and nobody waiting (at once after a final abort), and continues as new
// before its history grows long.
import {
  allHandlersFinished,
  condition,
  continueAsNew,
  setHandler,
  upsertSearchAttributes,
} from '@temporalio/workflow';
import type { MachineUpdateSlotsInput } from '../../model/machine-update.ts';
import { acquireSlotSignal, machineUpdateSlotsQuery, releaseSlotSignal, slotsAbortSignal } from '../messages.ts';
import { ClusterName, ClusterNamespace } from '../../model/search-attributes.ts';
import { setVersioningBehavior } from '../versioning.ts';
import { SlotsState } from './slots-state.ts';

const IDLE_BEFORE_END = '1 minute';

export async function machineUpdateSlotsWorkflow(input: MachineUpdateSlotsInput): Promise<void> {
  // The cluster's search attributes: BeforeClusterDelete finds its slots workflow by them.
  upsertSearchAttributes([
    { key: ClusterNamespace, value: input.cluster.namespace },
    { key: ClusterName, value: input.cluster.name },
  ]);
  const s = new SlotsState(input);
  setHandler(acquireSlotSignal, (request) => s.onAcquire(request));
  setHandler(releaseSlotSignal, (run) => s.onRelease(run));
  setHandler(slotsAbortSignal, (arg) => s.onAbort(arg));
  setHandler(machineUpdateSlotsQuery, () => s.query());

  for (;;) {
    s.changed = false;
    await handOver(s);
    if (s.historyLong()) return await carryOver(s);
    if (!(await waitForChange(s))) return;
  }
}

/** Lets runs in while there are places, and starts the aborted ones to say so. */
async function handOver(s: SlotsState): Promise<void> {
  // A long queue of runs that are gone can take many turns here: watch the history inside too.
  while (!s.historyLong()) {
    const told = s.admit();
    const aborted = s.aborting.splice(0);
    if (told.length === 0 && aborted.length === 0) return;
    // All in one workflow task: each slot handed over costs one round trip, not one each.
    const [reached] = await Promise.all([Promise.all(told.map((run) => s.letIn(run))), s.startAborted(aborted)]);
    told.forEach((run, i) => {
      if (!reached[i]) s.drop(run);
    });
  }
}

/** The history is long: continue as new with the places, the line and the runs started last. */
async function carryOver(s: SlotsState): Promise<never> {
  await condition(allHandlersFinished);
  // Aborted updates must answer their abort: never carried over unstarted (the api would queue them again).
  for (let aborted = s.aborting.splice(0); aborted.length > 0; aborted = s.aborting.splice(0))
    await s.startAborted(aborted);
  // Signals that came in while we waited are in the arrays we carry over (aborts: as the final one).
  return await continueAsNew<typeof machineUpdateSlotsWorkflow>({
    ...s.input,
    limit: s.limit,
    holders: s.holders,
    waiting: s.waiting,
    started: s.started,
    ...(s.abortRequested !== undefined ? { abortRequested: s.abortRequested } : {}),
  });
}

/** Waits for the next signal; false when the workflow ends (idle for a while, or its cluster deleted). */
async function waitForChange(s: SlotsState): Promise<boolean> {
  if (s.idle()) {
    // Cluster deletion: nothing left to let in, so nothing to wait for.
    if (s.abortRequested !== undefined) return false;
    return await condition(() => s.changed, IDLE_BEFORE_END);
  }
  // With runs waiting on a full house, check now and then that every holder still runs.
  if (!s.full()) await condition(() => s.changed);
  else if (!(await condition(() => s.changed, s.livenessCheckMs))) await s.checkHolders();
  return true;
}

// Worker Versioning: lives as long as its cluster keeps updating machines (continuing as new), so
// pinning would keep an old build up indefinitely; it moves to the current build. Its changes must
// replay its histories or be patched(). The runs it starts go to the current build.
setVersioningBehavior('AUTO_UPGRADE', machineUpdateSlotsWorkflow);
