// The readiness verdicts of the gates the workload survey reads with their own
// readers: the capacity reservation (activities/capacity.ts, read without
// scaling anything), node agents or node upgraders for in-place updates (the
// CanUpdate* hooks' Lease checks, platform/kube/node-agents.ts and platform/kube/node-upgraders.ts)
// and firing alerts (the alert gate's checkAlerts). Each verdict is what the gate
// would do now: a gate that is not configured says Ready and why; a gate that
// would let the upgrade through but change its shape (in place declined, so
// CAPI rolls the machines out) says Ready with `warns:`, as removedApiPolicy
// warn does. Pure: the activity passes what it read.
import { alertSourceUnreachableMessage, alertsHeldMessage } from './alert-gate.ts';
import { listText } from './drain-simulation.ts';
import { overriddenText, overrideFor, type GateOverride, type GateId } from './gate-overrides.ts';
import type { ReadinessCheck, ReadinessCheckName } from './readiness.ts';
import type { AlertReport } from '../model/alerts.ts';
import type { ReservedCapacity } from '../model/cluster-upgrade.ts';

/** What the reservation step would find now, read without writing. */
export type CapacityPreview =
  /** The Cluster's reservation record cannot be read: the step fails on it (the gate's own message). */
  | { invalidRecord: string }
  | {
      /** A reservation is recorded already (a previous run's, not released): the step reuses it. */
      recorded: boolean;
      /** What the step would scale (or has scaled), sorted. */
      entries: ReservedCapacity[];
      /**
       * One line per MachineDeployment with fewer Ready machines than it has now (or than the
       * recorded reservation wants): the step waits for every machine Ready, so these would hold it.
       */
      notReady: string[];
    };

/** The capacity reservation's verdict; `count` is capacityReservation (0: none). */
export function capacityCheck(count: number, preview: CapacityPreview | undefined): ReadinessCheck {
  const check = 'capacity';
  if (count <= 0)
    return {
      check,
      verdict: 'Ready',
      message: "no capacity reservation (capacityReservation 0): the workers roll with each MachineDeployment's surge",
    };
  if (!preview) return { check, verdict: 'Unknown', message: 'the reservation was not read' };
  if ('invalidRecord' in preview)
    return {
      check,
      verdict: 'Blocked',
      message: `${preview.invalidRecord} (the reservation step fails on it: remove the annotation once no reservation is in place)`,
    };
  if (preview.entries.length === 0)
    return {
      check,
      verdict: 'Ready',
      message: `capacityReservation ${count}: nothing to reserve (no MachineDeployment with replicas)`,
    };
  const scaled = preview.entries.map((e) => `${e.machineDeployment} ${e.originalReplicas}→${e.reservedReplicas}`);
  const what = `${preview.recorded ? 'reserved already' : 'would reserve'} ${listText({ names: scaled.slice(0, 5), total: scaled.length })}`;
  if (preview.notReady.length > 0)
    return {
      check,
      verdict: 'Blocked',
      message: `${what}, and waits for every machine Ready: ${preview.notReady.slice(0, 5).join('; ')}${preview.notReady.length > 5 ? `; and ${preview.notReady.length - 5} more` : ''} (fix or replace the machines that are not Ready)`,
    };
  return { check, verdict: 'Ready', message: `${what} (capacityReservation ${count}); every machine is Ready now` };
}

export type InPlaceExecutor = 'job' | 'delegate' | 'management';

/** What the in-place hooks would find now. */
export interface InPlaceSurvey {
  enabled: boolean;
  executor: InPlaceExecutor;
  /** delegate: nodes checked; management: infrastructure kinds checked. */
  checked: number;
  /** The hooks' own words for each node (or kind) nobody serves: CAPI rolls those machines out instead. */
  missing: string[];
  /** The hooks' words for each one that could not be checked. */
  unreadable: string[];
}

/** Node agents (delegate) or node upgraders (management) for in-place updates. */
export function inPlaceCheck(survey: InPlaceSurvey): ReadinessCheck {
  const check = 'in-place';
  if (!survey.enabled)
    return {
      check,
      verdict: 'Ready',
      message: 'in-place updates are off (inPlaceUpdates false): Cluster API rolls the machines out',
    };
  if (survey.executor === 'job')
    return {
      check,
      verdict: 'Ready',
      message: 'nodeUpgradeExecutor job: a Job updates each node in place; no node agent to check',
    };
  const who = survey.executor === 'delegate' ? 'node agents' : 'node upgraders';
  const shown = (lines: string[]) =>
    `${lines.slice(0, 5).join('; ')}${lines.length > 5 ? `; and ${lines.length - 5} more` : ''}`;
  if (survey.unreadable.length > 0) return { check, verdict: 'Unknown', message: shown(survey.unreadable) };
  if (survey.missing.length > 0) {
    const fix =
      survey.executor === 'delegate'
        ? 'start the node agent on those nodes to update them in place'
        : 'run the node upgrader for that kind to update its machines in place';
    return {
      check,
      verdict: 'Ready',
      message: `warns: ${shown(survey.missing)}: Cluster API rolls those machines out instead (${fix})`,
    };
  }
  if (survey.checked === 0)
    return {
      check,
      verdict: 'Ready',
      message: `nodeUpgradeExecutor ${survey.executor}: no machine to check for ${who}`,
    };
  return {
    check,
    verdict: 'Ready',
    message: `nodeUpgradeExecutor ${survey.executor}: ${who} serve every ${survey.executor === 'delegate' ? `node (${survey.checked})` : `infrastructure kind (${survey.checked})`}`,
  };
}

/** The alert gate's verdict from its reader's report; undefined: no alert gate configured. */
export function alertsCheck(target: string, report: AlertReport | undefined): ReadinessCheck {
  const check = 'alerts';
  if (!report) return { check, verdict: 'Ready', message: 'no alert gate configured (alertPrometheusUrl is not set)' };
  if (!report.reachable)
    return {
      check,
      verdict: 'Unknown',
      message: `${alertSourceUnreachableMessage(target, report.cause)}: the gate would hold the upgrade while it cannot read it`,
    };
  if (report.firingCount > 0)
    return {
      check,
      verdict: 'Blocked',
      message: `${alertsHeldMessage(target, report.firing, report.firingCount)} (resolve or silence them, or list them in alertIgnore)`,
    };
  return { check, verdict: 'Ready', message: 'no alert that holds the upgrade is firing in prometheus' };
}

/** The readiness checks whose gate an override (annotation override-gates) lets through. */
const OVERRIDABLE: Partial<Record<ReadinessCheckName, GateId>> = {
  'removed-apis': 'removed-apis',
  alerts: 'alerts',
  calendar: 'maintenance-window',
};

/**
 * The checks as the gates will treat them under `override`: an overridden gate lets the step
 * through whatever it finds (held or unreadable), so its check is Ready, keeping what it found
 * (`overridden: …`) and naming the override and its grant as the gate records it.
 */
export function withGateOverrides(
  checks: readonly ReadinessCheck[],
  override: GateOverride | undefined,
): ReadinessCheck[] {
  return checks.map((c) => {
    const gate = OVERRIDABLE[c.check];
    const reason = gate === undefined ? undefined : overrideFor(override, gate);
    if (gate === undefined || reason === undefined) return c;
    const text = overriddenText(gate, reason, override?.grantedBy);
    const found = c.verdict === 'Ready' ? c.message : `overridden: ${c.message}`;
    return { check: c.check, verdict: 'Ready', message: `${found}; ${text}` };
  });
}
