// One function per check of a readiness run. Each reads through an activity
// (the upgrade's own readers where it has one) and turns what it read into a
// verdict with domain/readiness.ts; an activity that fails makes its check
// Unknown, naming why, and never ends the run.
import { proxyActivities } from '@temporalio/workflow';
import type { ReadinessActivities, DrainSurvey, ReadinessTarget } from '../../activities/readiness-types.ts';
import type { UpgradeActivities } from '../../activities/upgrade-types.ts';
import { resolveInPlacePolicy } from '../../domain/in-place-policy.ts';
import { resolveMachineUpdatePolicy } from '../../domain/machine-update-policy.ts';
import type { InPlaceExecutor } from '../../domain/readiness-gates.ts';
import { resolvePlanPolicy } from '../../domain/plan-policy.ts';
import { policyKeys } from '../../domain/policy-keys.ts';
import {
  READINESS_CHECKS,
  SURVEY_GATE_CHECKS,
  calendarCheck,
  drainCheck,
  healthCheck,
  lowestWorkerVersion,
  planChain,
  planCheck,
  removedApisCheck,
  skewCheck,
  unknownCheck,
  type EffectivePlan,
} from '../../domain/readiness.ts';
import { resolveUpgradePolicy } from '../../domain/upgrade-policy.ts';
import { DEFAULT_REMOVED_API_POLICY, type UpgradePolicy } from '../../model/cluster-upgrade.ts';
import { expectedFailure, failureCause } from '../failures.ts';
import type { ReadinessState } from './state.ts';

// Reads only: a few quick tries each, then the check says Unknown.
const acts = proxyActivities<
  ReadinessActivities & Pick<UpgradeActivities, 'checkDeprecatedApis' | 'checkClusterHealth'>
>({
  startToCloseTimeout: '2 minutes',
  heartbeatTimeout: '15 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '10 seconds', maximumAttempts: 3 },
});

/** `fn`'s result, or undefined after the failure's cause went to `onFailure` (cancellations and bugs still throw). */
async function attempt<T>(fn: () => Promise<T>, onFailure: (cause: string) => void): Promise<T | undefined> {
  try {
    return await fn();
  } catch (err) {
    if (!expectedFailure(err)) throw err;
    onFailure(failureCause(err));
    return undefined;
  }
}

export async function readTarget(s: ReadinessState): Promise<ReadinessTarget | undefined> {
  return await attempt(
    () => acts.readinessTarget({ cluster: s.input.cluster }),
    (cause) => s.unknown(ALL, `could not read the Cluster: ${cause}`),
  );
}

const ALL = READINESS_CHECKS;

export interface Policies {
  upgrade: UpgradePolicy;
  plan: Parameters<typeof planCheck>[2];
  drain: { deleteEmptyDirData: boolean; force: boolean; skipPodSelector?: string };
  /**
   * In-place updates (ExtensionConfig settings only): on, and which executor applies them; unset
   * when the caller does not know the settings (then the in-place check is left out).
   */
  inPlace?: { enabled: boolean; executor: InPlaceExecutor };
}

/** The policies an upgrade of this cluster would run under; a bad value makes every check Unknown, naming it. */
export function policiesOf(s: ReadinessState, target: ReadinessTarget): Policies | undefined {
  const sources = { settings: s.input.settings, annotations: target.annotations, namespace: s.input.cluster.namespace };
  const upgrade = resolveUpgradePolicy(sources);
  const plan = resolvePlanPolicy(sources);
  const machine = resolveMachineUpdatePolicy(s.input.settings);
  const inPlace = resolveInPlacePolicy(s.input.settings);
  const bad = [upgrade, plan, machine, inPlace].find((r) => !r.ok);
  if (bad && !bad.ok) {
    s.unknown(ALL, `the upgrade policy is refused: ${bad.message} (fix that setting or annotation)`);
    return undefined;
  }
  if (!upgrade.ok || !plan.ok || !machine.ok || !inPlace.ok) return undefined;
  const skip =
    target.annotations[policyKeys.drainSkipPodSelector.annotation]?.trim() || machine.policy.drainSkipPodSelector;
  return {
    upgrade: upgrade.policy,
    plan: plan.policy,
    drain: {
      deleteEmptyDirData: machine.policy.deleteEmptyDirData,
      force: machine.policy.forceDrainUnmanagedPods,
      ...(skip ? { skipPodSelector: skip } : {}),
    },
    inPlace: { enabled: inPlace.policy.enabled, executor: machine.policy.executor },
  };
}

export async function surveyDrain(s: ReadinessState, p: Policies): Promise<DrainSurvey | undefined> {
  const { upgrade } = p;
  const gates = {
    targetVersion: s.input.targetVersion,
    capacityReservation: upgrade.capacityReservation,
    ...(upgrade.alerts ? { alerts: upgrade.alerts } : {}),
    ...(p.inPlace ? { inPlace: p.inPlace } : {}),
  };
  const survey = await attempt(
    () => acts.surveyDrain({ cluster: s.input.cluster, ...p.drain, gates }),
    (cause) =>
      s.unknown(['drain', 'version-skew', ...SURVEY_GATE_CHECKS], `could not read the workload cluster: ${cause}`),
  );
  s.surveyed = true;
  if (survey) {
    s.add(drainCheck(survey.simulation));
    // capacity, in-place and alerts: each read by its gate's own reader in the same activity.
    for (const check of survey.gates ?? []) s.add(check);
  }
  return survey;
}

export async function health(s: ReadinessState, p: Policies): Promise<void> {
  const report = await attempt(
    () =>
      acts.checkClusterHealth({
        cluster: s.input.cluster,
        scope: 'pre',
        criticalNamespaces: p.upgrade.criticalNamespaces,
        blockingPdbPolicy: p.upgrade.blockingPdbPolicy,
      }),
    (cause) => s.unknown(['health'], `could not run the health check: ${cause}`),
  );
  if (report) s.add(healthCheck(report));
}

/** The plan from the Cluster's version (control plane) and the lowest kubelet of its workers. */
export function plan(
  s: ReadinessState,
  target: ReadinessTarget,
  p: Policies,
  survey?: DrainSurvey,
): EffectivePlan | undefined {
  if (!target.version) {
    s.unknown(['plan', 'removed-apis', 'version-skew'], 'the Cluster has no spec.topology.version to plan from');
    return undefined;
  }
  s.fromVersion = target.version;
  const workers = survey ? lowestWorkerVersion(survey.kubelets) : undefined;
  const result = planCheck({ controlPlane: target.version, workers }, s.input.targetVersion, p.plan);
  s.add(result.check);
  if (!result.plan) s.unknown(['removed-apis', 'version-skew'], 'no plan to check against');
  else if (survey) s.add(skewCheck(survey.kubelets, result.plan, s.input.targetVersion));
  return result.plan;
}

export async function removedApis(s: ReadinessState, p: Policies, effective: EffectivePlan): Promise<void> {
  const policy = p.upgrade.removedApiPolicy ?? DEFAULT_REMOVED_API_POLICY;
  if (policy === 'off') {
    s.add({ check: 'removed-apis', verdict: 'Ready', message: 'the removed-API gate is off (removedApiPolicy off)' });
    return;
  }
  const scan = await attempt(
    () => acts.checkDeprecatedApis({ cluster: s.input.cluster }),
    (cause) => s.unknown(['removed-apis'], `could not read the workload API server's /metrics: ${cause}`),
  );
  if (!scan) return;
  const check = removedApisCheck(scan, planChain(effective, s.input.targetVersion), s.input.targetVersion);
  // Under removedApiPolicy warn the gate records the finding and goes on.
  s.add(
    check.verdict === 'Blocked' && policy === 'warn'
      ? { ...check, verdict: 'Ready', message: `warns: ${check.message}` }
      : check,
  );
}

export function calendar(s: ReadinessState, p: Policies): void {
  try {
    s.add(calendarCheck(p.upgrade, Date.now()));
  } catch (err) {
    s.add(unknownCheck('calendar', `cannot read the calendar: ${err instanceof Error ? err.message : String(err)}`));
  }
}
