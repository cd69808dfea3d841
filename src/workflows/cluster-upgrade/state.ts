// The cluster upgrade's state and everything that changes it: what the
// outside sees (memo, search attributes, the status query), the gates CAPI's
// hooks answer from, and the reactions to signals and updates. Steps live in
// steps.ts; the loop that runs them in workflow.ts.
import {
  CancellationScope,
  condition,
  log,
  upsertMemo,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { ClusterEventInput, ClusterEventReason } from '../../activities/upgrade-types.ts';
import {
  CLUSTER_UPGRADE_MEMO_KEY,
  gateKey,
  GATE_RETRY_AFTER_SECONDS,
  haltedMessage,
  MAX_GATES_PER_UPGRADE,
  queuedGate,
  type AbortInput,
  type ClusterUpgradeInput,
  type ClusterUpgradeMemo,
  type ClusterUpgradeStatus,
  type ConditionStatus,
  type Gate,
  type HookCall,
  type PolicyUpdate,
  type UpgradeCondition,
  type UpgradePhase,
  type UpgradeReadiness,
  type VersionHistory,
} from '../../model/cluster-upgrade.ts';
import { readinessEvent, readinessMemo } from '../../domain/readiness-recheck.ts';
import { EventChain } from '../event-chain.ts';
import {
  UpgradePhase as UpgradePhaseAttribute,
  UpgradeReadiness as UpgradeReadinessAttribute,
} from '../../model/search-attributes.ts';

export const iso = (ms: number) => new Date(ms).toISOString();

/** Policy changes kept in the status (newest last). */
const POLICY_CHANGES_KEPT = 20;

/** A run continues as new at this history length: well under 2,000 events, whatever the wait. */
export const CONTINUE_AS_NEW_AT_EVENTS = 1_500;

export class UpgradeState {
  readonly status: ClusterUpgradeStatus;
  /** Calls whose step has not run yet, in arrival order (kept so resume and retry can run them). */
  readonly queue: HookCall[];
  abort: { reason: string; final: boolean } | undefined;
  /** `resume` (after abort or failure) or `retry` (after failure) arrived while held. */
  resumeRequested = false;
  superseding: HookCall | undefined;
  /** Bumped by every policy change: waits wake on it and re-read the policy. */
  policyVersion = 0;
  /**
   * Past this history length the running step stops (as if interrupted) and the run continues as
   * new, the step running again there.
   */
  readonly historyLimit: number;
  /** The step running now: an abort or a supersede cancels it, and with it any activity in flight. */
  private stepScope: CancellationScope | undefined;
  private currentStep: string | undefined;
  private lastMemo = '';
  private lastPhase: UpgradePhase | undefined;
  private lastReadiness: UpgradeReadiness['verdict'] | undefined;
  /** Kubernetes Events on the Cluster for each phase and gate change; awaited before the run ends. */
  readonly events: EventChain<ClusterEventInput>;
  private eventSeq = 0;

  constructor(input: ClusterUpgradeInput, recordEvent: (event: ClusterEventInput) => Promise<void>) {
    this.events = new EventChain(recordEvent);
    this.historyLimit = input.continueAsNewAtEvents ?? CONTINUE_AS_NEW_AT_EVENTS;
    const first = input.firstCall;
    this.status = input.carried ?? {
      cluster: input.cluster,
      ...(first.fromVersion ? { fromVersion: first.fromVersion } : {}),
      targetVersion: first.targetVersion,
      phase: 'Pending',
      startTime: iso(Date.now()),
      conditions: [],
      history: [],
      gates: {},
      reservedCapacity: [],
      policy: first.policy,
      ...(first.policyHash ? { policyHash: first.policyHash } : {}),
      ...(input.previousRunId ? { previousRunId: input.previousRunId } : {}),
    };
    this.queue = [...(input.carriedQueue ?? [])];
  }

  // ---- what the outside sees ---------------------------------------------------------

  /** The message every hook of this upgrade answers while it is held. */
  haltedMessage(): string | undefined {
    return haltedMessage(this.status);
  }

  publish(): void {
    const s = this.status;
    const halted = this.haltedMessage();
    const memo: ClusterUpgradeMemo = {
      targetVersion: s.targetVersion,
      phase: s.phase,
      ...(s.reason ? { reason: s.reason } : {}),
      ...(this.abort ? { abortRequested: this.abort.reason } : {}),
      ...(halted ? { halted } : {}),
      ...(s.schedule?.delayedSince ? { delayed: s.schedule.delayedSince } : {}),
      ...(s.policyHash ? { policyHash: s.policyHash } : {}),
      gates: s.gates,
      ...(s.overrides?.length ? { overrides: s.overrides.map((o) => `${o.gate}: ${o.reason}`) } : {}),
      ...(s.readiness ? { readiness: readinessMemo(s.readiness) } : {}),
    };
    const text = JSON.stringify(memo);
    // Only real changes reach history: polling must not grow it.
    if (text !== this.lastMemo) {
      upsertMemo({ [CLUSTER_UPGRADE_MEMO_KEY]: memo });
      this.lastMemo = text;
    }
    if (s.phase !== this.lastPhase) {
      upsertSearchAttributes([{ key: UpgradePhaseAttribute, value: s.phase }]);
      this.lastPhase = s.phase;
    }
    // Absent until the first re-check: histories from before re-checks upsert nothing new.
    if (s.readiness && s.readiness.verdict !== this.lastReadiness) {
      upsertSearchAttributes([{ key: UpgradeReadinessAttribute, value: s.readiness.verdict }]);
      this.lastReadiness = s.readiness.verdict;
    }
  }

  /**
   * A new readiness report: kept in the status, the memo and the search attribute, a condition
   * `Readiness`, and an Event when the verdict changed (a first report only when it is not Ready).
   */
  setReadiness(report: Omit<UpgradeReadiness, 'checkedAt'>, at: number): void {
    const before = this.status.readiness?.verdict;
    this.status.readiness = { verdict: report.verdict, checkedAt: iso(at), checks: report.checks };
    const conditionStatus = report.verdict === 'Ready' ? 'True' : report.verdict === 'Blocked' ? 'False' : 'Unknown';
    const e = readinessEvent(this.status.targetVersion, report.verdict, report.checks);
    this.setCondition(this.status.conditions, 'Readiness', conditionStatus, report.verdict, e.message, true);
    if (before !== report.verdict && (before !== undefined || report.verdict !== 'Ready'))
      this.event('UpgradeReadinessChanged', e.type, e.message);
    this.publish();
  }

  /** One Event per change (never per repeated message): keyed by run and sequence, so a retried activity adds none. */
  event(reason: ClusterEventReason, type: 'Normal' | 'Warning', message: string): void {
    const { workflowId, runId } = workflowInfo();
    const { namespace, name } = this.status.cluster;
    this.events.add({
      cluster: { namespace, name },
      reason,
      type,
      message,
      key: `${workflowId}/${runId}/${++this.eventSeq}`,
    });
  }

  setGate(call: Pick<HookCall, 'hook' | 'version'>, state: Gate['state'], message: string): void {
    const before = this.status.gates[gateKey(call.hook, call.version)];
    if (before?.state !== state || before.message === queuedGate(call).message) {
      if (state === 'Waiting') this.event('UpgradeStepWaiting', 'Normal', message);
      if (state === 'Open') this.event('UpgradeStepOpened', 'Normal', message);
    }
    this.status.gates[gateKey(call.hook, call.version)] = {
      state,
      message,
      retryAfterSeconds: state === 'Waiting' ? GATE_RETRY_AFTER_SECONDS : 0,
    };
    this.publish();
  }

  setCondition(
    list: UpgradeCondition[],
    type: string,
    conditionStatus: ConditionStatus,
    reason: string,
    message: string,
    probe = false,
  ): void {
    const now = iso(Date.now());
    let c = list.find((x) => x.type === type);
    if (!c) {
      c = { type, status: conditionStatus, reason, message, startTime: now, lastTransitionTime: now };
      list.push(c);
    } else if (c.status !== conditionStatus) c.lastTransitionTime = now;
    c.status = conditionStatus;
    c.reason = reason;
    c.message = message;
    if (probe) c.lastProbeTime = now;
    if (conditionStatus === 'True') c.completeTime = now;
  }

  versionEntry(version: string): VersionHistory {
    let e = this.status.history.find((h) => h.version === version);
    if (!e) {
      e = { version, phase: 'Upgrading', startTime: iso(Date.now()), conditions: [] };
      this.status.history.push(e);
    }
    return e;
  }

  setPhase(phase: UpgradePhase, reason?: string): void {
    const before = this.status.phase;
    this.status.phase = phase;
    if (reason === undefined) delete this.status.reason;
    else this.status.reason = reason;
    if (phase !== before) this.phaseEvent(phase, before);
    this.publish();
  }

  private phaseEvent(phase: UpgradePhase, before: UpgradePhase): void {
    const target = this.status.targetVersion;
    if (phase === 'Upgrading')
      this.event('UpgradeStarted', 'Normal', `upgrade to ${target} ${before === 'Pending' ? 'started' : 'resumed'}`);
    if (phase === 'Upgraded') this.event('UpgradeCompleted', 'Normal', `upgraded to ${target}`);
    // The message every hook answers while it is held: what CAPI's conditions show.
    if (phase === 'Failed')
      this.event('UpgradeFailed', 'Warning', this.haltedMessage() ?? `upgrade to ${target} failed`);
    if (phase === 'Aborted')
      this.event('UpgradeAborted', 'Warning', this.haltedMessage() ?? `upgrade to ${target} aborted`);
  }

  /** Not started `delayedAfter` past upgradeAt: a Warning Event once, the memo says since when. */
  markDelayed(since: string, message: string): void {
    (this.status.schedule ??= {}).delayedSince = since;
    this.setCondition(this.status.conditions, 'Delayed', 'True', 'NotStarted', message);
    this.event('UpgradeDelayed', 'Warning', message);
    this.publish();
  }

  /**
   * A gate let `step` through because of an override: recorded once per gate, step and reason in
   * the status and memo, a Warning Event and a log line (the audit trail of who skipped what).
   */
  recordOverride(gate: string, reason: string, step: string, text: string, grantedBy?: string): void {
    const list = (this.status.overrides ??= []);
    if (list.some((o) => o.gate === gate && o.step === step && o.reason === reason)) return;
    list.push({ gate, reason, ...(grantedBy !== undefined ? { grantedBy } : {}), step, at: iso(Date.now()) });
    if (list.length > POLICY_CHANGES_KEPT) list.splice(0, list.length - POLICY_CHANGES_KEPT);
    this.event('UpgradeGateOverridden', 'Warning', `${step}: ${text}`);
    log.warn('gate overridden', {
      gate,
      reason,
      ...(grantedBy !== undefined ? { grantedBy } : {}),
      step,
      cluster: `${this.status.cluster.namespace}/${this.status.cluster.name}`,
    });
    this.publish();
  }

  /** A gate that only warns (policy warn): a Warning Event per distinct message. */
  gateWarning(message: string): void {
    this.event('UpgradeGateWarning', 'Warning', message);
  }

  // ---- questions the loop and the steps ask ----------------------------------------------

  interrupted(): boolean {
    return this.abort !== undefined || this.superseding !== undefined || this.historyFull();
  }

  /** Time to continue as new. */
  historyFull(): boolean {
    const info = workflowInfo();
    return info.historyLength >= this.historyLimit || info.continueAsNewSuggested;
  }

  /** Aborted or Failed: no step runs until `resume` / `retry`. */
  halted(): boolean {
    return this.abort !== undefined || this.status.phase === 'Failed' || this.status.phase === 'Aborted';
  }

  /**
   * Waits up to `ms`; wakes early when interrupted or the policy changed (the caller re-reads it).
   * Cancelled with the step scope on abort.
   */
  async wait(ms: number): Promise<void> {
    const version = this.policyVersion;
    await condition(() => this.interrupted() || this.policyVersion !== version, Math.max(1, ms));
  }

  // ---- steps ----------------------------------------------------------------------------

  /** Runs `fn` as the current step, in a scope that an abort or a supersede cancels. */
  async runStep<T>(call: HookCall, fn: () => Promise<T>): Promise<T> {
    const scope = new CancellationScope();
    this.stepScope = scope;
    this.currentStep = `${call.hook} ${call.version}`;
    try {
      return await scope.run(fn);
    } finally {
      this.stepScope = undefined;
      this.currentStep = undefined;
    }
  }

  /** An expected error: record Failed with a stable cause and hold; `retry` runs the step again. */
  fail(call: HookCall, cause: string): void {
    this.status.failedStep = `${call.hook} ${call.version}`;
    this.setCondition(this.status.conditions, 'Failed', 'True', 'StepFailed', cause);
    this.queue.unshift(call);
    this.setPhase('Failed', cause);
  }

  // ---- messages from outside ------------------------------------------------------------

  /** No room for `call`'s gate (MAX_GATES_PER_UPGRADE); a new target supersedes whatever the count. */
  full(call: HookCall): boolean {
    return (
      call.targetVersion === this.status.targetVersion && Object.keys(this.status.gates).length >= MAX_GATES_PER_UPGRADE
    );
  }

  isNew(call: HookCall): boolean {
    if (call.targetVersion !== this.status.targetVersion) return this.superseding?.targetVersion !== call.targetVersion;
    return !(gateKey(call.hook, call.version) in this.status.gates);
  }

  accept(call: HookCall): Gate {
    const key = gateKey(call.hook, call.version);
    if (call.targetVersion !== this.status.targetVersion) {
      this.superseding = call;
      this.setGate(
        call,
        'Waiting',
        `${call.hook} ${call.version}: superseding the upgrade to ${this.status.targetVersion}`,
      );
      this.stepScope?.cancel();
    } else {
      this.adoptPolicy(call);
      this.queue.push(call);
      this.status.gates[key] = queuedGate(call);
      this.publish();
    }
    return this.status.gates[key] as Gate;
  }

  onAbort(arg: AbortInput | undefined): void {
    if (this.status.phase === 'Upgraded') return; // finished: nothing left to stop
    const reason = arg?.reason?.trim() || 'aborted by operator';
    // A final abort (cluster deletion) is never downgraded by a later operator abort.
    if (!this.abort?.final) this.abort = { reason, final: arg?.final === true };
    this.setCondition(this.status.conditions, 'Aborted', 'True', 'Aborted', this.abort.reason);
    // Halted at once: the next poll of every hook answers Failure, whatever step was running.
    this.setPhase('Aborted', this.abort.reason);
    this.stepScope?.cancel();
  }

  onResume(): void {
    if (this.halted()) this.resumeRequested = true;
  }

  onRetry(): void {
    // Retry re-runs a failed step; an abort needs an explicit resume.
    if (this.status.phase === 'Failed' && !this.abort) this.resumeRequested = true;
  }

  onPolicy(update: PolicyUpdate): void {
    if (update.policyHash === this.status.policyHash) return;
    this.adoptPolicy(update);
    this.publish();
  }

  private adoptPolicy(update: { policy: HookCall['policy']; policyHash?: string }): void {
    if (update.policyHash !== undefined && update.policyHash === this.status.policyHash) return;
    this.status.policy = update.policy;
    if (update.policyHash !== undefined) {
      this.status.policyHash = update.policyHash;
      const changes = [
        ...(this.status.policyChanges ?? []),
        { at: iso(Date.now()), step: this.currentStep ?? 'between steps', policyHash: update.policyHash },
      ];
      this.status.policyChanges = changes.slice(-POLICY_CHANGES_KEPT);
    }
    this.policyVersion++;
  }

  /** After resume or retry: held gates wait again and the queued steps run again. */
  resume(): void {
    this.abort = undefined;
    this.resumeRequested = false;
    delete this.status.failedStep;
    this.status.conditions = this.status.conditions.filter((c) => c.type !== 'Failed' && c.type !== 'Aborted');
    for (const call of this.queue) {
      const gate = this.status.gates[gateKey(call.hook, call.version)];
      if (gate?.state !== 'Open') this.setGate(call, 'Waiting', `${call.hook} ${call.version}: resumed`);
    }
    const started =
      this.status.history.length > 0 ||
      this.status.conditions.some(
        (c) => (c.type === 'PreHealthCheck' || c.type === 'Scheduled') && c.status === 'True',
      );
    this.setPhase(started ? 'Upgrading' : 'Pending');
  }
}
