// The machine update's state and everything that changes it: what the outside
// sees (the memo UpdateMachine answers from without a worker, the phase search
// attribute, one condition per step), what this run has taken (the cordon, the
// executor, skip-remediation), and the reactions to signals. Deterministic:
// time comes from the workflow clock. Steps live in steps.ts, the ways an
// attempt ends in endings.ts, the loop that runs them in workflow.ts.
import { CancellationScope, condition, upsertMemo, upsertSearchAttributes } from '@temporalio/workflow';
import type { MachineRef } from '../../activities/machine-update-types.ts';
import type { AbortInput } from '../../model/cluster-upgrade.ts';
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
import { trimTrailing } from '../../domain/strings.ts';
import { MachineUpdateEvents } from './events.ts';
import { MachineUpdateSlot } from './slot.ts';

/** A failed update nobody retries ends after this long (its answer stays Failure). */
const FAILED_RETENTION = '7 days';

/** Thrown by a step once an abort was asked for: the attempt ends as the abort. */
export class Aborted extends Error {}

export class MachineUpdateState {
  readonly input: MachineUpdateInput;
  readonly status: MachineUpdateStatus;
  readonly who: string;
  /** Each milestone's Event rides on the step that reaches it; the others go beside the steps. */
  readonly events: MachineUpdateEvents;
  /** The place under maxConcurrentMachineUpdates. */
  readonly slot: MachineUpdateSlot;
  /** The Machine's namespace and, once the preflight read it, its Cluster's name. */
  cluster: MachineRef;
  /** Set by `abort` (or by the cancellation or deletion that ends a step): the attempt ends as aborted. */
  abortReason: string | undefined;
  /** On-call signals: each restarts a drain in flight. */
  skipDrain = false;
  forceDrain = false;
  /** We cordoned the node (it was schedulable before): ours to uncordon. */
  cordonedByUs = false;
  /** The executor may have touched the node: it is not given back as it was. */
  executorStarted = false;
  /**
   * A failed attempt's executor touched the node and marked it InPlaceUpdateFailed: no later attempt
   * gives it back (however it fails or is aborted) until one sees it on the new version and Ready.
   */
  nodeMarked = false;
  /** skip-remediation may be on the Machine (set before the hold's answer: a cancelled hold may have landed). */
  remediationHeld = false;
  /** The uncordon recorded MachineUpdateSucceeded (a node we did not cordon has no uncordon). */
  succeededEventSent = false;
  /** The step in flight runs in its own scope: an abort cancels it, on-call signals restart a drain. */
  private stepScope: CancellationScope | undefined;
  private lastMemo = '';
  private lastPhase: MachineUpdatePhase | undefined;

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
    this.events = new MachineUpdateEvents(input, this.status);
    this.slot = new MachineUpdateSlot(input);
    this.cluster = { namespace: input.machine.namespace, name: input.clusterName };
  }

  // ---- signals ---------------------------------------------------------------------------

  onAbort(arg: AbortInput | undefined): void {
    if (this.abortReason !== undefined) return;
    this.abortReason = arg?.reason?.trim() || 'aborted by operator';
    this.status.abortRequested = this.abortReason;
    this.stepScope?.cancel();
    this.publish();
  }

  onSkipDrain(): void {
    this.skipDrain = true;
    this.restartDrain();
  }

  onForceDrain(): void {
    this.forceDrain = true;
    this.restartDrain();
  }

  private restartDrain(): void {
    if (this.status.step === 'Drain') this.stepScope?.cancel();
  }

  onRetry(): void {
    if (this.status.phase !== 'Failed') return;
    this.status.retryRequested = true;
    this.publish();
  }

  // ---- steps -----------------------------------------------------------------------------

  /** Throws Aborted once an abort was asked for. */
  checkpoint(): void {
    if (this.abortReason !== undefined) throw new Aborted(this.abortReason);
  }

  /** Runs one step's activity so that an abort cancels it at once. */
  async step<T>(fn: () => Promise<T>): Promise<T> {
    this.checkpoint();
    this.stepScope = new CancellationScope();
    try {
      return await this.stepScope.run(fn);
    } catch (err) {
      // Once an abort is asked for, the step ends as the abort whatever it ended with.
      if (this.abortReason !== undefined) throw new Aborted(this.abortReason);
      throw err;
    } finally {
      this.stepScope = undefined;
    }
  }

  /** The executor's request (Job, NodeUpgradeRequest) of this attempt. */
  requestName(): string {
    const attempt = this.status.attempt ?? 1;
    const name = `${this.input.machine.name}-${this.input.specHash}${attempt > 1 ? `-${attempt}` : ''}`;
    return trimTrailing(name.slice(0, 63), '-');
  }

  get succeededMessage(): string {
    return `updated in place to ${this.input.version}`;
  }

  /** Failed: waits for `retry` (or CAPI's call after the backoff) or an abort; false when nobody came. */
  async waitForRetry(): Promise<boolean> {
    return await condition(
      () => this.status.retryRequested === true || this.abortReason !== undefined,
      FAILED_RETENTION,
    );
  }

  // ---- what the outside sees -------------------------------------------------------------

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
    this.executorStarted = false;
    this.enter('Preflight', 'preflight checks');
  }
}
