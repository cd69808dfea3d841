// Maintenance calendars: windows in an IANA zone, several, freezes; the
// arithmetic across DST changes (Europe/Berlin, America/New_York) and properties of it.
import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import {
  calendarState,
  localToUtc,
  parseFreezes,
  parseTimeZone,
  parseWindows,
  windowsState,
  zonedIso,
  zoneOffsetMs,
  type MaintenanceCalendar,
} from '../../src/domain/calendar.ts';
import { parseMaintenanceWindow, windowState } from '../../src/domain/maintenance-window.ts';
import { resolveUpgradePolicy } from '../../src/domain/upgrade-policy.ts';

const P = 'upgrades.capi-orchestrator.io/';
const at = (s: string) => Date.parse(s);
const H = 3_600_000;
const windows = (text: string) => {
  const w = parseWindows(text);
  if (!w.ok) throw new Error(w.reason);
  return w.value;
};
const cal = (text: string, timeZone = 'UTC', freezes = ''): MaintenanceCalendar => {
  const f = parseFreezes(freezes);
  if (!f.ok) throw new Error(f.reason);
  return { windows: text ? windows(text) : [], timeZone, freezes: f.value };
};

describe('calendar policy', () => {
  it('reads zone, several windows and freezes from annotations', () => {
    const r = resolveUpgradePolicy({
      annotations: {
        [`${P}maintenance-window`]: ' Sat,Sun 02:00 4h ;Wed 22:00 1h ',
        [`${P}maintenance-time-zone`]: 'Europe/Berlin',
        [`${P}maintenance-freezes`]: '2026-12-20T00:00:00+01:00/2027-01-04T00:00:00Z year-end freeze',
        [`${P}delayed-after`]: '30m',
      },
    });
    expect(r).toMatchObject({
      ok: true,
      policy: {
        maintenanceWindow: 'Sat,Sun 02:00 4h; Wed 22:00 1h',
        maintenanceTimeZone: 'Europe/Berlin',
        maintenanceFreezes: [
          { from: '2026-12-19T23:00:00.000Z', to: '2027-01-04T00:00:00.000Z', reason: 'year-end freeze' },
        ],
        delayedAfterMs: 30 * 60_000,
      },
    });
  });

  it.each([
    [`${P}maintenance-time-zone`, 'Mars/Olympus', 'not an IANA time zone'],
    [`${P}maintenance-time-zone`, '+01:00', 'not an IANA time zone'],
    [`${P}maintenance-window`, 'Sat 02:00 1h; Caturday 02:00 1h', 'window "Caturday 02:00 1h": unknown day'],
    [`${P}maintenance-freezes`, '2026-12-20/2027-01-04 xmas', 'expected "<from>/<to> <reason>"'],
    [`${P}maintenance-freezes`, '2026-12-20T00:00:00Z/2027-01-04T00:00:00Z', 'expected "<from>/<to> <reason>"'],
    [`${P}maintenance-freezes`, '2027-01-04T00:00:00Z/2026-12-20T00:00:00Z xmas', 'ends before it starts'],
    [`${P}maintenance-freezes`, `2026-12-20T00:00:00Z/2027-01-04T00:00:00Z ${'x'.repeat(129)}`, 'at most 128'],
    [`${P}delayed-after`, '0', 'must be greater than zero'],
  ])('refuses %s=%j naming it', (annotation, value, why) => {
    const r = resolveUpgradePolicy({ annotations: { [annotation]: value } });
    expect(r.ok).toBe(false);
    if (!r.ok) {
      expect(r.message.startsWith(`annotation ${annotation}=${JSON.stringify(value)}: `)).toBe(true);
      expect(r.message).toContain(why);
    }
  });

  it('keeps a single window as written, meaning UTC as before', () => {
    const r = resolveUpgradePolicy({ settings: { maintenanceWindow: 'Sat,Sun 02:00 4h' } });
    expect(r).toMatchObject({ ok: true, policy: { maintenanceWindow: 'Sat,Sun 02:00 4h' } });
    if (r.ok) expect(r.policy.maintenanceTimeZone).toBeUndefined();
    expect(parseTimeZone('America/New_York')).toEqual({ ok: true, value: 'America/New_York' });
  });
});

describe('zone arithmetic', () => {
  it('reads offsets from Intl, summer and winter', () => {
    expect(zoneOffsetMs('Europe/Berlin', at('2026-01-15T12:00:00Z'))).toBe(H);
    expect(zoneOffsetMs('Europe/Berlin', at('2026-07-15T12:00:00Z'))).toBe(2 * H);
    expect(zoneOffsetMs('America/New_York', at('2026-01-15T12:00:00Z'))).toBe(-5 * H);
    expect(zoneOffsetMs('America/New_York', at('2026-07-15T12:00:00Z'))).toBe(-4 * H);
    expect(zonedIso('Europe/Berlin', at('2026-03-29T01:30:00Z'))).toBe('2026-03-29T03:30:00+02:00');
    expect(zonedIso('America/New_York', at('2026-11-01T05:30:00.250Z'))).toBe('2026-11-01T01:30:00-04:00');
  });

  it('places a wall time that does not exist (spring forward) as far after the gap as it was into it', () => {
    // Berlin: 02:00 CET → 03:00 CEST on 2026-03-29; New York: 02:00 EST → 03:00 EDT on 2026-03-08.
    expect(localToUtc('Europe/Berlin', at('2026-03-29T02:30:00Z'))).toBe(at('2026-03-29T01:30:00Z'));
    expect(localToUtc('America/New_York', at('2026-03-08T02:30:00Z'))).toBe(at('2026-03-08T07:30:00Z'));
  });

  it('places a wall time that happens twice (fall back) at its first occurrence', () => {
    // Berlin: 03:00 CEST → 02:00 CET on 2026-10-25; New York: 02:00 EDT → 01:00 EST on 2026-11-01.
    expect(localToUtc('Europe/Berlin', at('2026-10-25T02:30:00Z'))).toBe(at('2026-10-25T00:30:00Z'));
    expect(localToUtc('America/New_York', at('2026-11-01T01:30:00Z'))).toBe(at('2026-11-01T05:30:00Z'));
  });
});

describe('windows in a zone across DST changes', () => {
  it('opens a 02:30 window on the spring-forward day at 03:30 local, for its full length', () => {
    const berlin = windows('Sun 02:30 1h');
    expect(windowsState(at('2026-03-29T00:00:00Z'), berlin, 'Europe/Berlin')).toEqual({
      open: false,
      opensAt: at('2026-03-29T01:30:00Z'),
    });
    expect(windowsState(at('2026-03-29T02:00:00Z'), berlin, 'Europe/Berlin')).toEqual({
      open: true,
      closesAt: at('2026-03-29T02:30:00Z'),
    });
    // The next Sunday is summer time: 02:30 CEST.
    expect(windowsState(at('2026-03-29T03:00:00Z'), berlin, 'Europe/Berlin')).toEqual({
      open: false,
      opensAt: at('2026-04-05T00:30:00Z'),
    });
    const ny = windows('Sun 02:30 1h');
    expect(windowsState(at('2026-03-08T00:00:00Z'), ny, 'America/New_York')).toEqual({
      open: false,
      opensAt: at('2026-03-08T07:30:00Z'),
    });
  });

  it('keeps a window across the fall-back change as long in real time as any other', () => {
    // 01:00 CEST + 4h = 04:00 CET (the wall clock shows 3 h, the hour 02:00-03:00 happening twice).
    expect(windowsState(at('2026-10-24T22:00:00Z'), windows('Sun 01:00 4h'), 'Europe/Berlin')).toEqual({
      open: false,
      opensAt: at('2026-10-24T23:00:00Z'),
    });
    expect(windowsState(at('2026-10-25T02:59:00Z'), windows('Sun 01:00 4h'), 'Europe/Berlin')).toEqual({
      open: true,
      closesAt: at('2026-10-25T03:00:00Z'),
    });
    // New York: a 01:30 window opens once, at the first 01:30 (EDT).
    expect(windowsState(at('2026-11-01T04:00:00Z'), windows('Sun 01:30 30m'), 'America/New_York')).toEqual({
      open: false,
      opensAt: at('2026-11-01T05:30:00Z'),
    });
    expect(windowsState(at('2026-11-01T06:00:00Z'), windows('Sun 01:30 30m'), 'America/New_York')).toEqual({
      open: false,
      opensAt: at('2026-11-08T06:30:00Z'),
    });
  });

  it('opens a daily 02:30 window once every local day of a year with both changes', () => {
    for (const zone of ['Europe/Berlin', 'America/New_York']) {
      const daily = windows('* 02:30 10m');
      const openings: number[] = [];
      const end = localToUtc(zone, at('2027-01-01T00:00:00Z'));
      for (let t = localToUtc(zone, at('2026-01-01T00:00:00Z')); ;) {
        const s = windowsState(t, daily, zone);
        if (s.open) throw new Error(`open at ${new Date(t).toISOString()}`);
        if (s.opensAt >= end) break;
        openings.push(s.opensAt);
        t = s.opensAt + 20 * 60_000;
      }
      expect(openings.length).toBe(365);
      const local = openings.map((o) => zonedIso(zone, o).slice(11, 16));
      // Every day at 02:30, except the spring-forward day, whose 02:30 does not exist.
      expect(local.filter((l) => l !== '02:30')).toEqual(['03:30']);
    }
  });

  it('takes several windows and opens at the earliest', () => {
    const two = windows('Sat 22:00 1h; Wed 06:00 30m');
    // Monday 2026-11-23: Wednesday's comes first.
    expect(windowsState(at('2026-11-23T12:00:00Z'), two, 'UTC')).toEqual({
      open: false,
      opensAt: at('2026-11-25T06:00:00Z'),
    });
    // Overlapping windows make one stretch.
    expect(windowsState(at('2026-11-28T22:30:00Z'), windows('Sat 22:00 1h; Sat 22:30 2h'), 'UTC')).toEqual({
      open: true,
      closesAt: at('2026-11-29T00:30:00Z'),
    });
  });
});

describe('freezes', () => {
  const freeze = '2026-12-20T00:00:00Z/2027-01-04T00:00:00Z year-end freeze';

  it('holds inside a freeze, names it, and opens at the first window after it', () => {
    const c = cal('Sat 02:00 4h', 'UTC', freeze);
    expect(calendarState(at('2026-12-26T03:00:00Z'), c)).toEqual({
      open: false,
      opensAt: at('2027-01-09T02:00:00Z'),
      freeze: { from: '2026-12-20T00:00:00.000Z', to: '2027-01-04T00:00:00.000Z', reason: 'year-end freeze' },
    });
  });

  it('freezes with no windows hold only during the freeze; open says when the next freeze starts', () => {
    const c = cal('', 'UTC', freeze);
    expect(calendarState(at('2026-12-21T00:00:00Z'), c)).toMatchObject({
      open: false,
      opensAt: at('2027-01-04T00:00:00Z'),
    });
    expect(calendarState(at('2026-12-01T00:00:00Z'), c)).toEqual({
      open: true,
      closesAt: at('2026-12-20T00:00:00Z'),
    });
    expect(calendarState(at('2027-02-01T00:00:00Z'), c)).toEqual({ open: true });
  });

  it('names a coming freeze that pushes the next opening later', () => {
    const c = cal('Sun 02:00 1h', 'UTC', '2026-11-29T00:00:00Z/2026-11-30T00:00:00Z release day');
    expect(calendarState(at('2026-11-27T00:00:00Z'), c)).toMatchObject({
      open: false,
      opensAt: at('2026-12-06T02:00:00Z'),
      freeze: { reason: 'release day' },
    });
  });
});

describe('calendar properties', () => {
  const ZONES = ['UTC', 'Europe/Berlin', 'America/New_York', 'Australia/Lord_Howe', 'Asia/Kolkata', 'America/Santiago'];
  const DAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];
  const windowText = fc
    .record({
      days: fc.subarray(DAYS, { minLength: 1 }),
      hh: fc.integer({ min: 0, max: 23 }),
      mm: fc.integer({ min: 0, max: 59 }),
      minutes: fc.integer({ min: 1, max: 7 * 24 * 60 }),
    })
    .map(
      ({ days, hh, mm, minutes }) =>
        `${days.join(',')} ${String(hh).padStart(2, '0')}:${String(mm).padStart(2, '0')} ${minutes}m`,
    );
  // 2025-2028: every DST change of those zones in a few years.
  const instant = fc.integer({ min: at('2025-01-01T00:00:00Z'), max: at('2028-12-31T00:00:00Z') });

  it('one window in UTC means what it meant before calendars', () => {
    fc.assert(
      fc.property(windowText, instant, (text, now) => {
        const old = parseMaintenanceWindow(text);
        if (!old.ok) throw new Error(old.reason);
        const before = windowState(now, old.window);
        const after = calendarState(now, cal(text));
        expect(after.open).toBe(before.open);
        if (!before.open && !after.open) expect(after.opensAt).toBe(before.opensAt);
        if (before.open && after.open) expect(after.closesAt).toBeGreaterThanOrEqual(before.closesAt);
      }),
      { numRuns: 500 },
    );
  });

  it('in any zone: open means inside a window; closed names the earliest opening, open there', () => {
    fc.assert(
      fc.property(
        fc.array(windowText, { minLength: 1, maxLength: 3 }),
        fc.constantFrom(...ZONES),
        instant,
        (ws, zone, now) => {
          const c = cal(ws.join('; '), zone);
          const s = calendarState(now, c);
          if (s.open) {
            expect(s.closesAt).toBeGreaterThan(now);
            // Still open a moment before it closes.
            expect(calendarState((s.closesAt ?? now + 1) - 1, c).open).toBe(true);
            return;
          }
          expect(s.opensAt).toBeGreaterThan(now);
          // A window opens at least once a week, DST or not (a day of slack for the change).
          expect(s.opensAt - now).toBeLessThanOrEqual(8 * 24 * H);
          expect(calendarState(s.opensAt, c).open).toBe(true);
          for (let k = 1; k < 8; k++) {
            const between = now + Math.floor(((s.opensAt - now) * k) / 8);
            expect(calendarState(between, c)).toEqual({ open: false, opensAt: s.opensAt });
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it('never opens inside a freeze', () => {
    const freeze = fc
      .record({ start: instant, hours: fc.integer({ min: 1, max: 24 * 20 }) })
      .map(
        ({ start, hours }) =>
          `${new Date(start).toISOString()}/${new Date(start + hours * H).toISOString()} freeze ${hours}h`,
      );
    fc.assert(
      fc.property(
        fc.option(windowText, { nil: undefined }),
        fc.constantFrom(...ZONES),
        fc.array(freeze, { minLength: 1, maxLength: 4 }),
        instant,
        (w, zone, fs, now) => {
          const c = cal(w ?? '', zone, fs.join('; '));
          const s = calendarState(now, c);
          const moment = s.open ? now : s.opensAt;
          const inFreeze = c.freezes.some((f) => moment >= Date.parse(f.from) && moment < Date.parse(f.to));
          expect(inFreeze).toBe(false);
          if (!s.open) {
            expect(calendarState(s.opensAt, c).open).toBe(true);
            expect(s.freeze ?? w).toBeDefined();
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});
