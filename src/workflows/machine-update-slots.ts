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
  getExternalWorkflowHandle,
  ParentClosePolicy,
  ChildWorkflowCancellationType,
  setHandler,
  startChild,
  upsertMemo,
  upsertSearchAttributes,
  workflowInfo,
  WorkflowIdReusePolicy,
} from '@temporalio/workflow';
import { setVersioningBehavior } from './versioning.ts';
import {
  MACHINE_UPDATE_SLOTS_MEMO_KEY,
  type MachineUpdateInput,
  type MachineUpdateSlotRequest,
  type MachineUpdateSlotsInput,
  type MachineUpdateSlotsMemo,
  type MachineUpdateSlotsStatus,
} from '../model/machine-update.ts';
import {
  acquireSlotSignal,
  machineUpdateSlotsQuery,
  releaseSlotSignal,
  slotGrantedSignal,
  slotsAbortSignal,
} from './messages.ts';
import { ClusterName, ClusterNamespace, machineUpdateSearchAttributes } from '../model/search-attributes.ts';

const IDLE_BEFORE_END = '1 minute';
const DEFAULT_LIVENESS_CHECK_MS = 2 * 60_000;
/** Well below the 2,000 events we allow any history. */
const CONTINUE_AS_NEW_AT_EVENTS = 1_000;
/** Enough to cover every run started while a poll may still race with its start. */
const REMEMBER_STARTED = 200;

const sameRun = (a: Pick<MachineUpdateSlotRequest, 'workflowId' | 'runId'>) => (b: MachineUpdateSlotRequest) =>
  a.workflowId === b.workflowId && a.runId === b.runId;
const sameMachine = (a: MachineUpdateInput, b: MachineUpdateInput) =>
  a.machine.namespace === b.machine.namespace && a.machine.name === b.machine.name;

export async function machineUpdateSlotsWorkflow(input: MachineUpdateSlotsInput): Promise<void> {
  // The cluster's search attributes: BeforeClusterDelete finds its slots workflow by them.
  upsertSearchAttributes([
    { key: ClusterNamespace, value: input.cluster.namespace },
    { key: ClusterName, value: input.cluster.name },
  ]);
  let limit = Math.max(1, input.limit);
  const holders = [...input.holders];
  const waiting = [...input.waiting];
  const livenessCheckMs = input.livenessCheckMs ?? DEFAULT_LIVENESS_CHECK_MS;
  let abortRequested = input.abortRequested;
  let changed = false;
  /** Holders that asked again: told again (their first `slotGranted` may have been lost to a reset). */
  const regrant: MachineUpdateSlotRequest[] = [];
  /** Queued updates aborted before they started: each is started only to end as aborted. */
  const aborting: { request: MachineUpdateSlotRequest; reason: string }[] = [];
  /** The runs this workflow started last (oldest first, bounded): their run answers, not the line. */
  const started = [...(input.started ?? [])];
  const remember = (workflowId: string) => {
    started.push(workflowId);
    if (started.length > REMEMBER_STARTED) started.splice(0, started.length - REMEMBER_STARTED);
  };

  setHandler(acquireSlotSignal, (request) => {
    limit = Math.max(1, request.limit);
    changed = true;
    if (request.start) {
      if (abortRequested !== undefined) {
        aborting.push({ request, reason: abortRequested });
        return;
      }
      const known = (r: MachineUpdateSlotRequest) => r.workflowId === request.workflowId;
      // The api asks on each poll that finds no run: once in line is enough. A poll that
      // raced with the start of its run asks once more: that run answers for it now.
      if (holders.some(known) || waiting.some(known) || aborting.some((a) => known(a.request))) return;
      if (!request.restart && started.includes(request.workflowId)) return;
      // A newer desired spec for a machine still in line takes the older one's place.
      const older = waiting.findIndex((w) => w.start !== undefined && sameMachine(w.start, request.start!));
      if (older >= 0) waiting[older] = request;
      else waiting.push(request);
      return;
    }
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
  setHandler(slotsAbortSignal, (arg) => {
    const reason = arg?.reason?.trim() || 'aborted by operator';
    changed = true;
    if (arg?.final && abortRequested === undefined) {
      abortRequested = reason;
      upsertMemo({ [MACHINE_UPDATE_SLOTS_MEMO_KEY]: { abortRequested } satisfies MachineUpdateSlotsMemo });
    }
    // Only updates not started yet: a running one is aborted through its own workflow.
    for (let i = waiting.length - 1; i >= 0; i--) {
      const w = waiting[i]!;
      if (!w.start || (arg?.workflowId !== undefined && w.workflowId !== arg.workflowId)) continue;
      waiting.splice(i, 1);
      aborting.unshift({ request: w, reason });
    }
  });
  setHandler(machineUpdateSlotsQuery, (): MachineUpdateSlotsStatus => ({
    limit,
    holders: holders.map((h) => h.workflowId),
    waiting: waiting.map((w) => w.workflowId),
    ...(abortRequested !== undefined ? { abortRequested } : {}),
  }));

  /** Starts a queued update's run; its run id, or undefined when the id is taken (started elsewhere, or done). */
  const startRun = async (
    request: MachineUpdateSlotRequest,
    extra: Pick<MachineUpdateInput, 'startedWithSlot' | 'abortedWhileQueued'>,
  ): Promise<string | undefined> => {
    const update = { ...request.start!, ...extra };
    remember(request.workflowId);
    try {
      // Not our child in any way that matters: it outlives us and ignores our cancellation.
      const child = await startChild('machineUpdateWorkflow', {
        workflowId: request.workflowId,
        args: [update],
        parentClosePolicy: ParentClosePolicy.ABANDON,
        cancellationType: ChildWorkflowCancellationType.ABANDON,
        // A run that already ended with this id answers for it: never run a finished update twice.
        workflowIdReusePolicy: request.restart
          ? WorkflowIdReusePolicy.ALLOW_DUPLICATE
          : WorkflowIdReusePolicy.REJECT_DUPLICATE,
        typedSearchAttributes: machineUpdateSearchAttributes(update),
      });
      return child.firstExecutionRunId;
    } catch {
      return undefined;
    }
  };
  /** Lets a run in; false when it is gone (closed runs can't be signalled) or could not be started. */
  const letIn = async (run: MachineUpdateSlotRequest): Promise<boolean> => {
    if (run.runId === undefined && run.start) {
      run.runId = await startRun(run, { startedWithSlot: true });
      return run.runId !== undefined;
    }
    try {
      await getExternalWorkflowHandle(run.workflowId, run.runId).signal(slotGrantedSignal);
      return true;
    } catch {
      return false;
    }
  };
  const drop = (run: MachineUpdateSlotRequest) => {
    const i = holders.indexOf(run);
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
      const aborted = aborting.splice(0);
      if (told.length === 0 && aborted.length === 0) break;
      // All in one workflow task: each slot handed over costs one round trip, not one each.
      const [reached] = await Promise.all([
        Promise.all(told.map(letIn)),
        Promise.all(aborted.map((a) => startRun(a.request, { abortedWhileQueued: a.reason }))),
      ]);
      told.forEach((run, i) => {
        if (!reached[i]) drop(run);
      });
    }

    if (historyLong()) {
      await condition(allHandlersFinished);
      // Aborted updates must answer their abort: never carried over unstarted (the api would queue them again).
      for (let aborted = aborting.splice(0); aborted.length > 0; aborted = aborting.splice(0))
        await Promise.all(aborted.map((a) => startRun(a.request, { abortedWhileQueued: a.reason })));
      // Signals that came in while we waited are in the arrays we carry over (aborts: as the final one).
      await continueAsNew<typeof machineUpdateSlotsWorkflow>({
        ...input,
        limit,
        holders,
        waiting,
        started,
        ...(abortRequested !== undefined ? { abortRequested } : {}),
      });
    }

    if (holders.length === 0 && waiting.length === 0 && aborting.length === 0) {
      // Cluster deletion: nothing left to let in, so nothing to wait for.
      if (abortRequested !== undefined) return;
      if (!(await condition(() => changed, IDLE_BEFORE_END))) return;
      continue;
    }
    // With runs waiting on a full house, check now and then that every holder still runs.
    const full = waiting.length > 0 && holders.length >= limit;
    if (!full) {
      await condition(() => changed);
    } else if (!(await condition(() => changed, livenessCheckMs))) {
      for (const run of [...holders]) if (!(await letIn(run))) drop(run);
    }
  }
}

// Worker Versioning: lives as long as its cluster keeps updating machines (continuing as new), so
// pinning would keep an old build up indefinitely; it moves to the current build. Its changes must
// replay its histories or be patched(). The runs it starts go to the current build.
setVersioningBehavior('AUTO_UPGRADE', machineUpdateSlotsWorkflow);
