// Readiness while the upgrade waits to start: every `readinessInterval` (and
// once more an hour before it may start) the readiness run's own checks run
// again, read-only, under the upgrade's policy and CAPI's plan; the report
// goes into the status, memo, search attribute and an Event on a new
// verdict, and the gate at the window repeats what it blocks on. Newer than
// running upgrades (AUTO_UPGRADE): behind patched(READINESS_PATCH), so a
// history recorded before it replays the old way.
import { CancellationScope, condition, isCancellation, patched } from '@temporalio/workflow';
import {
  DEFAULT_READINESS_INTERVAL_MS,
  nextReadinessCheck,
  plannedCheck,
  readinessGateText,
  underWayCheck,
} from '../../domain/readiness-recheck.ts';
import { lowestWorkerVersion, skewCheck } from '../../domain/readiness.ts';
import type { HookCall } from '../../model/cluster-upgrade.ts';
import { ReadinessState } from '../readiness/state.ts';
import { calendar, health, policiesOf, readTarget, removedApis, surveyDrain } from '../readiness/steps.ts';
import type { UpgradeState } from './state.ts';

export const READINESS_PATCH = 'readiness-recheck';
/** Re-checks also while a later step (BeforeControlPlaneUpgrade, BeforeWorkersUpgrade) waits for a window. */
export const READINESS_STEPS_PATCH = 'readiness-recheck-steps';
/** The re-check's report honours the policy's gate overrides (a verdict, so maybe an Event, may differ). */
export const READINESS_OVERRIDES_PATCH = 'readiness-gate-overrides';

/**
 * When the next re-check is due while the upgrade waits until `startsAt`; undefined when there is
 * none (readinessInterval off, or a run from before re-checks: `patch` names those of this wait).
 */
export function readinessDue(s: UpgradeState, startsAt: number, patch = READINESS_PATCH): number | undefined {
  const interval = s.status.policy.readinessIntervalMs ?? DEFAULT_READINESS_INTERVAL_MS;
  if (interval <= 0 || !patched(patch)) return undefined;
  const last = s.status.readiness ? Date.parse(s.status.readiness.checkedAt) : undefined;
  return nextReadinessCheck({ lastCheckAt: last, intervalMs: interval, startsAt });
}

/**
 * One re-check, but never past `ms` (the wait's end): the wait ending, a policy change or an
 * interruption (abort, supersede, a full history) stops it, and the loop goes on at once.
 */
export async function recheckWhileWaiting(s: UpgradeState, call: HookCall, ms: number): Promise<void> {
  const scope = new CancellationScope();
  let done = false;
  const running = scope
    .run(() => recheckReadiness(s, call))
    .then(
      () => {
        done = true;
      },
      (err: unknown) => {
        done = true;
        if (!isCancellation(err)) throw err;
      },
    );
  const version = s.policyVersion;
  await condition(() => done || s.interrupted() || s.policyVersion !== version, Math.max(1, ms));
  if (!done) scope.cancel();
  await running;
}

/** One readiness check of this upgrade; an abort cancels it with the step. */
async function recheckReadiness(s: UpgradeState, call: HookCall): Promise<void> {
  const { cluster, targetVersion } = s.status;
  const r = new ReadinessState({ cluster, targetVersion });
  const target = await readTarget(r);
  // The Cluster's annotations for the drain's options; the upgrade's own policy for the rest.
  const base = target ? policiesOf(r, target) : undefined;
  if (base) {
    // The upgrade has no ExtensionConfig settings: the in-place check (their executor) is left out.
    const p = { ...base, upgrade: s.status.policy, inPlace: undefined };
    if (patched(READINESS_OVERRIDES_PATCH)) r.overrides = p.upgrade.gateOverride;
    calendar(r, p);
    const [survey] = await Promise.all([surveyDrain(r, p), health(r, p)]);
    r.fromVersion = call.fromVersion;
    const hops = { controlPlaneUpgrades: call.controlPlaneUpgrades ?? [], workersUpgrades: call.workersUpgrades ?? [] };
    const planned =
      call.hook === 'BeforeClusterUpgrade'
        ? plannedCheck({
            fromVersion: call.fromVersion,
            lowestWorker: survey ? lowestWorkerVersion(survey.kubelets) : undefined,
            target: targetVersion,
            ...hops,
          })
        : underWayCheck({ step: `${call.hook} ${call.version}`, ...hops });
    r.add(planned.check);
    if (!planned.plan) r.unknown(['removed-apis', 'version-skew'], 'no plan to check against');
    else {
      if (survey) r.add(skewCheck(survey.kubelets, planned.plan, targetVersion));
      await removedApis(r, p, planned.plan);
    }
  }
  const report = r.report();
  s.setReadiness({ verdict: report.verdict, checks: report.checks }, Date.now());
}

/** What the gate adds once the upgrade may start, when the last report was Blocked: its own words. */
export function readinessAtStart(s: UpgradeState): string | undefined {
  const r = s.status.readiness;
  return r?.verdict === 'Blocked' ? readinessGateText(r.checks) : undefined;
}
