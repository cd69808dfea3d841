// The drain activity: rounds of survey, evict and force-delete (node-drainer.ts)
// until the node holds no pod a drain must move, paced by PDB refusals. It
// heartbeats its progress together with its start time and counts, so a retried
// attempt keeps the original deadlines and totals, and it stops promptly when
// cancelled. Which pods go is decided in src/domain/drain.ts.
import type { V1Pod } from '@kubernetes/client-node';
import { Context } from '@temporalio/activity';
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import { nodeDrainDuration } from '../metrics.ts';
import { summarizeDrain, type PdbBlock } from '../../domain/drain.ts';
import {
  isRecord,
  MACHINE_UPDATE_FAILURES,
  seconds,
  type MachineDeletionCheck,
  type WorkloadKubeConfig,
} from '../machine-update-common.ts';
import type { DrainProgress, DrainResult, MachineUpdateActivities } from '../machine-update-types.ts';
import { NodeDrainer, type DrainRound } from './node-drainer.ts';

/** Drain pacing: a refused (429) eviction is retried after 1 s, doubling up to 5 s; terminations are polled at 0.5 s. */
export const DRAIN_BACKOFF_MIN_MS = 1_000;
export const DRAIN_BACKOFF_MAX_MS = 5_000;
const DRAIN_WAIT_MS = 500;
/** A pod still there this long after its deletionTimestamp (end of its grace period) is force-deleted. */
export const STUCK_TERMINATING_MS = 30_000;
/** The same under an on-call forceDrain. */
export const STUCK_TERMINATING_FORCE_NOW_MS = 5_000;

/** What the drain heartbeats: the progress the workflow shows, plus what a retried attempt resumes from. */
export interface DrainCheckpoint extends DrainProgress {
  /** When the first attempt started (epoch ms): pdbForceDrainTimeoutMs and timeoutMs count from here. */
  startedAtMs: number;
  counts: DrainResult;
}

export function createDrainActivities(
  workload: WorkloadKubeConfig,
  machineDeleting: MachineDeletionCheck,
): Pick<MachineUpdateActivities, 'drain'> {
  return {
    async drain(input): Promise<DrainResult> {
      const previous = drainCheckpoint(Context.current().info.heartbeatDetails);
      const startedAtMs = input.options.startedAtMs ?? previous?.startedAtMs ?? Date.now();
      // The metric counts wall time since the drain began (across attempts and workers).
      const observe = (result: 'drained' | 'failed' | 'cancelled') =>
        nodeDrainDuration.observe({ result }, (Date.now() - startedAtMs) / 1000);
      try {
        const counts = await drainNode({ workload, machineDeleting }, input, previous, startedAtMs);
        observe('drained');
        return counts;
      } catch (err) {
        observe(err instanceof CancelledFailure ? 'cancelled' : 'failed');
        throw err;
      }
    },
  };
}

type DrainInput = Parameters<MachineUpdateActivities['drain']>[0];

/** One drain round's work on the pods: what it did and which evictions a PodDisruptionBudget refused. */
interface RoundOutcome {
  progressed: boolean;
  blocked: PdbBlock[];
}

async function drainNode(
  deps: { workload: WorkloadKubeConfig; machineDeleting: MachineDeletionCheck },
  { cluster, nodeName, options, machine }: DrainInput,
  previous: DrainCheckpoint | undefined,
  startedAtMs: number,
): Promise<DrainResult> {
  const ctx = Context.current();
  const counts: DrainResult = previous
    ? { ...previous.counts }
    : { evicted: 0, deleted: 0, forceDeleted: 0, skipped: 0 };
  const kc = await deps.workload(cluster);
  const drainer = new NodeDrainer(kc, nodeName, options);
  let backoffMs = DRAIN_BACKOFF_MIN_MS;
  let lastBlocked: PdbBlock[] = [];
  for (;;) {
    await throwIfCancelled(ctx);
    // A Machine being deleted is drained by Cluster API itself: stop here.
    if (machine) await deps.machineDeleting(machine);
    const round = await drainer.survey();
    counts.skipped = round.verdict.skip.length;
    if (round.verdict.blockers.length > 0) {
      throw ApplicationFailure.nonRetryable(
        `cannot drain node ${nodeName}: ${summarizeDrain(round.verdict)}`,
        MACHINE_UPDATE_FAILURES.drainBlocked,
      );
    }
    if (round.verdict.evict.length === 0 && round.terminating.length === 0) {
      ctx.heartbeat({
        remaining: 0,
        summary: drainSummary(round, []),
        startedAtMs,
        counts,
      } satisfies DrainCheckpoint);
      return counts;
    }
    const elapsed = Date.now() - startedAtMs;
    if (elapsed > options.timeoutMs) {
      throw ApplicationFailure.nonRetryable(
        `drain of node ${nodeName} did not finish within ${seconds(options.timeoutMs)}: ${drainSummary(round, lastBlocked)}`,
        MACHINE_UPDATE_FAILURES.drainTimeout,
      );
    }
    const { progressed, blocked } = await drainRound(ctx, drainer, round, options, elapsed, counts);
    lastBlocked = blocked;
    const remaining = round.verdict.evict.length + round.terminating.length;
    ctx.heartbeat({
      remaining,
      summary: drainSummary(round, blocked),
      startedAtMs,
      counts,
    } satisfies DrainCheckpoint);
    if (blocked.length > 0) {
      await ctx.sleep(backoffMs);
      backoffMs = progressed ? DRAIN_BACKOFF_MIN_MS : Math.min(backoffMs * 2, DRAIN_BACKOFF_MAX_MS);
    } else {
      backoffMs = DRAIN_BACKOFF_MIN_MS;
      await ctx.sleep(DRAIN_WAIT_MS);
    }
  }
}

/** One round: force-delete the pods stuck terminating, then evict (or, when forcing, delete) the rest; counts what it did. */
async function drainRound(
  ctx: Context,
  drainer: NodeDrainer,
  round: DrainRound,
  options: DrainInput['options'],
  elapsed: number,
  counts: DrainResult,
): Promise<RoundOutcome> {
  const forcing =
    options.forceNow === true ||
    (options.pdbForceDrainTimeoutMs !== undefined && elapsed >= options.pdbForceDrainTimeoutMs);
  let progressed = false;

  // Pods that outlive their grace period: force-deleted, as managed-upgrade-operator does.
  const stuckAfter = options.forceNow ? STUCK_TERMINATING_FORCE_NOW_MS : STUCK_TERMINATING_MS;
  for (const pod of round.terminating) {
    if (Date.now() < terminationDeadline(pod) + stuckAfter) continue;
    await throwIfCancelled(ctx);
    if (await drainer.remove(pod, 0)) {
      counts.forceDeleted++;
      progressed = true;
    }
  }

  const blocked: PdbBlock[] = [];
  for (const pod of round.verdict.evict) {
    await throwIfCancelled(ctx);
    const outcome = await drainer.evict(pod);
    if (outcome === 'evicted') {
      counts.evicted++;
      progressed = true;
    } else if (outcome !== 'gone') {
      if (forcing) {
        // Past pdbForceDrainTimeout (or forced by on-call): the budget is overridden.
        if (await drainer.remove(pod, options.gracePeriodSeconds)) {
          counts.deleted++;
          progressed = true;
        }
      } else {
        blocked.push(outcome);
      }
    }
  }
  return { progressed, blocked };
}

function drainCheckpoint(details: unknown): DrainCheckpoint | undefined {
  if (!isRecord(details) || typeof details.startedAtMs !== 'number' || !isRecord(details.counts)) return undefined;
  const c = details.counts;
  const n = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : 0);
  return {
    startedAtMs: details.startedAtMs,
    remaining: n(details.remaining),
    summary: typeof details.summary === 'string' ? details.summary : '',
    counts: { evicted: n(c.evicted), deleted: n(c.deleted), forceDeleted: n(c.forceDeleted), skipped: n(c.skipped) },
  };
}

function drainSummary(round: DrainRound, blocked: readonly PdbBlock[]): string {
  const line = summarizeDrain(round.verdict, blocked);
  const n = round.terminating.length;
  return n === 0 ? line : `${line}; waiting for ${n} terminating ${n === 1 ? 'pod' : 'pods'}`;
}

/** When a terminating pod's grace period ends (its deletionTimestamp). */
function terminationDeadline(pod: V1Pod): number {
  const ts = pod.metadata?.deletionTimestamp;
  return ts ? new Date(ts).getTime() : Date.now();
}

/** Awaiting `ctx.cancelled` throws the SDK's CancelledFailure. */
async function throwIfCancelled(ctx: Context): Promise<void> {
  if (ctx.cancellationSignal.aborted) await ctx.cancelled;
}
