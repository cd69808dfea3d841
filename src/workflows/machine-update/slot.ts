// maxConcurrentMachineUpdates from a run's side: a place from the cluster's
// slots workflow, held from before the cordon until the node is given back
// (kept while a failed node stays cordoned). Runs started before the limit
// existed carry none and never ask; runs the slots workflow started when it let
// them in hold theirs from their first step; the others (retries, runs started
// directly) ask for one and wait in the line.
import {
  CancellationScope,
  ChildWorkflowCancellationType,
  condition,
  getExternalWorkflowHandle,
  isCancellation,
  ParentClosePolicy,
  setHandler,
  sleep,
  startChild,
  workflowInfo,
} from '@temporalio/workflow';
import {
  machineUpdateQueuedDetail,
  machineUpdateSlotsWorkflowId,
  type MachineUpdateInput,
  type MachineUpdateSlotRequest,
  type MachineUpdateStep,
} from '../../model/machine-update.ts';
import { acquireSlotSignal, releaseSlotSignal, slotGrantedSignal } from '../messages.ts';
import { machineUpdateSlotsWorkflow } from './slots-workflow.ts';

/** Where the wait shows: the run's state (kept apart so the state may own its slot). */
interface Steps {
  enter(step: MachineUpdateStep, message: string): void;
}

export class MachineUpdateSlot {
  readonly limit: number;
  private readonly input: MachineUpdateInput;
  private readonly slotsId: string;
  private readonly me: { workflowId: string; runId: string };
  private asked: boolean;
  private held: boolean;
  private granted = false;

  constructor(input: MachineUpdateInput) {
    this.input = input;
    this.limit = input.maxConcurrentMachineUpdates ?? 0;
    this.slotsId = machineUpdateSlotsWorkflowId({ namespace: input.machine.namespace, name: input.clusterName });
    this.me = { workflowId: workflowInfo().workflowId, runId: workflowInfo().runId };
    this.asked = this.limit > 0 && input.startedWithSlot === true;
    this.held = this.asked;
    setHandler(slotGrantedSignal, () => {
      this.granted = true;
    });
  }

  /** Let in by the slots workflow when it started this run. */
  get heldFromStart(): boolean {
    return this.held && this.input.startedWithSlot === true;
  }

  /**
   * Waits in the line (step Queued) for a place, unless one is held or there is no limit.
   * Returns early when `aborted()` turns true (the caller then ends the attempt as aborted).
   */
  async acquire(state: Steps, aborted: () => boolean): Promise<void> {
    if (this.limit <= 0 || this.held) return;
    state.enter('Queued', machineUpdateQueuedDetail(this.input.clusterName, this.limit));
    this.granted = false;
    this.asked = true;
    await this.ask({ ...this.me, limit: this.limit });
    await condition(() => this.granted || aborted());
    if (aborted()) return;
    this.held = true;
    state.enter('Preflight', 'preflight checks');
  }

  /** Gives the place back (if one was asked for); never cancelled: the next machine must get in. */
  async release(): Promise<void> {
    if (!this.asked) return;
    this.asked = false;
    this.held = false;
    await CancellationScope.nonCancellable(async () => {
      try {
        await getExternalWorkflowHandle(this.slotsId).signal(releaseSlotSignal, this.me);
      } catch {
        // It ended, so nothing is held there.
      }
    });
  }

  private async ask(request: MachineUpdateSlotRequest): Promise<void> {
    const cluster = { namespace: this.input.machine.namespace, name: this.input.clusterName };
    for (let attempt = 1; ; attempt++) {
      try {
        await getExternalWorkflowHandle(this.slotsId).signal(acquireSlotSignal, request);
        return;
      } catch (err) {
        if (isCancellation(err)) throw err;
      }
      // None running (or it just ended): start it with us first in line. Not our child
      // in any way that matters: it outlives us and ignores our cancellation.
      try {
        await startChild(machineUpdateSlotsWorkflow, {
          workflowId: this.slotsId,
          args: [{ cluster, limit: request.limit, holders: [], waiting: [request] }],
          parentClosePolicy: ParentClosePolicy.ABANDON,
          cancellationType: ChildWorkflowCancellationType.ABANDON,
        });
        return;
      } catch (err) {
        // (@temporalio/common's WorkflowExecutionAlreadyStartedError: workflows import values from the workflow package only.)
        if (!(err instanceof Error && err.name === 'WorkflowExecutionAlreadyStartedError')) throw err;
      }
      // Lost a race with another run starting or ending it: ask again, gently after a few tries.
      if (attempt >= 3) await sleep('1 second');
    }
  }
}
