// A recurring maintenance window, in UTC: `<days> <HH:MM> <duration>`, e.g.
// `Sat,Sun 02:00 4h`, `Mon-Fri 22:00 2h30m`, `* 01:00 1h`. A window may run
// past midnight. Pure: the workflow passes its own (deterministic) clock.
import { parseGoDuration } from './durations.ts';

const DAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'] as const;
const DAY_MS = 86_400_000;

export interface MaintenanceWindow {
  /** Days (0 = Sunday) on which the window opens. */
  days: number[];
  /** Minutes after 00:00 UTC at which it opens. */
  startMinute: number;
  durationMs: number;
  /** The text it was parsed from, for messages. */
  text: string;
}

export type WindowParse = { ok: true; window: MaintenanceWindow } | { ok: false; reason: string };

function dayIndex(name: string): number {
  return DAYS.findIndex((d) => d.toLowerCase() === name.toLowerCase());
}

export function parseMaintenanceWindow(text: string): WindowParse {
  const parts = text.trim().split(/\s+/);
  if (parts.length !== 3) return { ok: false, reason: 'expected "<days> <HH:MM> <duration>", e.g. "Sat,Sun 02:00 4h"' };
  const [daysText, startText, durationText] = parts as [string, string, string];
  const days = new Set<number>();
  if (daysText === '*') DAYS.forEach((_, i) => days.add(i));
  else {
    for (const item of daysText.split(',')) {
      const range = item.split('-');
      const from = dayIndex(range[0] ?? '');
      const to = range.length === 2 ? dayIndex(range[1] ?? '') : from;
      if (from < 0 || to < 0 || range.length > 2)
        return { ok: false, reason: `unknown day ${JSON.stringify(item)} (use Sun..Sat, ranges like Mon-Fri, or *)` };
      for (let d = from; ; d = (d + 1) % 7) {
        days.add(d);
        if (d === to) break;
      }
    }
  }
  const time = /^([01]\d|2[0-3]):([0-5]\d)$/.exec(startText);
  if (!time) return { ok: false, reason: `start ${JSON.stringify(startText)} is not HH:MM (UTC)` };
  const durationMs = parseGoDuration(durationText);
  if (durationMs === undefined || durationMs <= 0 || durationMs > 7 * DAY_MS) {
    return { ok: false, reason: `duration ${JSON.stringify(durationText)} is not a positive duration of at most 168h` };
  }
  return {
    ok: true,
    window: {
      days: [...days].sort((a, b) => a - b),
      startMinute: Number(time[1]) * 60 + Number(time[2]),
      durationMs,
      text: text.trim(),
    },
  };
}

/** Whether `nowMs` is inside the window; when not, the epoch ms at which it next opens. */
export function windowState(
  nowMs: number,
  w: MaintenanceWindow,
): { open: true; closesAt: number } | { open: false; opensAt: number } {
  const today = Math.floor(nowMs / DAY_MS) * DAY_MS;
  // Openings from a week back (long windows) to a week ahead, in order.
  for (let offset = -7; offset <= 7; offset++) {
    const dayStart = today + offset * DAY_MS;
    const weekday = new Date(dayStart).getUTCDay();
    if (!w.days.includes(weekday)) continue;
    const opens = dayStart + w.startMinute * 60_000;
    const closes = opens + w.durationMs;
    if (nowMs >= opens && nowMs < closes) return { open: true, closesAt: closes };
    if (opens > nowMs) return { open: false, opensAt: opens };
  }
  // Unreachable for a valid window (at least one day a week).
  return { open: false, opensAt: nowMs + DAY_MS };
}
