// What holds an upgrade, one line per gate kind (so that the CLI's `status`
// says why an upgrade waits, not only that it does): the maintenance calendar (window or
// freeze), the removed-API gate, the alert gate (and the step's silence), the machine updates' blocking pods and
// post-update delay, CAPI's pacing annotations and the next wave's look ahead (fleet rollouts), and the
// overrides that let a gate through. Pure: reads what operations.ts fetched.
import type { ClusterUpgradeMemo, ClusterUpgradeStatus } from '../model/cluster-upgrade.ts';
import type { FleetRolloutStatus } from '../model/fleet-rollout.ts';
import type { MachineUpdateStatus } from '../model/machine-update.ts';

const HELD = 'held by:   ';

/** The machine update's own gate, when one holds it: `blocking-pods …` or `post-update-delay …`. */
export function machineUpdateHold(s: MachineUpdateStatus | undefined): string | undefined {
  if (!s || s.phase !== 'Updating') return undefined;
  if (s.step === 'BlockingPods' && s.blockingPods) {
    const b = s.blockingPods;
    return `blocking-pods: ${b.count} pod${b.count === 1 ? '' : 's'} matching ${b.selector}${b.first ? ` (${b.first}…)` : ''}`;
  }
  if (s.step === 'PostUpdateDelay' && s.delayUntil) return `post-update-delay: until ${s.delayUntil}`;
  return undefined;
}

export interface HoldSources {
  status?: ClusterUpgradeStatus | undefined;
  memo?: ClusterUpgradeMemo | undefined;
  machineUpdates: { machine: string; held?: string }[];
}

/** `held by:` and `override:` lines, in a fixed order. */
export function holdLines(r: HoldSources): string[] {
  const out: string[] = [];
  const s = r.status;
  const schedule = s?.schedule;
  if (schedule?.freeze && schedule.nextWindowOpens && Date.parse(schedule.freeze.from) <= Date.now())
    out.push(
      `${HELD}maintenance-window: freeze "${schedule.freeze.reason}" until ${schedule.freeze.to}; next opening ${schedule.nextWindowOpens}`,
    );
  else if (schedule?.nextWindowOpens)
    out.push(`${HELD}maintenance-window: closed; next opening ${schedule.nextWindowOpens}`);
  const removed = s?.removedApis;
  if (removed && (removed.result === 'held' || (removed.result === 'unreadable' && removed.policy === 'fail')))
    out.push(`${HELD}${removed.message}`);
  else if (removed && (removed.result === 'warned' || removed.result === 'unreadable'))
    out.push(`warning:   ${removed.message} (policy warn: not held)`);
  const alerts = s?.alerts;
  if (alerts?.held) out.push(`${HELD}alerts at ${alerts.held.step} since ${alerts.held.since}: ${alerts.held.message}`);
  if (alerts?.silence)
    out.push(`silence:   ${alerts.silence.id ?? '(being created)'} for ${alerts.silence.step} (Alertmanager)`);
  for (const m of r.machineUpdates) if (m.held) out.push(`${HELD}${m.held} on ${m.machine}`);
  if (s?.overrides?.length) {
    for (const o of s.overrides)
      out.push(
        `override:  ${o.gate} at ${o.step} (${o.at}${o.grantedBy ? `, granted by ${o.grantedBy}` : ''}): ${o.reason}`,
      );
  } else {
    for (const o of r.memo?.overrides ?? []) out.push(`override:  ${o}`);
  }
  return out;
}

/** A rollout's clusters held by CAPI's own pacing (defer-upgrade / hold-upgrade-sequence). */
/** The look ahead at the next wave: advice (the clusters that will hold it), not something that holds the rollout. */
export function nextWaveLines(s: FleetRolloutStatus): string[] {
  return s.nextWave ? [`next wave: ${s.nextWave.message}`] : [];
}

export function rolloutHoldLines(s: FleetRolloutStatus): string[] {
  return s.clusters
    .filter((c) => c.state === 'deferred')
    .map((c) => `${HELD}capi-pacing on ${c.namespace}/${c.name}: ${c.reason ?? 'deferred by CAPI annotation'}`);
}
