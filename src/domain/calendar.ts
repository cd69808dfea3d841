// A maintenance calendar: recurring windows in an IANA time zone (several,
// `;`-separated, each `<days> <HH:MM> <duration>` as in maintenance-window.ts)
// minus freezes (`<from>/<to> <reason>`, RFC 3339). Pure: the workflow passes
// its own clock. Zone offsets come from Intl (the ICU data of the running
// build). DST, decided here and documented in docs/configuration.md:
// - an opening time that does not exist (spring forward, e.g. 02:30 in
//   Europe/Berlin on the last Sunday of March) opens at the same wall time read
//   with the offset before the gap, i.e. as far after the gap as it would have
//   been into it (02:30 → 03:30 CEST), as RFC 5545 and JS Temporal's
//   "compatible" disambiguation do;
// - an opening time that exists twice (fall back) opens at its first occurrence;
// - a window's duration is elapsed time, so a window across a change is as long
//   in real time as any other (its wall-clock end moves by the change).
import { parseMaintenanceWindow, type MaintenanceWindow } from './maintenance-window.ts';
import type { Freeze } from '../model/cluster-upgrade.ts';

export type { Freeze };

const DAY_MS = 86_400_000;
export const MAX_WINDOWS = 16;
export const MAX_FREEZES = 32;
const MAX_REASON = 128;

export interface MaintenanceCalendar {
  windows: MaintenanceWindow[];
  /** IANA name; UTC when none is set. */
  timeZone: string;
  freezes: Freeze[];
}

type Parsed<T> = { ok: true; value: T } | { ok: false; reason: string };

/** `Sat,Sun 02:00 4h; Wed 22:00 1h`: one or more windows. */
export function parseWindows(text: string): Parsed<MaintenanceWindow[]> {
  const items = text
    .split(';')
    .map((s) => s.trim())
    .filter(Boolean);
  if (items.length === 0) return { ok: false, reason: 'no window (expected "<days> <HH:MM> <duration>[; …]")' };
  if (items.length > MAX_WINDOWS) return { ok: false, reason: `more than ${MAX_WINDOWS} windows` };
  const windows: MaintenanceWindow[] = [];
  for (const item of items) {
    const w = parseMaintenanceWindow(item);
    if (!w.ok)
      return { ok: false, reason: items.length > 1 ? `window ${JSON.stringify(item)}: ${w.reason}` : w.reason };
    windows.push(w.window);
  }
  return { ok: true, value: windows };
}

/** The windows' canonical text: one window keeps its text (the legacy meaning), several are `; `-joined. */
export function windowsText(windows: readonly MaintenanceWindow[]): string {
  return windows.map((w) => w.text).join('; ');
}

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatter(timeZone: string): Intl.DateTimeFormat {
  let f = formatters.get(timeZone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
    formatters.set(timeZone, f);
  }
  return f;
}

/** An IANA zone name Intl knows (not an offset such as +01:00: a window follows its zone's DST). */
export function parseTimeZone(text: string): Parsed<string> {
  const bad: Parsed<string> = {
    ok: false,
    reason: 'not an IANA time zone such as Europe/Berlin, America/New_York or UTC',
  };
  if (text.length > 64 || !/^[A-Za-z][\w+-]*(?:\/[\w+-]+)*$/.test(text)) return bad;
  try {
    formatter(text);
  } catch {
    return bad;
  }
  return { ok: true, value: text };
}

/** Offset of `timeZone` from UTC at the instant `utcMs`, in ms (whole seconds). */
export function zoneOffsetMs(timeZone: string, utcMs: number): number {
  if (timeZone === 'UTC') return 0;
  const parts: Record<string, number> = {};
  for (const p of formatter(timeZone).formatToParts(new Date(utcMs))) {
    if (p.type !== 'literal') parts[p.type] = Number(p.value);
  }
  const asUtc = Date.UTC(
    parts.year ?? 1970,
    (parts.month ?? 1) - 1,
    parts.day ?? 1,
    parts.hour ?? 0,
    parts.minute ?? 0,
    parts.second ?? 0,
  );
  return asUtc - Math.floor(utcMs / 1000) * 1000;
}

/**
 * The instant of a wall time in `timeZone`, `localMs` being that wall time read as if it were
 * UTC. A time in a gap reads with the offset before it; a repeated time is its first occurrence.
 */
export function localToUtc(timeZone: string, localMs: number): number {
  // Real zones change offset at most once in two days: the offsets a day either side bound it.
  const before = zoneOffsetMs(timeZone, localMs - DAY_MS);
  const after = zoneOffsetMs(timeZone, localMs + DAY_MS);
  const valid = [localMs - before, localMs - after].filter((t) => zoneOffsetMs(timeZone, t) === localMs - t);
  if (valid.length > 0) return Math.min(...valid);
  return localMs - before;
}

export type WindowsState = { open: true; closesAt: number } | { open: false; opensAt: number };

/** Whether `nowMs` is inside one of the windows (read in the zone); when open, the end of that stretch. */
export function windowsState(nowMs: number, windows: readonly MaintenanceWindow[], timeZone: string): WindowsState {
  const localToday = Math.floor((nowMs + zoneOffsetMs(timeZone, nowMs)) / DAY_MS) * DAY_MS;
  const spans: [number, number][] = [];
  // Openings from a week back (long windows) to a week ahead, one day either side for the offset.
  for (let offset = -8; offset <= 8; offset++) {
    const day = localToday + offset * DAY_MS;
    const weekday = new Date(day).getUTCDay();
    for (const w of windows) {
      if (!w.days.includes(weekday)) continue;
      const opens = localToUtc(timeZone, day + w.startMinute * 60_000);
      spans.push([opens, opens + w.durationMs]);
    }
  }
  spans.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let openUntil: number | undefined;
  for (const [opens, closes] of spans) {
    if (openUntil !== undefined) {
      // Open: overlapping or touching windows make one stretch.
      if (opens > openUntil) break;
      openUntil = Math.max(openUntil, closes);
    } else if (nowMs >= opens && nowMs < closes) openUntil = closes;
    else if (opens > nowMs) return { open: false, opensAt: opens };
  }
  if (openUntil !== undefined) return { open: true, closesAt: openUntil };
  // Unreachable for valid windows (each opens at least once a week).
  return { open: false, opensAt: nowMs + DAY_MS };
}

/** `2026-12-20T00:00:00Z/2027-01-04T00:00:00Z holiday freeze; …`. */
export function parseFreezes(text: string): Parsed<Freeze[]> {
  const items = text
    .split(';')
    .map((s) => s.trim())
    .filter(Boolean);
  if (items.length > MAX_FREEZES) return { ok: false, reason: `more than ${MAX_FREEZES} freezes` };
  const rfc3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:\d{2})$/i;
  const freezes: Freeze[] = [];
  for (const item of items) {
    const shape = `freeze ${JSON.stringify(item)}: expected "<from>/<to> <reason>" with RFC 3339 times, e.g. "2026-12-20T00:00:00Z/2027-01-04T00:00:00Z year-end freeze"`;
    // `<from>/<to>` up to the first whitespace, then the reason: split by hand, in one pass (a
    // pattern such as ^(\S+)\/(\S+)\s+(.+)$ backtracks quadratically on "a/a/a/…").
    const space = item.search(/\s/);
    const range = space < 0 ? item : item.slice(0, space);
    const slash = range.indexOf('/');
    const fromText = range.slice(0, slash);
    const toText = range.slice(slash + 1);
    const reasonText = space < 0 ? '' : item.slice(space + 1);
    if (slash < 0 || reasonText.trim() === '') return { ok: false, reason: shape };
    const from = Date.parse(fromText);
    const to = Date.parse(toText);
    if (!rfc3339.test(fromText) || !rfc3339.test(toText) || Number.isNaN(from) || Number.isNaN(to))
      return { ok: false, reason: shape };
    if (to <= from) return { ok: false, reason: `freeze ${JSON.stringify(item)}: ends before it starts` };
    const reason = reasonText.trim();
    // The reason reaches CAPI's conditions: printable, short.
    if (reason.length > MAX_REASON || /\p{Cc}/u.test(reason))
      return {
        ok: false,
        reason: `freeze ${JSON.stringify(item)}: the reason must be at most ${MAX_REASON} printable characters`,
      };
    freezes.push({ from: new Date(from).toISOString(), to: new Date(to).toISOString(), reason });
  }
  return { ok: true, value: freezes.sort((a, b) => Date.parse(a.from) - Date.parse(b.from)) };
}

export type CalendarState =
  | { open: true; closesAt?: number }
  | {
      open: false;
      opensAt: number;
      /** The freeze that holds now, else the first that pushed the opening later. */
      freeze?: Freeze;
    };

/** Whether a step may start at `nowMs`: inside a window (if any) and in no freeze; else when it next may. */
export function calendarState(nowMs: number, calendar: MaintenanceCalendar): CalendarState {
  const freezes = calendar.freezes.map((f) => ({ f, from: Date.parse(f.from), to: Date.parse(f.to) }));
  let t = nowMs;
  let pushedBy: Freeze | undefined;
  // Each round passes a freeze for good or reaches an opening: at most 2 rounds a freeze, plus one.
  for (let round = 0; round <= 2 * freezes.length + 2; round++) {
    const holding = freezes.filter((x) => t >= x.from && t < x.to).sort((a, b) => b.to - a.to)[0];
    if (holding) {
      pushedBy ??= holding.f;
      t = holding.to;
      continue;
    }
    const w = calendar.windows.length > 0 ? windowsState(t, calendar.windows, calendar.timeZone) : undefined;
    if (w && !w.open) {
      t = w.opensAt;
      continue;
    }
    if (t > nowMs) return { open: false, opensAt: t, ...(pushedBy ? { freeze: pushedBy } : {}) };
    const nextFreeze = freezes.find((x) => x.from > nowMs)?.from;
    const closesAt = Math.min(w?.closesAt ?? Infinity, nextFreeze ?? Infinity);
    return closesAt === Infinity ? { open: true } : { open: true, closesAt };
  }
  return { open: false, opensAt: t, ...(pushedBy ? { freeze: pushedBy } : {}) };
}

/** `2026-03-29T03:30:00+02:00`: an instant as the zone's wall clock, for messages (no milliseconds). */
export function zonedIso(timeZone: string, utcMs: number): string {
  const offset = zoneOffsetMs(timeZone, utcMs);
  const local = new Date(Math.floor(utcMs / 1000) * 1000 + offset).toISOString().slice(0, 19);
  if (offset === 0) return `${local}Z`;
  const abs = Math.abs(offset) / 60_000;
  const hh = String(Math.floor(abs / 60)).padStart(2, '0');
  const mm = String(abs % 60).padStart(2, '0');
  return `${local}${offset < 0 ? '-' : '+'}${hh}:${mm}`;
}
