// The calendar gates of a cluster upgrade: the
// maintenance calendar (windows in a zone, several, freezes) that holds each
// step's start, and "delayed" once the upgrade has not started `delayedAfter`
// past `upgradeAt`. Both are newer than running upgrades (AUTO_UPGRADE): their
// commands are behind patched(), asked only when the policy uses them, so a
// history recorded before them replays the old way.
import { patched } from '@temporalio/workflow';
import { formatDuration } from '../../domain/durations.ts';
import { calendarHold, delayedText, isLegacyCalendar, legacyHold, type Hold } from '../../domain/upgrade-schedule.ts';
import type { HookCall } from '../../model/cluster-upgrade.ts';
import { overridden } from './gates.ts';
import { iso, type UpgradeState } from './state.ts';

export const CALENDAR_PATCH = 'maintenance-calendar';
export const DELAYED_PATCH = 'upgrade-delayed';

export type { Hold };

/** Whether the maintenance calendar holds a step starting now, and until when; records it in the status. */
export function maintenanceHold(
  s: UpgradeState,
  now: number,
  call: Pick<HookCall, 'hook' | 'version'>,
): Hold | undefined {
  const policy = s.status.policy;
  let hold = isLegacyCalendar(policy) || !patched(CALENDAR_PATCH) ? legacyHold(policy, now) : calendarHold(policy, now);
  // Overridden (annotation override-gates): the step starts now, the override recorded.
  if (hold && overridden(s, 'maintenance-window', call) !== undefined) hold = undefined;
  const schedule = s.status.schedule;
  if (schedule) {
    delete schedule.nextWindowOpens;
    delete schedule.freeze;
  }
  if (hold) {
    const next = (s.status.schedule ??= {});
    next.nextWindowOpens = iso(hold.until);
    if (hold.freeze) next.freeze = hold.freeze;
  }
  if (s.status.schedule && Object.keys(s.status.schedule).length === 0) delete s.status.schedule;
  return hold;
}

/**
 * While the upgrade waits to start: once `delayedAfter` has passed since `notBefore`, marks it
 * delayed (once). Returns what the gate message starts with and when to wake to mark it.
 */
export function delayCheck(s: UpgradeState, notBefore: number, now: number): { prefix: string; wakeAt?: number } {
  const after = s.status.policy.delayedAfterMs;
  if (after === undefined || !patched(DELAYED_PATCH)) return { prefix: '' };
  const at = notBefore + after;
  const text = delayedText(after, notBefore);
  if (now < at) {
    // upgradeAt or delayedAfter moved later: not delayed any more.
    if (s.status.schedule?.delayedSince !== undefined) undelay(s, 'Rescheduled', `not delayed before ${iso(at)}`);
    return { prefix: '', wakeAt: at };
  }
  if (s.status.schedule?.delayedSince !== iso(at))
    s.markDelayed(
      iso(at),
      `upgrade to ${s.status.targetVersion} has not started ${formatDuration(after)} after ${iso(notBefore)}`,
    );
  return { prefix: `${text}: ` };
}

/** The upgrade started: no longer delayed. */
export function started(s: UpgradeState, now: number): void {
  const since = s.status.schedule?.delayedSince;
  if (since !== undefined) undelay(s, 'Started', `started at ${iso(now)}, delayed since ${since}`);
}

function undelay(s: UpgradeState, reason: string, message: string): void {
  delete s.status.schedule?.delayedSince;
  if (s.status.schedule && Object.keys(s.status.schedule).length === 0) delete s.status.schedule;
  s.setCondition(s.status.conditions, 'Delayed', 'False', reason, message);
  s.publish();
}
