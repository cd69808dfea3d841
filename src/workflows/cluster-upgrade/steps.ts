// One function per step of a cluster upgrade, each the work behind one hook's
// gate. A step returns true when its gate may open, false when it failed (the
// state is then Failed) or was interrupted; an abort cancels it, activities
// in flight included. Expected errors never escape: they become `fail()`.
import { CancellationScope, proxyActivities } from '@temporalio/workflow';
import type {
  CapacityReadiness,
  HealthReport,
  HealthScope,
  UpgradeActivities,
} from '../../activities/upgrade-types.ts';
import { formatDuration } from '../../domain/durations.ts';
import { PRE_HEALTH_CHECK_RUNNING, upgradeAtWaitingFor } from '../../domain/upgrade-schedule.ts';
import { capiMessage, gateKey, type HookCall, type UpgradeCondition } from '../../model/cluster-upgrade.ts';
import { expectedFailure, failureCause } from '../failures.ts';
import { removedApiGate } from './gates.ts';
import { READINESS_STEPS_PATCH, readinessAtStart, readinessDue, recheckWhileWaiting } from './readiness.ts';
import { alertGate, closeSilence, openSilence } from './alerts.ts';
import { delayCheck, maintenanceHold, started } from './schedule.ts';
import { iso, type UpgradeState } from './state.ts';

// Probes are short and repeated by the workflow itself: few retries each, a heartbeat so an
// abort reaches a probe stuck on an unreachable cluster.
const probes = proxyActivities<UpgradeActivities>({
  startToCloseTimeout: '1 minute',
  heartbeatTimeout: '10 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '10 seconds', maximumAttempts: 3 },
});
// Changes to the management cluster: retried longer, then the upgrade fails (and can be retried).
const changes = proxyActivities<UpgradeActivities>({
  startToCloseTimeout: '2 minutes',
  heartbeatTimeout: '30 seconds',
  retry: { initialInterval: '2 seconds', backoffCoefficient: 2, maximumInterval: '30 seconds', maximumAttempts: 8 },
});

const PROBE_INITIAL_MS = 2_000;
const PROBE_MAX_MS = 30_000;
const DEFAULT_CAPACITY_READY_TIMEOUT_MS = 15 * 60_000;

/** Scheduled + PreHealthCheck: the gate of BeforeClusterUpgrade. Re-reads the policy whenever it changes. */
export async function beginUpgrade(s: UpgradeState, call: HookCall): Promise<boolean> {
  const status = s.status;
  const firstSeen = Date.parse(status.startTime);
  for (;;) {
    const policy = status.policy;
    const notBefore = policy.upgradeAtMs ?? firstSeen;
    const deadline = policy.commenceWithinMs !== undefined ? notBefore + policy.commenceWithinMs : undefined;
    const now = Date.now();
    if (deadline !== undefined && now >= deadline) {
      const reason = `the upgrade could not start within ${formatDuration(policy.commenceWithinMs ?? 0)} of ${iso(notBefore)}`;
      s.setCondition(status.conditions, 'Scheduled', 'False', 'CommenceWithinExpired', reason);
      s.fail(call, reason);
      return false;
    }
    let waitUntil: number | undefined;
    let waitingFor = '';
    if (now < notBefore) {
      waitUntil = notBefore;
      waitingFor = upgradeAtWaitingFor(notBefore);
    } else {
      const hold = maintenanceHold(s, now, call);
      if (hold) ({ until: waitUntil, waitingFor } = hold);
    }
    if (waitUntil === undefined) {
      started(s, now);
      s.setCondition(status.conditions, 'Scheduled', 'True', 'StartAllowed', `started at or after ${iso(notBefore)}`);
      break;
    }
    const delay = delayCheck(s, notBefore, now);
    s.setCondition(status.conditions, 'Scheduled', 'False', 'Waiting', waitingFor);
    s.setGate(call, 'Waiting', `${call.hook} ${call.version}: ${delay.prefix}${waitingFor}`);
    const end = Math.min(waitUntil, deadline ?? Infinity, delay.wakeAt ?? Infinity);
    const readiness = readinessDue(s, waitUntil);
    if (readiness !== undefined && readiness <= now) await recheckWhileWaiting(s, call, end - now);
    else await s.wait(Math.min(end, readiness ?? Infinity) - now);
    if (s.interrupted()) return false;
  }
  s.setPhase('Upgrading');
  // The last report held something: the gate says so in the report's words (and an Event).
  const blocked = readinessAtStart(s);
  if (blocked) s.gateWarning(`${call.hook} ${call.version}: ${blocked}`);
  s.setGate(
    call,
    'Waiting',
    capiMessage(`${call.hook} ${call.version}: ${PRE_HEALTH_CHECK_RUNNING}${blocked ? `; ${blocked}` : ''}`),
  );
  if (!(await probeUntilHealthy(s, call, 'pre', status.conditions, 'PreHealthCheck'))) return false;
  return await removedApiGate(s, call, status.conditions);
}

/**
 * Waits until the maintenance window (if any) is open, re-checking readiness meanwhile as the
 * first step's wait does; false when interrupted.
 */
export async function awaitWindow(s: UpgradeState, call: HookCall): Promise<boolean> {
  let rechecked = false;
  for (;;) {
    const now = Date.now();
    const hold = maintenanceHold(s, now, call);
    if (!hold) break;
    s.setGate(call, 'Waiting', `${call.hook} ${call.version}: ${hold.waitingFor}`);
    const readiness = readinessDue(s, hold.until, READINESS_STEPS_PATCH);
    if (readiness !== undefined && readiness <= now) {
      await recheckWhileWaiting(s, call, hold.until - now);
      rechecked = true;
    } else await s.wait(Math.min(hold.until, readiness ?? Infinity) - now);
    if (s.interrupted()) return false;
  }
  // The window opened on a Blocked report: the step goes on (as at the first step), saying so.
  const blocked = rechecked ? readinessAtStart(s) : undefined;
  if (blocked) s.gateWarning(`${call.hook} ${call.version}: ${blocked}`);
  return true;
}

/** One probe; a probe that could not run (cluster unreachable, API errors) counts as unhealthy. */
async function probe(s: UpgradeState, scope: HealthScope, version: string): Promise<HealthReport> {
  const policy = s.status.policy;
  try {
    return await probes.checkClusterHealth({
      cluster: s.status.cluster,
      scope,
      ...(scope === 'pre' ? {} : { version }),
      criticalNamespaces: policy.criticalNamespaces,
      blockingPdbPolicy: policy.blockingPdbPolicy,
    });
  } catch (err) {
    if (!expectedFailure(err)) throw err;
    const summary = `the health check could not run: ${failureCause(err)}`;
    return { healthy: false, summary, findings: [summary], warnings: [] };
  }
}

/**
 * One repeated wait of a step: `check` with backoff (2 s doubling to 30 s) until `done`, or until
 * `timeoutMs` (re-read each round, so a changed policy applies while the gate waits) has passed
 * since the first check, which fails the upgrade. Returns the last result once done; undefined
 * when it failed or was interrupted.
 */
async function pollUntil<T>(
  s: UpgradeState,
  call: HookCall,
  poll: {
    check: () => Promise<T>;
    done: (result: T) => boolean;
    /** Called with each result that is not done, before the timeout is checked. */
    pending?: (result: T) => void;
    timeoutMs: () => number;
    /** The failure's cause once the timeout has passed. */
    timedOut: (result: T, timeout: string) => string;
    /** What the gate says while it waits. */
    waiting: (result: T) => string;
  },
): Promise<T | undefined> {
  // A wait the previous run began goes on where it was (it continued as new in the middle).
  const waits = (s.status.waits ??= {});
  const key = gateKey(call.hook, call.version);
  const carried = waits[key];
  const started = carried ? Date.parse(carried.since) : Date.now();
  let delay = carried?.delayMs ?? PROBE_INITIAL_MS;
  const end = <R>(r: R): R => {
    delete waits[key];
    return r;
  };
  for (;;) {
    const result = await poll.check();
    if (poll.done(result)) return end(result);
    poll.pending?.(result);
    const timeout = poll.timeoutMs();
    if (Date.now() - started >= timeout) {
      s.fail(call, poll.timedOut(result, formatDuration(timeout)));
      return end(undefined);
    }
    s.setGate(call, 'Waiting', `${call.hook} ${call.version}: ${poll.waiting(result)}`);
    waits[key] = { since: iso(started), delayMs: delay };
    await s.wait(Math.min(delay, started + timeout - Date.now()));
    delay = Math.min(delay * 2, PROBE_MAX_MS);
    // Only a run continuing as new keeps the wait: after an abort and resume it starts over.
    if (s.interrupted()) return s.historyFull() && !s.abort && !s.superseding ? undefined : end(undefined);
  }
}

/** Probes until healthy; false when it failed (the upgrade is then Failed) or was interrupted. */
export async function probeUntilHealthy(
  s: UpgradeState,
  call: HookCall,
  scope: HealthScope,
  conditions: UpgradeCondition[],
  type: string,
): Promise<boolean> {
  const what =
    scope === 'pre'
      ? 'pre-upgrade health check'
      : `${scope === 'post' ? 'post-upgrade' : scope} health check at ${call.version}`;
  const report = await pollUntil(s, call, {
    check: () => probe(s, scope, call.version),
    done: (r) => r.healthy,
    pending: (r) => s.setCondition(conditions, type, 'False', 'Waiting', r.summary, true),
    timeoutMs: () => s.status.policy.healthCheckTimeoutMs,
    timedOut: (r, timeout) => `${what} did not pass within ${timeout}: ${r.summary}`,
    waiting: (r) => `waiting for the ${what}: ${r.summary}`,
  });
  if (!report) return false;
  s.setCondition(
    conditions,
    type,
    'True',
    'Passed',
    report.warnings.length ? `passed with warnings: ${report.warnings.join('; ')}` : report.summary,
    true,
  );
  return true;
}

/** Seed 004's capacity reservation: scale MachineDeployments up, then wait for the extra nodes. */
export async function reserveCapacity(s: UpgradeState, call: HookCall): Promise<boolean> {
  const status = s.status;
  const count = status.policy.capacityReservation;
  s.setGate(call, 'Waiting', `${call.hook} ${call.version}: scaling up MachineDeployments by ${count}`);
  try {
    status.reservedCapacity = await changes.reserveCapacity({ cluster: status.cluster, count });
  } catch (err) {
    if (!expectedFailure(err)) throw err;
    s.fail(call, `capacity reservation failed: ${failureCause(err)}`);
    return false;
  }
  const reserved = status.reservedCapacity
    .map((r) => `${r.machineDeployment} ${r.originalReplicas}→${r.reservedReplicas}`)
    .join(', ');
  if (status.reservedCapacity.length === 0) {
    s.setCondition(status.conditions, 'ScaleUpExtraNodes', 'True', 'Reserved', 'nothing (no MachineDeployments)');
    return true;
  }
  s.setCondition(status.conditions, 'ScaleUpExtraNodes', 'Unknown', 'WaitingForNodes', `reserved ${reserved}`);
  const readiness = async (): Promise<CapacityReadiness> => {
    try {
      return await probes.checkReservedCapacity({ cluster: status.cluster });
    } catch (err) {
      if (!expectedFailure(err)) throw err;
      return { ready: false, pending: [`readiness could not be read: ${failureCause(err)}`] };
    }
  };
  const ready = await pollUntil(s, call, {
    check: readiness,
    done: (r) => r.ready,
    timeoutMs: () => status.policy.capacityReadyTimeoutMs ?? DEFAULT_CAPACITY_READY_TIMEOUT_MS,
    timedOut: (r, timeout) => `the extra machines were not Ready within ${timeout}: ${r.pending.join('; ')}`,
    waiting: (r) => `waiting for the extra machines: ${r.pending.join('; ')}`,
  });
  if (!ready) return false;
  s.setCondition(status.conditions, 'ScaleUpExtraNodes', 'True', 'Reserved', `reserved ${reserved}`);
  return true;
}

/**
 * Scales reserved MachineDeployments back, exactly once per reservation, whatever ended the
 * upgrade: runs to the end even when an abort arrives meanwhile.
 */
export async function releaseCapacity(s: UpgradeState): Promise<void> {
  const status = s.status;
  if (status.reservedCapacity.length === 0) return;
  await CancellationScope.nonCancellable(async () => {
    try {
      await changes.releaseCapacity({ cluster: status.cluster });
    } catch (err) {
      if (!expectedFailure(err)) throw err;
      // Leave the record in place: the next release (retry, resume or the end) repeats it.
      s.setCondition(
        status.conditions,
        'RemoveExtraNodes',
        'False',
        'ReleaseFailed',
        `could not scale back: ${failureCause(err)}`,
      );
      return;
    }
    s.setCondition(
      status.conditions,
      'RemoveExtraNodes',
      'True',
      'Released',
      `released ${status.reservedCapacity.map((r) => `${r.machineDeployment} ${r.reservedReplicas}→${r.originalReplicas}`).join(', ')}`,
    );
    status.reservedCapacity = [];
  });
}

/** Runs one call's step; true when its gate opened. */
export async function runStep(s: UpgradeState, call: HookCall): Promise<boolean> {
  const status = s.status;
  switch (call.hook) {
    case 'BeforeClusterUpgrade':
      if (!(await beginUpgrade(s, call))) return false;
      if (!(await alertGate(s, call))) return false;
      break;
    case 'BeforeControlPlaneUpgrade': {
      if (!(await awaitWindow(s, call)) || !(await alertGate(s, call))) return false;
      await openSilence(s, call);
      const entry = s.versionEntry(call.version);
      s.setCondition(
        entry.conditions,
        'ControlPlaneUpgraded',
        'Unknown',
        'Upgrading',
        `control plane upgrading to ${call.version}`,
      );
      break;
    }
    case 'AfterControlPlaneUpgrade': {
      const entry = s.versionEntry(call.version);
      if (!(await probeUntilHealthy(s, call, 'control-plane', entry.conditions, 'ControlPlaneUpgraded'))) return false;
      if (!(await alertGate(s, call))) return false;
      await closeSilence(s);
      break;
    }
    case 'BeforeWorkersUpgrade': {
      if (!(await awaitWindow(s, call)) || !(await alertGate(s, call))) return false;
      if (status.policy.capacityReservation > 0 && status.reservedCapacity.length === 0) {
        if (!(await reserveCapacity(s, call))) return false;
      }
      await openSilence(s, call);
      const entry = s.versionEntry(call.version);
      s.setCondition(
        entry.conditions,
        'WorkersUpgraded',
        'Unknown',
        'Upgrading',
        `workers upgrading to ${call.version}`,
      );
      break;
    }
    case 'AfterWorkersUpgrade': {
      const entry = s.versionEntry(call.version);
      if (!(await probeUntilHealthy(s, call, 'workers', entry.conditions, 'WorkersUpgraded'))) return false;
      if (!(await alertGate(s, call))) return false;
      await closeSilence(s);
      break;
    }
    case 'AfterClusterUpgrade': {
      if (!(await probeUntilHealthy(s, call, 'post', status.conditions, 'PostHealthCheck'))) return false;
      if (!(await alertGate(s, call))) return false;
      await releaseCapacity(s);
      const now = iso(Date.now());
      for (const e of status.history) {
        e.phase = 'Upgraded';
        e.completeTime ??= now;
      }
      status.completeTime = now;
      s.setPhase('Upgraded');
      break;
    }
  }
  s.setGate(call, 'Open', `${call.hook} ${call.version}: done`);
  return true;
}
