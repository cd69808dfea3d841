// The machine update's state and how it is published: the memo (what
// UpdateMachine answers from, without a worker), the phase search attribute and
// one condition per step. Deterministic: time comes from the workflow clock.
import { upsertMemo, upsertSearchAttributes } from '@temporalio/workflow';
import {
  MACHINE_UPDATE_MEMO_KEY,
  machineUpdateAbortedAfterExecutor,
  machineUpdateFailure,
  machineUpdateMessage,
  type MachineUpdateInput,
  type MachineUpdateMemo,
  type MachineUpdatePhase,
  type MachineUpdateStatus,
  type MachineUpdateStep,
} from '../../model/machine-update.ts';
import { UpgradePhase } from '../../model/search-attributes.ts';

export class MachineUpdateState {
  readonly status: MachineUpdateStatus;
  readonly who: string;
  private lastMemo = '';
  private lastPhase: MachineUpdatePhase | undefined;

  private readonly input: MachineUpdateInput;

  constructor(input: MachineUpdateInput) {
    this.input = input;
    this.who = `machine ${input.machine.namespace}/${input.machine.name}`;
    this.status = {
      machine: input.machine,
      version: input.version,
      phase: 'Updating',
      step: 'Preflight',
      message: machineUpdateMessage(input.machine, input.version, 'preflight checks'),
      upgraded: false,
      attempt: 1,
      steps: [],
    };
  }

  publish(): void {
    const s = this.status;
    const memo: MachineUpdateMemo = {
      phase: s.phase,
      step: s.step,
      message: s.message,
      ...(s.reason ? { reason: s.reason } : {}),
      ...(s.abortRequested ? { abortRequested: s.abortRequested } : {}),
      ...(s.retryNotBefore ? { retryNotBefore: s.retryNotBefore } : {}),
      ...(s.retryRequested ? { retryRequested: true } : {}),
    };
    const text = JSON.stringify(memo);
    if (text !== this.lastMemo) {
      upsertMemo({ [MACHINE_UPDATE_MEMO_KEY]: memo });
      this.lastMemo = text;
    }
    if (this.lastPhase !== s.phase) {
      upsertSearchAttributes([{ key: UpgradePhase, value: s.phase }]);
      this.lastPhase = s.phase;
    }
  }

  private now(): string {
    return new Date().toISOString();
  }

  /** Closes the step in progress (if any) and opens `step`. */
  enter(step: MachineUpdateStep, message: string): void {
    this.closeStep('True', 'Done', '');
    this.status.step = step;
    this.status.message = machineUpdateMessage(this.input.machine, this.input.version, message);
    if (step !== 'Done') {
      const at = this.now();
      this.status.steps.push({
        type: step,
        status: 'Unknown',
        reason: 'InProgress',
        message,
        startTime: at,
        lastTransitionTime: at,
      });
    }
    this.publish();
  }

  /** A new message within the current step (e.g. what it waits for). */
  note(detail: string): void {
    this.status.message = machineUpdateMessage(this.input.machine, this.input.version, detail);
    this.publish();
  }

  private closeStep(status: 'True' | 'False', reason: string, message: string): void {
    const current = this.status.steps.at(-1);
    if (!current || current.status !== 'Unknown') return;
    const at = this.now();
    current.status = status;
    if (reason !== 'Done') current.reason = reason;
    if (message) current.message = message;
    current.completeTime = at;
    current.lastTransitionTime = at;
  }

  succeeded(): void {
    const s = this.status;
    this.enter('Done', 'done');
    s.phase = 'Succeeded';
    delete s.reason;
    delete s.retryNotBefore;
    delete s.retryRequested;
    s.message = `${this.who} updated to ${this.input.version}`;
    this.publish();
  }

  aborted(reason: string, message = `update of ${this.who} to ${this.input.version} aborted: ${reason}`): void {
    const s = this.status;
    this.closeStep('False', 'Aborted', reason);
    s.phase = 'Aborted';
    s.reason = reason;
    delete s.retryNotBefore;
    delete s.retryRequested;
    s.message = message;
    this.publish();
  }

  /** Aborted once the node upgrade had started: the node stays cordoned and marked (see the workflow). */
  abortedAfterExecutor(reason: string, nodeName: string): void {
    this.aborted(reason, machineUpdateAbortedAfterExecutor(this.input.machine, this.input.version, nodeName, reason));
  }

  /** A failed attempt: answered as Failure until a retry (CAPI calling again after `retryNotBefore`, or the `retry` signal). */
  failed(reason: string, retryNotBefore: string): void {
    const s = this.status;
    this.closeStep('False', 'Failed', reason);
    s.phase = 'Failed';
    s.reason = reason;
    s.retryNotBefore = retryNotBefore;
    delete s.retryRequested;
    s.message =
      `${machineUpdateFailure(this.input.machine, this.input.version, s.step, reason)}; ` +
      'retried when UpdateMachine is called again after a backoff, or at once on the "retry" signal';
    this.publish();
  }

  /** A retry starts over from the preflight; the conditions of earlier attempts stay. */
  retrying(): void {
    const s = this.status;
    s.attempt = (s.attempt ?? 1) + 1;
    s.phase = 'Updating';
    delete s.reason;
    delete s.retryNotBefore;
    delete s.retryRequested;
    s.upgraded = false;
    this.enter('Preflight', 'preflight checks');
  }
}
