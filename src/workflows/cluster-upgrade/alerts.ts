// The alert gate and Alertmanager silences of a cluster upgrade. Before
// each step and after each step's health check the gate holds (not fails) while matching alerts
// fire or Prometheus cannot be read, re-checking on a timer, and fails the upgrade once it has
// held one step for `alertHoldTimeout`. A silence covers each control-plane and workers step,
// from its Before hook to its After hook, and is expired when the step ends or the upgrade is
// aborted, fails or is superseded. Both are newer than running upgrades (AUTO_UPGRADE): their
// commands are behind patched(), asked only when the policy uses them.
import { CancellationScope, isCancellation, patched, proxyActivities, workflowInfo } from '@temporalio/workflow';
import type { AlertActivities } from '../../activities/alert-types.ts';
import {
  alertSourceUnreachableMessage,
  alertsHeldMessage,
  alertTimeoutCause,
  silenceComment,
} from '../../domain/alert-gate.ts';
import { formatDuration } from '../../domain/durations.ts';
import type { AlertPolicy, AlertReport } from '../../model/alerts.ts';
import type { HookCall } from '../../model/cluster-upgrade.ts';
import { expectedFailure, failureCause } from '../failures.ts';
import { overridden } from './gates.ts';
import { iso, type UpgradeState } from './state.ts';

export const ALERT_GATE_PATCH = 'alert-gate';
export const ALERT_SILENCES_PATCH = 'alert-silences';

// Each request is bounded (10 s) by the activity; a few quick tries, then the gate counts it unreachable.
const alertActivities = proxyActivities<AlertActivities>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '10 seconds', maximumAttempts: 3 },
});

const RECHECK_INITIAL_MS = 2_000;
const RECHECK_MAX_MS = 15_000;

async function check(s: UpgradeState, policy: AlertPolicy): Promise<AlertReport> {
  try {
    return await alertActivities.checkAlerts({ cluster: clusterOf(s), policy });
  } catch (err) {
    if (!expectedFailure(err)) throw err;
    return { reachable: false, cause: failureCause(err) };
  }
}

const clusterOf = (s: UpgradeState) => ({ namespace: s.status.cluster.namespace, name: s.status.cluster.name });

function clearHeld(s: UpgradeState): void {
  const alerts = s.status.alerts;
  if (!alerts?.held) return;
  delete alerts.held;
  if (Object.keys(alerts).length === 0) delete s.status.alerts;
}

/** Holds while matching alerts fire; true when none do (or the gate is off), false when failed or interrupted. */
export async function alertGate(s: UpgradeState, call: HookCall): Promise<boolean> {
  if (!s.status.policy.alerts?.prometheusUrl || !patched(ALERT_GATE_PATCH)) return true;
  const step = `${call.hook} ${call.version}`;
  const target = s.status.targetVersion;
  let delay = RECHECK_INITIAL_MS;
  for (;;) {
    // Re-read each round: a policy change (an annotation removed, a longer timeout) applies at once.
    const policy = s.status.policy.alerts;
    if (!policy?.prometheusUrl) break;
    // override-gates: alerts (with a recorded reason) lets the step through, also while it is held.
    if (overridden(s, 'alerts', call) !== undefined) break;
    const report = await check(s, policy);
    if (report.reachable && report.firingCount === 0) break;
    // A hold the previous run began (continued as new) counts from where it began.
    const held = s.status.alerts?.held;
    const since = held?.step === step ? Date.parse(held.since) : Date.now();
    if (Date.now() - since >= policy.holdTimeoutMs) {
      clearHeld(s);
      s.fail(call, alertTimeoutCause(report, formatDuration(policy.holdTimeoutMs)));
      return false;
    }
    const message = report.reachable
      ? alertsHeldMessage(target, report.firing, report.firingCount)
      : alertSourceUnreachableMessage(target, report.cause);
    if (held?.message !== message || held.step !== step) s.event('UpgradeHeldByAlerts', 'Warning', message);
    (s.status.alerts ??= {}).held = {
      step,
      since: iso(since),
      message,
      firing: report.reachable ? report.firing : [],
      ...(report.reachable ? {} : { unreachable: report.cause }),
    };
    s.setGate(call, 'Waiting', `${step}: ${message}`);
    await s.wait(Math.min(delay, since + policy.holdTimeoutMs - Date.now()));
    delay = Math.min(delay * 2, RECHECK_MAX_MS);
    if (s.interrupted()) {
      // Only a run continuing as new keeps the hold: after an abort and resume it starts over.
      if (!s.historyFull() || s.abort || s.superseding) clearHeld(s);
      return false;
    }
  }
  clearHeld(s);
  return true;
}

/** Opens the step's silence (once: a retried activity finds it by its comment). Never fails the step. */
export async function openSilence(s: UpgradeState, call: HookCall): Promise<void> {
  const policy = s.status.policy.alerts;
  if (!policy?.alertmanagerUrl || !patched(ALERT_SILENCES_PATCH)) return;
  const step = `${call.hook.replace(/^Before/, '')} ${call.version}`;
  if (s.status.alerts?.silence?.step === step) return;
  await closeSilence(s);
  const comment = silenceComment(workflowInfo().workflowId, s.status.targetVersion, step);
  // Recorded before it is asked for: an abort while it is created still expires it.
  const silence: { step: string; comment: string; id?: string } = { step, comment };
  (s.status.alerts ??= {}).silence = silence;
  try {
    const { id } = await alertActivities.ensureSilence({ cluster: clusterOf(s), policy, comment });
    silence.id = id;
    s.event(
      'AlertSilenceCreated',
      'Normal',
      `silenced this cluster's alerts in Alertmanager for ${step} (silence ${id})`,
    );
  } catch (err) {
    if (isCancellation(err) || !expectedFailure(err)) throw err;
    s.event(
      'AlertSilenceFailed',
      'Warning',
      `could not silence this cluster's alerts for ${step}: ${failureCause(err)}`,
    );
  }
}

/** Expires the open silence, whatever ended its step (runs to the end even when an abort arrives). */
export async function closeSilence(s: UpgradeState): Promise<void> {
  const silence = s.status.alerts?.silence;
  if (!silence) return;
  const policy = s.status.policy.alerts;
  await CancellationScope.nonCancellable(async () => {
    // alertmanagerUrl removed meanwhile: the silence ends at its endsAt (alertSilenceDuration).
    if (policy?.alertmanagerUrl) {
      try {
        await alertActivities.expireSilences({ cluster: clusterOf(s), policy, comment: silence.comment });
        s.event('AlertSilenceExpired', 'Normal', `expired the Alertmanager silence for ${silence.step}`);
      } catch (err) {
        if (!expectedFailure(err)) throw err;
        s.event(
          'AlertSilenceFailed',
          'Warning',
          `could not expire the silence for ${silence.step}: ${failureCause(err)}; it ends at its endsAt`,
        );
      }
    }
    const alerts = s.status.alerts;
    if (alerts) {
      delete alerts.silence;
      if (Object.keys(alerts).length === 0) delete s.status.alerts;
    }
  });
}
