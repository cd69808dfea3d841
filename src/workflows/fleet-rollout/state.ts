// A fleet rollout's state and what changes it: the status the query returns,
// the memo (counts for `list` and the metrics), and the reactions to the
// operator's signals. The loop that runs the waves is in workflow.ts.
import { type CancellationScope, upsertMemo, workflowInfo } from '@temporalio/workflow';
import type { RolloutSettings } from '../../domain/fleet-rollout-plan.ts';
import { nextWaveMemo } from '../../domain/fleet-next-wave.ts';
import {
  FLEET_ROLLOUT_MEMO_KEY,
  type ApproveInput,
  type FleetRolloutMemo,
  type FleetRolloutStatus,
  type NextWaveCheck,
  type RolloutAbortInput,
  type RolloutCluster,
  type RolloutClusterState,
  type RolloutPhase,
  type RolloutWave,
} from '../../model/fleet-rollout.ts';

export const iso = (ms: number) => new Date(ms).toISOString();

/** A run continues as new at this history length (well under 2,000 events). */
export const ROLLOUT_CONTINUE_AS_NEW_AT = 1_500;
/** How often a cluster deferred by CAPI's pacing annotations is looked at again. */
export const DEFERRAL_RECHECK_MS = 60_000;
/**
 * patched() marker of the handling of clusters CAPI's pacing annotations defer: rollouts recorded before
 * it replay without it.
 */
export const CAPI_PACING_PATCH = 'capi-pacing-deferral';

/** What a run hands the next one when it continues as new. */
export interface CarriedRollout {
  status: FleetRolloutStatus;
  settings: RolloutSettings;
  paused: boolean;
  historyLimit?: number;
}

export class RolloutState {
  readonly status: FleetRolloutStatus;
  /** Set once the input is checked. */
  settings: RolloutSettings;
  paused: boolean;
  abort: Required<RolloutAbortInput> | undefined;
  historyLimit: number;
  /** Cancelled by abort and pause: a wait on the clusters ends early. */
  scope: CancellationScope | undefined;
  deferralRecheckMs = DEFERRAL_RECHECK_MS;
  /** Workflow time of the last look at the deferred clusters (0 after continue-as-new: look at once). */
  deferralCheckedAt = 0;
  /** A look at the next wave is under way (one at a time; not carried: the next run looks again). */
  lookingAhead = false;
  private lastMemo = '';

  constructor(status: FleetRolloutStatus, settings?: RolloutSettings, carried?: CarriedRollout) {
    this.status = status;
    this.settings = settings ?? {
      maxConcurrent: 1,
      failureBudget: 0,
      soakMs: 0,
      clusterDeadlineMs: 0,
      approveBefore: [],
      approveAfter: [],
    };
    this.paused = carried?.paused ?? false;
    this.historyLimit = carried?.historyLimit ?? ROLLOUT_CONTINUE_AS_NEW_AT;
  }

  carry(): CarriedRollout {
    return { status: this.status, settings: this.settings, paused: this.paused, historyLimit: this.historyLimit };
  }

  historyFull(): boolean {
    const info = workflowInfo();
    return info.historyLength >= this.historyLimit || info.continueAsNewSuggested;
  }

  wave(n: number): RolloutWave {
    const w = this.status.waves[n - 1];
    if (!w) throw new Error(`no wave ${n}`);
    return w;
  }

  clustersOf(n: number, state?: RolloutClusterState): RolloutCluster[] {
    return this.status.clusters.filter((c) => c.wave === n && (state === undefined || c.state === state));
  }

  upgrading(): RolloutCluster[] {
    return this.status.clusters.filter((c) => c.state === 'upgrading');
  }

  setCluster(c: RolloutCluster, state: RolloutClusterState, reason?: string): void {
    if (c.state === state && c.reason === reason) return;
    const now = iso(Date.now());
    if (state === 'upgrading' && (c.state === 'pending' || c.state === 'deferred')) c.startedAt = now;
    if (state === 'done' || state === 'failed' || state === 'skipped') c.finishedAt ??= now;
    c.state = state;
    if (reason === undefined) delete c.reason;
    else c.reason = reason;
  }

  /** Phase and message together: the message is what `status` and the memo show. */
  set(phase: RolloutPhase, message: string): void {
    this.status.phase = phase;
    this.status.message = message;
    this.publish();
  }

  counts(): FleetRolloutMemo['counts'] {
    const counts: Record<RolloutClusterState, number> = {
      pending: 0,
      upgrading: 0,
      done: 0,
      failed: 0,
      skipped: 0,
      deferred: 0,
    };
    for (const c of this.status.clusters) counts[c.state]++;
    // A memo without deferred clusters stays as it was before they existed.
    const { deferred, ...rest } = counts;
    return deferred > 0 ? { ...rest, deferred } : rest;
  }

  /** Whether the deferred clusters are due for another look. */
  deferralDue(): boolean {
    return Date.now() - this.deferralCheckedAt >= this.deferralRecheckMs;
  }

  /** The look ahead's state in the status and the memo; undefined drops it (its wave opened). */
  setNextWave(check: NextWaveCheck | undefined): void {
    if (check) this.status.nextWave = check;
    else delete this.status.nextWave;
    this.publish();
  }

  /** Only real changes reach history. */
  publish(): void {
    const running = this.status.waves.find((w) => w.state !== 'pending' && w.state !== 'done');
    const nextWave = nextWaveMemo(this.status.nextWave);
    const memo: FleetRolloutMemo = {
      phase: this.status.phase,
      message: this.status.message,
      ...(running ? { currentWave: running.wave } : {}),
      counts: this.counts(),
      // Only once a rollout has looked ahead: the memo of one that never did stays as it was.
      ...(nextWave ? { nextWave } : {}),
    };
    const text = JSON.stringify(memo);
    if (text === this.lastMemo) return;
    upsertMemo({ [FLEET_ROLLOUT_MEMO_KEY]: memo });
    this.lastMemo = text;
  }

  /** One line about the wave in progress, e.g. `wave 2 of 4: 3 upgrading, 5 pending, 1 failed (budget 1)`. */
  waveMessage(n: number): string {
    const parts: string[] = [];
    for (const state of ['upgrading', 'pending', 'deferred', 'done', 'failed', 'skipped'] as const) {
      const k = this.clustersOf(n, state).length;
      if (k > 0) parts.push(`${k} ${state}`);
    }
    return `wave ${n} of ${this.status.waves.length}: ${parts.join(', ') || 'empty'} (failure budget ${this.budget()})`;
  }

  budget(): number {
    return this.settings.failureBudget;
  }

  // ---- signals ---------------------------------------------------------------------

  onApprove(arg: ApproveInput): void {
    const w = this.status.waves[arg.wave - 1];
    const by = (arg.by ?? '').trim() || 'unknown';
    if (!w) return;
    if (w.state === 'waiting-approval' || (w.state === 'pending' && this.settings.approveBefore.includes(w.wave)))
      w.approvedBeforeBy ??= by;
    else if (w.state === 'waiting-approval-after') w.approvedAfterBy ??= by;
  }

  onPause(): void {
    if (this.abort || this.paused) return;
    this.paused = true;
    this.scope?.cancel();
  }

  onResume(): void {
    this.paused = false;
  }

  onAbort(arg: RolloutAbortInput | undefined): void {
    if (this.abort) return;
    this.abort = { reason: arg?.reason?.trim() || 'aborted by operator', abortInFlight: arg?.abortInFlight === true };
    this.scope?.cancel();
  }
}
