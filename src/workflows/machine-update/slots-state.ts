// The slots workflow's state and everything that changes it: who holds a
// place, who waits (first come first served), which queued updates were
// aborted, and the reactions to `acquireSlot`, `releaseSlot` and `abort`; plus
// how a run is let in (started, or told with `slotGranted`). The loop that
// hands places over is in slots-workflow.ts.
import {
  ChildWorkflowCancellationType,
  getExternalWorkflowHandle,
  ParentClosePolicy,
  startChild,
  upsertMemo,
  workflowInfo,
  WorkflowIdReusePolicy,
} from '@temporalio/workflow';
import {
  MACHINE_UPDATE_SLOTS_MEMO_KEY,
  type MachineUpdateInput,
  type MachineUpdateSlotRequest,
  type MachineUpdateSlotsAbortInput,
  type MachineUpdateSlotsInput,
  type MachineUpdateSlotsMemo,
  type MachineUpdateSlotsStatus,
} from '../../model/machine-update.ts';
import { slotGrantedSignal } from '../messages.ts';
import { machineUpdateSearchAttributes } from '../../model/search-attributes.ts';
import { workflowTypes } from '../../model/workflow-types.ts';

const DEFAULT_LIVENESS_CHECK_MS = 2 * 60_000;
/** Well below the 2,000 events we allow any history. */
const CONTINUE_AS_NEW_AT_EVENTS = 1_000;
/** Enough to cover every run started while a poll may still race with its start. */
const REMEMBER_STARTED = 200;

type RunRef = Pick<MachineUpdateSlotRequest, 'workflowId' | 'runId'>;

const sameRun = (a: RunRef) => (b: MachineUpdateSlotRequest) => a.workflowId === b.workflowId && a.runId === b.runId;
const sameMachine = (a: MachineUpdateInput, b: MachineUpdateInput) =>
  a.machine.namespace === b.machine.namespace && a.machine.name === b.machine.name;

/** A queued update aborted before it started: it is started only to end as aborted. */
export interface AbortedRequest {
  request: MachineUpdateSlotRequest;
  reason: string;
}

export class SlotsState {
  readonly input: MachineUpdateSlotsInput;
  limit: number;
  readonly holders: MachineUpdateSlotRequest[];
  readonly waiting: MachineUpdateSlotRequest[];
  readonly livenessCheckMs: number;
  /** A final abort (cluster deletion): every update queued from now on is aborted. */
  abortRequested: string | undefined;
  /** A signal came since the loop last looked. */
  changed = false;
  /** Holders that asked again: told again (their first `slotGranted` may have been lost to a reset). */
  readonly regrant: MachineUpdateSlotRequest[] = [];
  readonly aborting: AbortedRequest[] = [];
  /** The runs this workflow started last (oldest first, bounded): their run answers, not the line. */
  readonly started: string[];

  constructor(input: MachineUpdateSlotsInput) {
    this.input = input;
    this.limit = Math.max(1, input.limit);
    this.holders = [...input.holders];
    this.waiting = [...input.waiting];
    this.livenessCheckMs = input.livenessCheckMs ?? DEFAULT_LIVENESS_CHECK_MS;
    this.abortRequested = input.abortRequested;
    this.started = [...(input.started ?? [])];
  }

  // ---- signals and the query -------------------------------------------------------------

  onAcquire(request: MachineUpdateSlotRequest): void {
    this.limit = Math.max(1, request.limit);
    this.changed = true;
    if (request.start) {
      this.queueStart(request, request.start);
      return;
    }
    // A new run of the same workflow id means the old run is closed: its place goes to the new one.
    const staleHolder = this.holders.findIndex((h) => h.workflowId === request.workflowId && h.runId !== request.runId);
    if (staleHolder >= 0) this.holders.splice(staleHolder, 1);
    const staleWaiter = this.waiting.findIndex((w) => w.workflowId === request.workflowId && w.runId !== request.runId);
    if (staleWaiter >= 0) this.waiting.splice(staleWaiter, 1);
    // A holder asking again (a retry after its signal was lost) is told again below.
    if (this.holders.some(sameRun(request))) this.regrant.push(request);
    else if (!this.waiting.some(sameRun(request))) this.waiting.push(request);
  }

  /** From the api: an update not started yet, started when let in. */
  private queueStart(request: MachineUpdateSlotRequest, start: MachineUpdateInput): void {
    if (this.abortRequested !== undefined) {
      this.aborting.push({ request, reason: this.abortRequested });
      return;
    }
    const known = (r: MachineUpdateSlotRequest) => r.workflowId === request.workflowId;
    // The api asks on each poll that finds no run: once in line is enough. A poll that
    // raced with the start of its run asks once more: that run answers for it now.
    if (this.holders.some(known) || this.waiting.some(known) || this.aborting.some((a) => known(a.request))) return;
    if (!request.restart && this.started.includes(request.workflowId)) return;
    // A newer desired spec for a machine still in line takes the older one's place.
    const older = this.waiting.findIndex((w) => w.start !== undefined && sameMachine(w.start, start));
    if (older >= 0) this.waiting[older] = request;
    else this.waiting.push(request);
  }

  onRelease(run: RunRef): void {
    this.changed = true;
    const h = this.holders.findIndex(sameRun(run));
    if (h >= 0) this.holders.splice(h, 1);
    const w = this.waiting.findIndex(sameRun(run));
    if (w >= 0) this.waiting.splice(w, 1);
  }

  onAbort(arg: MachineUpdateSlotsAbortInput | undefined): void {
    const reason = arg?.reason?.trim() || 'aborted by operator';
    this.changed = true;
    if (arg?.final && this.abortRequested === undefined) {
      this.abortRequested = reason;
      upsertMemo({
        [MACHINE_UPDATE_SLOTS_MEMO_KEY]: { abortRequested: reason } satisfies MachineUpdateSlotsMemo,
      });
    }
    // Only updates not started yet: a running one is aborted through its own workflow.
    for (let i = this.waiting.length - 1; i >= 0; i--) {
      const w = this.waiting[i]!;
      if (!w.start || (arg?.workflowId !== undefined && w.workflowId !== arg.workflowId)) continue;
      this.waiting.splice(i, 1);
      this.aborting.unshift({ request: w, reason });
    }
  }

  query(): MachineUpdateSlotsStatus {
    return {
      limit: this.limit,
      holders: this.holders.map((h) => h.workflowId),
      waiting: this.waiting.map((w) => w.workflowId),
      ...(this.abortRequested !== undefined ? { abortRequested: this.abortRequested } : {}),
    };
  }

  // ---- questions the loop asks ------------------------------------------------------------

  /** Time to continue as new. */
  historyLong(): boolean {
    return workflowInfo().historyLength >= CONTINUE_AS_NEW_AT_EVENTS || workflowInfo().continueAsNewSuggested;
  }

  /** No holder, nobody waiting, no abort to record. */
  idle(): boolean {
    return this.holders.length === 0 && this.waiting.length === 0 && this.aborting.length === 0;
  }

  /** Runs wait on a full house. */
  full(): boolean {
    return this.waiting.length > 0 && this.holders.length >= this.limit;
  }

  /** Moves waiting runs into the free places; returns them with the holders that asked again. */
  admit(): MachineUpdateSlotRequest[] {
    const told = this.regrant.splice(0);
    while (this.holders.length < this.limit && this.waiting.length > 0) {
      const next = this.waiting.shift()!;
      this.holders.push(next);
      told.push(next);
    }
    return told;
  }

  // ---- runs ------------------------------------------------------------------------------

  /** Lets a run in; false when it is gone (closed runs can't be signalled) or could not be started. */
  async letIn(run: MachineUpdateSlotRequest): Promise<boolean> {
    if (run.runId === undefined && run.start) {
      run.runId = await this.startRun(run, { startedWithSlot: true });
      return run.runId !== undefined;
    }
    try {
      await getExternalWorkflowHandle(run.workflowId, run.runId).signal(slotGrantedSignal);
      return true;
    } catch {
      return false;
    }
  }

  /** Starts each aborted update's run, only to end as aborted (UpdateMachine answers the abort). */
  async startAborted(aborted: AbortedRequest[]): Promise<(string | undefined)[]> {
    return await Promise.all(aborted.map((a) => this.startRun(a.request, { abortedWhileQueued: a.reason })));
  }

  /** A holder that is gone gives its place back. */
  drop(run: MachineUpdateSlotRequest): void {
    const i = this.holders.indexOf(run);
    if (i >= 0) this.holders.splice(i, 1);
  }

  /** Signals every holder: one whose run ended without giving back (terminated, timed out) is dropped. */
  async checkHolders(): Promise<void> {
    for (const run of [...this.holders]) if (!(await this.letIn(run))) this.drop(run);
  }

  /** Starts a queued update's run; its run id, or undefined when the id is taken (started elsewhere, or done). */
  private async startRun(
    request: MachineUpdateSlotRequest,
    extra: Pick<MachineUpdateInput, 'startedWithSlot' | 'abortedWhileQueued'>,
  ): Promise<string | undefined> {
    const update = { ...request.start!, ...extra };
    this.remember(request.workflowId);
    try {
      // Not our child in any way that matters: it outlives us and ignores our cancellation.
      const child = await startChild(workflowTypes.machineUpdate, {
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
  }

  private remember(workflowId: string): void {
    this.started.push(workflowId);
    if (this.started.length > REMEMBER_STARTED) this.started.splice(0, this.started.length - REMEMBER_STARTED);
  }
}
