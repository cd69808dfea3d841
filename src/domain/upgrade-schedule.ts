// When the calendar gates of a cluster upgrade let a step start, and what
// they say meanwhile (`upgradeAt`, maintenance windows and freezes). Pure: the
// workflow passes its own clock and holds the gate (workflows/cluster-upgrade/
// schedule.ts, with the same texts as before this module existed), and the api
// uses the same functions to answer CAPI without the workflow:
// - how long a gate that waits for a time it knows has left, so that CAPI is
//   told to come back then (capped) instead of every 10 s;
// - what a new upgrade's first answer says before its workflow ran.
import { calendarState, parseWindows, zonedIso, type MaintenanceCalendar } from './calendar.ts';
import { formatDuration, parseGoDuration } from './durations.ts';
import { overrideFor } from './gate-overrides.ts';
import { parseMaintenanceWindow, windowState } from './maintenance-window.ts';
import { checkedValue, PolicyError } from './policy-keys.ts';
import {
  GATE_RETRY_AFTER_SECONDS,
  type Freeze,
  type Gate,
  type HookCall,
  type UpgradeHook,
  type UpgradePolicy,
} from '../model/cluster-upgrade.ts';

const iso = (ms: number) => new Date(ms).toISOString();

export interface Hold {
  /** When to look again (the calendar opens, or may have). */
  until: number;
  /** What the gate says after `<hook> <version>: `. */
  waitingFor: string;
  freeze?: Freeze;
}

/** A policy the single-UTC-window code (before calendars) reads the same way. */
export function isLegacyCalendar(policy: UpgradePolicy): boolean {
  return (
    policy.maintenanceTimeZone === undefined &&
    policy.maintenanceFreezes === undefined &&
    !(policy.maintenanceWindow ?? '').includes(';')
  );
}

function calendarOf(policy: UpgradePolicy): MaintenanceCalendar | undefined {
  const windows = policy.maintenanceWindow ? parseWindows(policy.maintenanceWindow) : undefined;
  if (windows && !windows.ok) return undefined; // refused by the api before it got here
  return {
    windows: windows?.value ?? [],
    timeZone: policy.maintenanceTimeZone ?? 'UTC',
    freezes: policy.maintenanceFreezes ?? [],
  };
}

/** Exactly what the workflow did before calendars (same messages, same timers). */
export function legacyHold(policy: UpgradePolicy, now: number): Hold | undefined {
  const window = policy.maintenanceWindow ? parseMaintenanceWindow(policy.maintenanceWindow) : undefined;
  if (!window?.ok) return undefined;
  const state = windowState(now, window.window);
  if (state.open) return undefined;
  return {
    until: state.opensAt,
    waitingFor: `waiting for the maintenance window "${window.window.text}" (opens ${iso(state.opensAt)})`,
  };
}

export function calendarHold(policy: UpgradePolicy, now: number): Hold | undefined {
  const calendar = calendarOf(policy);
  if (!calendar) return undefined;
  const state = calendarState(now, calendar);
  if (state.open) return undefined;
  const zone = calendar.timeZone;
  const opens = `opens ${zonedIso(zone, state.opensAt)}`;
  const f = state.freeze;
  if (f && Date.parse(f.from) <= now)
    return {
      until: state.opensAt,
      freeze: f,
      waitingFor: `held by the maintenance freeze "${f.reason}" (${f.from} to ${f.to}); the calendar ${opens}`,
    };
  const windows = policy.maintenanceWindow
    ? `the maintenance window "${policy.maintenanceWindow}"${zone === 'UTC' ? '' : ` in ${zone}`}`
    : 'the maintenance calendar';
  return {
    until: state.opensAt,
    ...(f ? { freeze: f } : {}),
    waitingFor: `waiting for ${windows} (${opens}${f ? `, after the freeze "${f.reason}"` : ''})`,
  };
}

/** The calendar's hold of a step starting now, as a run that records calendars (every new run) reads it. */
export function maintenanceHoldOf(policy: UpgradePolicy, now: number): Hold | undefined {
  if (overrideFor(policy.gateOverride, 'maintenance-window') !== undefined) return undefined;
  return isLegacyCalendar(policy) ? legacyHold(policy, now) : calendarHold(policy, now);
}

/** What BeforeClusterUpgrade's gate says while the upgrade waits for `upgradeAt`. */
export const upgradeAtWaitingFor = (notBefore: number): string => `waiting for upgradeAt ${iso(notBefore)}`;

/** The text the gate message starts with once the upgrade is delayed (setting delayedAfter), before `: `. */
export const delayedText = (afterMs: number, notBefore: number): string =>
  `delayed ${formatDuration(afterMs)} past ${iso(notBefore)}`;

/** What BeforeClusterUpgrade's gate says once the calendar let the upgrade start. */
export const PRE_HEALTH_CHECK_RUNNING = 'running the pre-upgrade health check';

const steps: readonly UpgradeHook[] = ['BeforeControlPlaneUpgrade', 'BeforeWorkersUpgrade'];

/**
 * When a Waiting gate will open at the earliest, if it waits for a time it knows: `upgradeAt`, a
 * maintenance window's opening or a freeze's end. Undefined for every other wait (a health check,
 * alerts, capacity, a step queued behind another): those may end any moment. Known only when the
 * gate's message says exactly that wait under `policy` at `now` (the workflow wrote it with the same
 * functions), so a stale or foreign message, or a policy read differently, gives undefined.
 */
export function knownWaitEnd(
  policy: UpgradePolicy,
  gate: Pick<HookCall, 'hook' | 'version'> & { message: string },
  now: number,
): number | undefined {
  const head = `${gate.hook} ${gate.version}: `;
  const { message } = gate;
  const says = (waitingFor: string) =>
    message === head + waitingFor || (message.startsWith(`${head}delayed `) && message.endsWith(`: ${waitingFor}`));
  let until: number | undefined;
  if (gate.hook === 'BeforeClusterUpgrade' && policy.upgradeAtMs !== undefined && now < policy.upgradeAtMs) {
    if (says(upgradeAtWaitingFor(policy.upgradeAtMs))) until = policy.upgradeAtMs;
  } else if (gate.hook === 'BeforeClusterUpgrade' || steps.includes(gate.hook)) {
    // Runs older than calendars read a single window the legacy way: either text may be the gate's.
    for (const hold of [calendarHold(policy, now), legacyHold(policy, now)])
      if (hold && says(hold.waitingFor)) until = hold.until;
    if (overrideFor(policy.gateOverride, 'maintenance-window') !== undefined) until = undefined;
  }
  if (until === undefined || until <= now) return undefined;
  // commenceWithin fails the upgrade at its deadline, which may come first (after a first hook we do not know).
  if (gate.hook === 'BeforeClusterUpgrade' && policy.commenceWithinMs !== undefined) {
    if (policy.upgradeAtMs === undefined) return undefined;
    until = Math.min(until, policy.upgradeAtMs + policy.commenceWithinMs);
  }
  return until;
}

/** The setting that caps how long CAPI is told to stay away from a gate that waits for a known time. */
export const WAIT_RETRY_AFTER_MAX_SETTING = 'waitRetryAfterMax';
/** Its bounds: never below the 10 s every other wait answers; an hour at most. */
export const WAIT_RETRY_AFTER_MAX_MIN_SECONDS = GATE_RETRY_AFTER_SECONDS;
export const WAIT_RETRY_AFTER_MAX_MAX_SECONDS = 3600;
export const DEFAULT_WAIT_RETRY_AFTER_MAX_SECONDS = 60;

/** The cap in seconds: the setting when set, else `fallback` (the process's HOOK_WAIT_RETRY_AFTER_MAX_SECONDS). */
export function waitRetryAfterMaxSeconds(
  settings: Readonly<Record<string, string>> | undefined,
  fallback: number,
): number {
  const raw = settings?.[WAIT_RETRY_AFTER_MAX_SETTING];
  if (raw === undefined || raw.trim() === '') return fallback;
  const name = `setting ${WAIT_RETRY_AFTER_MAX_SETTING}`;
  const ms = parseGoDuration(checkedValue(name, WAIT_RETRY_AFTER_MAX_SETTING, raw.trim()));
  const min = WAIT_RETRY_AFTER_MAX_MIN_SECONDS;
  const max = WAIT_RETRY_AFTER_MAX_MAX_SECONDS;
  if (ms === undefined || ms < min * 1000 || ms > max * 1000)
    throw new PolicyError(`${name} ${JSON.stringify(raw)}: expected a duration from ${min}s to ${max / 60}m, e.g. 60s`);
  return Math.floor(ms / 1000);
}

/**
 * retryAfterSeconds of a Waiting gate: the time left (whole seconds, rounded up) when it waits for
 * a time it knows, at most `capSeconds`; the gate's own figure (10 s) otherwise.
 */
export function waitingRetryAfterSeconds(
  policy: UpgradePolicy,
  gate: Pick<HookCall, 'hook' | 'version'> & Gate,
  now: number,
  capSeconds: number,
): number {
  const until = knownWaitEnd(policy, gate, now);
  if (until === undefined) return Math.max(1, gate.retryAfterSeconds);
  return Math.max(1, Math.min(capSeconds, Math.ceil((until - now) / 1000)));
}

/**
 * What a call that starts a run answers, before the workflow has run: what the run will wait for
 * first, as the workflow will say it (BeforeClusterUpgrade: `upgradeAt`, the calendar, else the
 * pre-upgrade health check; a step picked up mid-upgrade: the calendar, else its step).
 */
export function firstGate(call: Pick<HookCall, 'hook' | 'version' | 'policy'>, now: number): Gate {
  const head = `${call.hook} ${call.version}: `;
  const waiting = (text: string): Gate => ({
    state: 'Waiting',
    message: head + text,
    retryAfterSeconds: GATE_RETRY_AFTER_SECONDS,
  });
  const policy = call.policy;
  if (call.hook === 'BeforeClusterUpgrade') {
    const notBefore = policy.upgradeAtMs ?? now;
    const hold: Pick<Hold, 'waitingFor'> | undefined =
      now < notBefore ? { waitingFor: upgradeAtWaitingFor(notBefore) } : maintenanceHoldOf(policy, now);
    if (!hold) return waiting(PRE_HEALTH_CHECK_RUNNING);
    const after = policy.delayedAfterMs;
    const delayed = after !== undefined && now >= notBefore + after ? `${delayedText(after, notBefore)}: ` : '';
    return waiting(delayed + hold.waitingFor);
  }
  if (steps.includes(call.hook)) {
    const hold = maintenanceHoldOf(policy, now);
    if (hold) return waiting(hold.waitingFor);
  }
  return waiting('starting its step');
}
