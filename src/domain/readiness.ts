// The readiness of an upgrade before it runs: the checks the gates and steps
// make, each turned into a verdict (Ready, Blocked, or Unknown when it cannot
// tell) with a message that names the object and the fix. Pure and
// deterministic: the readiness workflow passes what its activities read and its
// own clock; the same state always gives the same words.
import type { HealthReport } from './cluster-health.ts';
import { zonedIso } from './calendar.ts';
import { overrideFor } from './gate-overrides.ts';
import { removedApiFindings, removedApisMessage, type DeprecatedApiScan } from './deprecated-apis.ts';
import { listText, type DrainSimulation, type NodeDrainSimulation } from './drain-simulation.ts';
import { MAX_WORKER_MINOR_SKEW, defaultAndValidateUpgradePlan } from './upgrade-plan-validator.ts';
import { generateUpgradePlan, type PlanPolicy } from './upgrade-plan.ts';
import { maintenanceHoldOf, upgradeAtWaitingFor } from './upgrade-schedule.ts';
import { minorOf, sortVersions, tryParseVersion } from './versions.ts';
import type { UpgradePolicy } from '../model/cluster-upgrade.ts';

export type Verdict = 'Ready' | 'Blocked' | 'Unknown';

export const READINESS_CHECKS = [
  'plan',
  'removed-apis',
  'drain',
  'capacity',
  'in-place',
  'version-skew',
  'health',
  'alerts',
  'calendar',
] as const;
export type ReadinessCheckName = (typeof READINESS_CHECKS)[number];

/**
 * The checks the workload survey (the surveyDrain activity) answers besides the drain, with the
 * other gates' own readers (readiness-gates.ts). A survey from before them answers none: the
 * report then leaves them out rather than calling them Unknown.
 */
export const SURVEY_GATE_CHECKS = ['capacity', 'in-place', 'alerts'] as const satisfies readonly ReadinessCheckName[];

export interface ReadinessCheck {
  check: ReadinessCheckName;
  verdict: Verdict;
  message: string;
}

export interface ReadinessReport {
  /** `namespace/name`. */
  cluster: string;
  fromVersion?: string;
  targetVersion: string;
  /** Blocked when any check is; else Unknown when any check is; else Ready. */
  verdict: Verdict;
  checks: ReadinessCheck[];
}

/** The plan the upgrade would run: the control-plane hops and the workers hops (Cluster API's defaulting applied). */
export interface EffectivePlan {
  controlPlaneUpgrades: string[];
  workersUpgrades: string[];
}

const ready = (check: ReadinessCheckName, message: string): ReadinessCheck => ({ check, verdict: 'Ready', message });
const blocked = (check: ReadinessCheckName, message: string): ReadinessCheck => ({
  check,
  verdict: 'Blocked',
  message,
});

/** A check that could not tell, saying what could not be read. */
export function unknownCheck(check: ReadinessCheckName, message: string): ReadinessCheck {
  return { check, verdict: 'Unknown', message };
}

export function overallVerdict(checks: readonly ReadinessCheck[]): Verdict {
  if (checks.some((c) => c.verdict === 'Blocked')) return 'Blocked';
  return checks.some((c) => c.verdict === 'Unknown') ? 'Unknown' : 'Ready';
}

/** The report of `checks`, in the order READINESS_CHECKS lists them. */
export function readinessReport(
  head: Omit<ReadinessReport, 'verdict' | 'checks'>,
  checks: readonly ReadinessCheck[],
): ReadinessReport {
  const order = (c: ReadinessCheck) => READINESS_CHECKS.indexOf(c.check);
  const sorted = [...checks].sort((a, b) => order(a) - order(b));
  return { ...head, verdict: overallVerdict(sorted), checks: sorted };
}

/** GenerateUpgradePlan from `from` to `to` under `policy`, then Cluster API's plan rules, as the hooks see it. */
export function planCheck(
  from: { controlPlane: string; workers?: string | undefined },
  to: string,
  policy: PlanPolicy,
): { check: ReadinessCheck; plan?: EffectivePlan } {
  const generated = generateUpgradePlan({ fromControlPlane: from.controlPlane, fromWorkers: from.workers, to }, policy);
  if (!generated.ok)
    return {
      check: blocked('plan', `${generated.message} (fix the target or the kubernetesVersions catalog setting)`),
    };
  const checked = defaultAndValidateUpgradePlan({
    fromControlPlane: from.controlPlane,
    fromWorkers: from.workers,
    to,
    ...generated.plan,
  });
  if (!checked.ok)
    return { check: blocked('plan', `the plan breaks Cluster API's rules: ${checked.errors.join('; ')}`) };
  const plan = { controlPlaneUpgrades: checked.controlPlaneUpgrades, workersUpgrades: checked.workersUpgrades };
  const cp = plan.controlPlaneUpgrades.join(' → ') || 'none';
  const workers = plan.workersUpgrades.join(' → ') || 'none';
  return { check: ready('plan', `control plane ${from.controlPlane} → ${cp}; workers: ${workers}`), plan };
}

/** Every version the upgrade passes through, and the target (the removed-API gate's chain). */
export function planChain(plan: EffectivePlan, target: string): string[] {
  return [...new Set([...plan.controlPlaneUpgrades, ...plan.workersUpgrades, target])];
}

/** The removed-API gate's verdict, from its reader's scan of the workload API server's /metrics. */
export function removedApisCheck(scan: DeprecatedApiScan, chain: readonly string[], target: string): ReadinessCheck {
  const findings = removedApiFindings(scan.uses, chain);
  if (findings.length > 0)
    return blocked(
      'removed-apis',
      `${removedApisMessage(target, findings)} (move those clients to the replacement APIs first)`,
    );
  return ready('removed-apis', `no requested API is removed by ${chain.join(', ')}`);
}

/** The pre-upgrade health check's verdict (its report, as the gate reads it). */
export function healthCheck(report: HealthReport): ReadinessCheck {
  if (report.healthy) return ready('health', report.summary);
  return blocked('health', `${report.summary} (the pre-upgrade health check would hold the upgrade until fixed)`);
}

function nodeProblems(n: NodeDrainSimulation): string[] {
  const problems: string[] = [];
  if (n.blockers.total > 0) problems.push(`node ${n.node} blocked by ${listText(n.blockers, 5)}`);
  for (const hold of n.pdbs)
    problems.push(
      `node ${n.node}: PodDisruptionBudget ${hold.pdb} (${hold.reason}) covers ${listText(hold.covers, 5)}`,
    );
  return problems;
}

/** The drain simulation's verdict: Blocked naming each blocking pod and budget, Ready with what would move. */
export function drainCheck(sim: DrainSimulation): ReadinessCheck {
  const problems = sim.nodes.flatMap(nodeProblems);
  if (problems.length > 0) {
    const shown = problems.slice(0, 5).join('; ');
    const more = problems.length > 5 ? `; and ${problems.length - 5} more` : '';
    const listed = sim.nodes.filter((n) => n.blockers.total > 0 || n.pdbs.length > 0).length;
    const nodes = sim.totals.held > listed ? `; ${sim.totals.held - listed} more nodes held` : '';
    return blocked(
      'drain',
      `${shown}${more}${nodes} (relax the budget's minAvailable or add replicas on other nodes; label pods the drain may leave cluster.x-k8s.io/drain=skip)`,
    );
  }
  const { nodes, evict, skip } = sim.totals;
  return ready('drain', `${nodes} nodes drain: ${evict} pods to evict, ${skip} skipped, none blocking`);
}

export interface Kubelet {
  node: string;
  version: string;
}

/** The lowest readable kubelet version of the workers (nodes that are not control plane); undefined: none. */
export function lowestWorkerVersion(kubelets: readonly (Kubelet & { controlPlane: boolean })[]): string | undefined {
  const versions = kubelets.filter((k) => !k.controlPlane && tryParseVersion(k.version).ok).map((k) => k.version);
  return sortVersions(versions)[0];
}

/**
 * Kubelets more than MAX_WORKER_MINOR_SKEW minors behind the highest version the control plane
 * reaches before the workers move (the first workers hop, or the target when none).
 */
export function skewCheck(kubelets: readonly Kubelet[], plan: EffectivePlan, target: string): ReadinessCheck {
  const limit = plan.workersUpgrades[0] ?? target;
  const limitParsed = tryParseVersion(limit);
  if (!limitParsed.ok) return unknownCheck('version-skew', `cannot read the version ${limit}`);
  const top = minorOf(limitParsed.version);
  const behind: string[] = [];
  const unreadable: string[] = [];
  for (const k of [...kubelets].sort((a, b) => (a.node < b.node ? -1 : a.node > b.node ? 1 : 0))) {
    const v = tryParseVersion(k.version);
    if (!v.ok) unreadable.push(k.node);
    else if (top - minorOf(v.version) > BigInt(MAX_WORKER_MINOR_SKEW)) behind.push(`${k.node} (${k.version})`);
  }
  if (behind.length > 0)
    return blocked(
      'version-skew',
      `kubelets more than ${MAX_WORKER_MINOR_SKEW} minors behind ${limit}: ${listText({ names: behind.slice(0, 5), total: behind.length })} (upgrade or replace those nodes first)`,
    );
  if (unreadable.length > 0)
    return unknownCheck(
      'version-skew',
      `nodes report no readable kubelet version: ${unreadable.slice(0, 5).join(', ')}`,
    );
  return ready('version-skew', `${kubelets.length} kubelets within ${MAX_WORKER_MINOR_SKEW} minors of ${limit}`);
}

/**
 * When the upgrade can next start under the calendar (upgradeAt, windows, freezes), in the policy's
 * time zone. A wait is not a block: the upgrade starts by itself then.
 */
export function calendarCheck(policy: UpgradePolicy, nowMs: number): ReadinessCheck {
  const zone = policy.maintenanceTimeZone ?? 'UTC';
  if (policy.upgradeAtMs !== undefined && nowMs < policy.upgradeAtMs) {
    const hold = maintenanceHoldOf(policy, policy.upgradeAtMs);
    const at = hold ? hold.until : policy.upgradeAtMs;
    return ready(
      'calendar',
      `can start at ${zonedIso(zone, at)} (${upgradeAtWaitingFor(policy.upgradeAtMs)}${hold ? `, then ${hold.waitingFor}` : ''})`,
    );
  }
  const hold = maintenanceHoldOf(policy, nowMs);
  if (hold) return ready('calendar', `can start at ${zonedIso(zone, hold.until)} (${hold.waitingFor})`);
  // An overridden calendar may be closed: the override's own words follow (withGateOverrides).
  if (overrideFor(policy.gateOverride, 'maintenance-window') !== undefined)
    return ready('calendar', 'can start now: no upgradeAt ahead');
  return ready('calendar', 'can start now: no upgradeAt ahead, the maintenance calendar is open');
}
