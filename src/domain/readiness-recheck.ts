// Readiness while an upgrade waits to start (upgradeAt, a window, a freeze):
// when the next re-check is due, the plan check of an upgrade CAPI already
// planned, and the words the report leaves in the memo, the Event and the
// gate. Pure: the cluster upgrade workflow passes its clock and its state.
import type { ClusterUpgradeMemo } from '../model/cluster-upgrade.ts';
import { defaultAndValidateUpgradePlan } from './upgrade-plan-validator.ts';
import { unknownCheck, type EffectivePlan, type ReadinessCheck, type Verdict } from './readiness.ts';

/** The policy's default interval (setting readinessInterval). */
export const DEFAULT_READINESS_INTERVAL_MS = 15 * 60_000;
/** The interval's bounds: a re-check reads the whole workload cluster, so not more often than this. */
export const MIN_READINESS_INTERVAL_MS = 10_000;
export const MAX_READINESS_INTERVAL_MS = 24 * 3_600_000;
/** One more check this long before the upgrade may start, whatever the interval. */
export const FINAL_READINESS_LEAD_MS = 3_600_000;
/** Blocked checks the memo and the gate name (the status query has them all). */
const SHOWN = 3;
/** A check as a report or the upgrade's status holds it. */
type Check = Pick<ReadinessCheck, 'verdict' | 'message'> & { check: string };

/** Each message's share of the memo: the memo is read on every hook poll. */
const MESSAGE_LIMIT = 400;

/**
 * When the next re-check is due: at once when there is none yet; else `intervalMs` after the last,
 * or at `startsAt` − FINAL_READINESS_LEAD_MS when that comes first and the last check was before
 * it. Undefined when re-checks are off (interval 0).
 */
export function nextReadinessCheck(p: {
  lastCheckAt: number | undefined;
  intervalMs: number;
  /** When the upgrade may start (the end of its wait). */
  startsAt: number;
}): number | undefined {
  if (p.intervalMs <= 0) return undefined;
  if (p.lastCheckAt === undefined) return Number.NEGATIVE_INFINITY;
  const regular = p.lastCheckAt + p.intervalMs;
  const final = p.startsAt - FINAL_READINESS_LEAD_MS;
  return p.lastCheckAt < final ? Math.min(regular, final) : regular;
}

/**
 * The plan check of an upgrade that CAPI already planned (the BeforeClusterUpgrade request's
 * hops): Cluster API's rules and defaulting applied, with the lowest worker kubelet when known.
 */
export function plannedCheck(p: {
  fromVersion: string | undefined;
  lowestWorker: string | undefined;
  target: string;
  controlPlaneUpgrades: readonly string[];
  workersUpgrades: readonly string[];
}): { check: ReadinessCheck; plan?: EffectivePlan } {
  if (!p.fromVersion) return { check: unknownCheck('plan', 'the hook did not say the version it upgrades from') };
  const checked = defaultAndValidateUpgradePlan({
    fromControlPlane: p.fromVersion,
    fromWorkers: p.lowestWorker,
    to: p.target,
    controlPlaneUpgrades: [...p.controlPlaneUpgrades],
    workersUpgrades: [...p.workersUpgrades],
  });
  if (!checked.ok)
    return {
      check: {
        check: 'plan',
        verdict: 'Blocked',
        message: `the plan breaks Cluster API's rules: ${checked.errors.join('; ')}`,
      },
    };
  const plan = { controlPlaneUpgrades: checked.controlPlaneUpgrades, workersUpgrades: checked.workersUpgrades };
  const cp = plan.controlPlaneUpgrades.join(' → ') || 'none';
  const workers = plan.workersUpgrades.join(' → ') || 'none';
  return {
    check: { check: 'plan', verdict: 'Ready', message: `control plane ${p.fromVersion} → ${cp}; workers: ${workers}` },
    plan,
  };
}

/**
 * The plan check of a later step (the upgrade under way): CAPI runs its plan already, so the check
 * names what is left of it, which the other checks look at (the removed APIs of the hops left, the
 * kubelets against the next workers hop).
 */
export function underWayCheck(p: {
  step: string;
  controlPlaneUpgrades: readonly string[];
  workersUpgrades: readonly string[];
}): { check: ReadinessCheck; plan: EffectivePlan } {
  const plan = { controlPlaneUpgrades: [...p.controlPlaneUpgrades], workersUpgrades: [...p.workersUpgrades] };
  const cp = plan.controlPlaneUpgrades.join(' → ') || 'none';
  const workers = plan.workersUpgrades.join(' → ') || 'none';
  return {
    check: {
      check: 'plan',
      verdict: 'Ready',
      message: `under way at ${p.step}; control plane to go: ${cp}; workers: ${workers}`,
    },
    plan,
  };
}

const bounded = (text: string) => (text.length <= MESSAGE_LIMIT ? text : `${text.slice(0, MESSAGE_LIMIT - 3)}...`);

/** What holds the upgrade, `check: message` each (at most SHOWN, bounded); empty when nothing does. */
export function blockingText(checks: readonly Check[]): string[] {
  const blocked = checks.filter((c) => c.verdict === 'Blocked');
  const shown = blocked.slice(0, SHOWN).map((c) => bounded(`${c.check}: ${c.message}`));
  if (blocked.length > SHOWN) shown.push(`and ${blocked.length - SHOWN} more blocked checks`);
  return shown;
}

/** The Event of a new verdict (deterministic: no time, no count). */
export function readinessEvent(
  target: string,
  verdict: Verdict,
  checks: readonly Check[],
): { type: 'Normal' | 'Warning'; message: string } {
  if (verdict === 'Ready') return { type: 'Normal', message: `readiness for ${target}: Ready` };
  const why =
    verdict === 'Blocked'
      ? blockingText(checks)
      : checks.filter((c) => c.verdict === 'Unknown').map((c) => bounded(`${c.check}: ${c.message}`));
  return { type: 'Warning', message: `readiness for ${target}: ${verdict}: ${why.join('; ')}` };
}

/** What the gate adds at the window when the last report was Blocked: the report's own words. */
export function readinessGateText(checks: readonly Check[]): string {
  return `readiness Blocked: ${blockingText(checks).join('; ')}`;
}

/** The memo's share of a report: no time, so a re-check that finds the same adds no history. */
export function readinessMemo(r: {
  verdict: Verdict;
  checks: readonly Check[];
}): NonNullable<ClusterUpgradeMemo['readiness']> {
  const blocked = blockingText(r.checks);
  const checks = Object.fromEntries(r.checks.map((c) => [c.check, c.verdict]));
  return { verdict: r.verdict, checks, ...(blocked.length ? { blocked } : {}) };
}
