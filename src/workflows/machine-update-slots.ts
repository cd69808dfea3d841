// The per-cluster semaphore behind maxConcurrentMachineUpdates: one workflow per
// cluster (`machine-update-slots/<ns>/<cluster>`) lets at most `limit` machine
// update runs past their queue at any moment, whatever the number of api
// replicas or workers, first come first served.
//
// Runs ask with `acquireSlot` (started by the first one that finds none
// running), are let in with `slotGranted`, and give back with `releaseSlot`.
// A run that ends without giving back (terminated, timed out) is found by a
// liveness check: signalling a closed run fails, which frees its slot. The
// workflow ends after a minute with no holder and nobody waiting, and
// continues as new before its history grows long.
import {
  allHandlersFinished,
  condition,
  continueAsNew,
  getExternalWorkflowHandle,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import type {
  MachineUpdateSlotRequest,
  MachineUpdateSlotsInput,
  MachineUpdateSlotsStatus,
} from '../model/machine-update.ts';
import { acquireSlotSignal, machineUpdateSlotsQuery, releaseSlotSignal, slotGrantedSignal } from './messages.ts';

const IDLE_BEFORE_END = '1 minute';
const DEFAULT_LIVENESS_CHECK_MS = 2 * 60_000;
/** Well below the 2,000 events we allow any history. */
const CONTINUE_AS_NEW_AT_EVENTS = 1_000;

const sameRun = (a: Pick<MachineUpdateSlotRequest, 'workflowId' | 'runId'>) => (b: MachineUpdateSlotRequest) =>
  a.workflowId === b.workflowId && a.runId === b.runId;

export async function machineUpdateSlotsWorkflow(input: MachineUpdateSlotsInput): Promise<void> {
  let limit = Math.max(1, input.limit);
  const holders = [...input.holders];
  const waiting = [...input.waiting];
  const livenessCheckMs = input.livenessCheckMs ?? DEFAULT_LIVENESS_CHECK_MS;
  let changed = false;
  /** Holders that asked again: told again (their first `slotGranted` may have been lost to a reset). */
  const regrant: MachineUpdateSlotRequest[] = [];

  setHandler(acquireSlotSignal, (request) => {
    limit = Math.max(1, request.limit);
    changed = true;
    // A new run of the same workflow id means the old run is closed: its place goes to the new one.
    const staleHolder = holders.findIndex((h) => h.workflowId === request.workflowId && h.runId !== request.runId);
    if (staleHolder >= 0) holders.splice(staleHolder, 1);
    const staleWaiter = waiting.findIndex((w) => w.workflowId === request.workflowId && w.runId !== request.runId);
    if (staleWaiter >= 0) waiting.splice(staleWaiter, 1);
    // A holder asking again (a retry after its signal was lost) is told again below.
    if (holders.some(sameRun(request))) regrant.push(request);
    else if (!waiting.some(sameRun(request))) waiting.push(request);
  });
  setHandler(releaseSlotSignal, (run) => {
    changed = true;
    const h = holders.findIndex(sameRun(run));
    if (h >= 0) holders.splice(h, 1);
    const w = waiting.findIndex(sameRun(run));
    if (w >= 0) waiting.splice(w, 1);
  });
  setHandler(machineUpdateSlotsQuery, (): MachineUpdateSlotsStatus => ({
    limit,
    holders: holders.map((h) => h.workflowId),
    waiting: waiting.map((w) => w.workflowId),
  }));

  /** Tells a run it is in; false when the run is gone (closed runs can't be signalled). */
  const tell = async (run: MachineUpdateSlotRequest): Promise<boolean> => {
    try {
      await getExternalWorkflowHandle(run.workflowId, run.runId).signal(slotGrantedSignal);
      return true;
    } catch {
      return false;
    }
  };
  const drop = (run: MachineUpdateSlotRequest) => {
    const i = holders.findIndex(sameRun(run));
    if (i >= 0) holders.splice(i, 1);
  };

  const historyLong = () =>
    workflowInfo().historyLength >= CONTINUE_AS_NEW_AT_EVENTS || workflowInfo().continueAsNewSuggested;

  for (;;) {
    changed = false;
    // A long queue of runs that are gone can take many turns here: watch the history inside too.
    while (!historyLong()) {
      const told = regrant.splice(0);
      while (holders.length < limit && waiting.length > 0) {
        const next = waiting.shift()!;
        holders.push(next);
        told.push(next);
      }
      if (told.length === 0) break;
      // All in one workflow task: each slot handed over costs one round trip, not one each.
      const reached = await Promise.all(told.map(tell));
      told.forEach((run, i) => {
        if (!reached[i]) drop(run);
      });
    }

    if (historyLong()) {
      await condition(allHandlersFinished);
      // Signals that came in while we waited are in the arrays we carry over.
      await continueAsNew<typeof machineUpdateSlotsWorkflow>({ ...input, limit, holders, waiting });
    }

    if (holders.length === 0 && waiting.length === 0) {
      if (!(await condition(() => changed, IDLE_BEFORE_END))) return;
      continue;
    }
    // With runs waiting on a full house, check now and then that every holder still runs.
    const full = waiting.length > 0 && holders.length >= limit;
    if (!full) {
      await condition(() => changed);
    } else if (!(await condition(() => changed, livenessCheckMs))) {
      for (const run of [...holders]) if (!(await tell(run))) drop(run);
    }
  }
}
