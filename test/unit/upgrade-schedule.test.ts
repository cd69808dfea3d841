// What the api tells CAPI about a gate that waits for a time it knows (so that CAPI polls a long wait
// rarely): the time left up to the cap, only when the gate's message says exactly that wait under the
// call's policy; and what a new upgrade's first answer says before its workflow ran.
import { describe, expect, it } from '@jest/globals';
import { PolicyError } from '../../src/domain/policy-keys.ts';
import { DEFAULT_UPGRADE_POLICY } from '../../src/domain/upgrade-policy.ts';
import {
  calendarHold,
  delayedText,
  firstGate,
  knownWaitEnd,
  legacyHold,
  upgradeAtWaitingFor,
  waitingRetryAfterSeconds,
  waitRetryAfterMaxSeconds,
} from '../../src/domain/upgrade-schedule.ts';
import type { Gate, UpgradePolicy } from '../../src/model/cluster-upgrade.ts';

// Wednesday 2026-11-25 12:00 UTC.
const NOW = Date.parse('2026-11-25T12:00:00Z');
const HOUR = 3_600_000;
const policy = (p: Partial<UpgradePolicy> = {}): UpgradePolicy => ({ ...DEFAULT_UPGRADE_POLICY, ...p });
const bcu = { hook: 'BeforeClusterUpgrade' as const, version: 'v1.33.0' };
const bcp = { hook: 'BeforeControlPlaneUpgrade' as const, version: 'v1.32.0' };
const waiting = (message: string): Gate => ({ state: 'Waiting', message, retryAfterSeconds: 10 });

describe('knownWaitEnd', () => {
  it('knows upgradeAt when the gate says it waits for it, with or without the delayed prefix', () => {
    const at = NOW + 2 * HOUR;
    const p = policy({ upgradeAtMs: at });
    const says = `BeforeClusterUpgrade v1.33.0: ${upgradeAtWaitingFor(at)}`;
    expect(knownWaitEnd(p, { ...bcu, message: says }, NOW)).toBe(at);
    const delayed = `BeforeClusterUpgrade v1.33.0: ${delayedText(HOUR, at)}: ${upgradeAtWaitingFor(at)}`;
    expect(knownWaitEnd(p, { ...bcu, message: delayed }, NOW)).toBe(at);
  });

  it('knows nothing for waits that may end any moment, or a message of another policy', () => {
    const at = NOW + 2 * HOUR;
    const p = policy({ upgradeAtMs: at });
    for (const message of [
      'BeforeClusterUpgrade v1.33.0: running the pre-upgrade health check',
      'BeforeClusterUpgrade v1.33.0: waiting for the pre-upgrade health check: node n1 NotReady',
      'BeforeClusterUpgrade v1.33.0: queued behind the steps before it',
      // upgradeAt moved: the memo still says the old one (the workflow has not taken the new policy).
      `BeforeClusterUpgrade v1.33.0: ${upgradeAtWaitingFor(at + HOUR)}`,
      // Another gate's message.
      `BeforeControlPlaneUpgrade v1.32.0: ${upgradeAtWaitingFor(at)}`,
    ])
      expect(knownWaitEnd(p, { ...bcu, message }, NOW)).toBeUndefined();
    // upgradeAt has passed: whatever the message says, the gate may open now.
    expect(knownWaitEnd(p, { ...bcu, message: `BeforeClusterUpgrade v1.33.0: ${upgradeAtWaitingFor(at)}` }, at)).toBe(
      undefined,
    );
  });

  it('knows a window opening, in the calendar text and the legacy one, and a freeze end', () => {
    // Saturday 02:00 UTC for 4 h: closed on Wednesday.
    const p = policy({ maintenanceWindow: 'Sat 02:00 4h' });
    const legacy = legacyHold(p, NOW);
    const calendar = calendarHold(p, NOW);
    const opens = Date.parse('2026-11-28T02:00:00Z');
    expect(legacy?.until).toBe(opens);
    expect(calendar?.until).toBe(opens);
    for (const hold of [legacy!, calendar!])
      expect(knownWaitEnd(p, { ...bcp, message: `BeforeControlPlaneUpgrade v1.32.0: ${hold.waitingFor}` }, NOW)).toBe(
        opens,
      );
    const frozen = policy({
      maintenanceFreezes: [{ from: '2026-11-20T00:00:00Z', to: '2026-11-30T00:00:00Z', reason: 'year-end' }],
    });
    const freeze = calendarHold(frozen, NOW)!;
    expect(freeze.waitingFor).toContain('held by the maintenance freeze "year-end"');
    expect(knownWaitEnd(frozen, { ...bcu, message: `BeforeClusterUpgrade v1.33.0: ${freeze.waitingFor}` }, NOW)).toBe(
      Date.parse('2026-11-30T00:00:00Z'),
    );
    // An override of the window: the gate may open now.
    const overridden = policy({
      maintenanceWindow: 'Sat 02:00 4h',
      gateOverride: { gates: ['maintenance-window'], reason: 'hotfix' },
    });
    expect(
      knownWaitEnd(overridden, { ...bcp, message: `BeforeControlPlaneUpgrade v1.32.0: ${calendar!.waitingFor}` }, NOW),
    ).toBeUndefined();
  });

  it('ends no later than commenceWithin fails the upgrade', () => {
    const p = policy({ upgradeAtMs: NOW - HOUR, commenceWithinMs: 2 * HOUR, maintenanceWindow: 'Sat 02:00 4h' });
    const hold = calendarHold(p, NOW)!;
    expect(knownWaitEnd(p, { ...bcu, message: `BeforeClusterUpgrade v1.33.0: ${hold.waitingFor}` }, NOW)).toBe(
      NOW + HOUR,
    );
    // commenceWithin from the first hook (no upgradeAt): when that was is the workflow's, not ours.
    const fromFirstHook = policy({ commenceWithinMs: 2 * HOUR, maintenanceWindow: 'Sat 02:00 4h' });
    expect(
      knownWaitEnd(fromFirstHook, { ...bcu, message: `BeforeClusterUpgrade v1.33.0: ${hold.waitingFor}` }, NOW),
    ).toBeUndefined();
  });
});

describe('waitingRetryAfterSeconds', () => {
  it('answers the seconds left up to the cap for a known wait, 10 s for any other', () => {
    const gateFor = (at: number) => ({
      ...bcu,
      ...waiting(`BeforeClusterUpgrade v1.33.0: ${upgradeAtWaitingFor(at)}`),
    });
    expect(waitingRetryAfterSeconds(policy({ upgradeAtMs: NOW + 2 * HOUR }), gateFor(NOW + 2 * HOUR), NOW, 60)).toBe(
      60,
    );
    expect(waitingRetryAfterSeconds(policy({ upgradeAtMs: NOW + 2 * HOUR }), gateFor(NOW + 2 * HOUR), NOW, 600)).toBe(
      600,
    );
    expect(waitingRetryAfterSeconds(policy({ upgradeAtMs: NOW + 29_200 }), gateFor(NOW + 29_200), NOW, 60)).toBe(30);
    expect(waitingRetryAfterSeconds(policy({ upgradeAtMs: NOW + 200 }), gateFor(NOW + 200), NOW, 60)).toBe(1);
    const health = { ...bcu, ...waiting('BeforeClusterUpgrade v1.33.0: waiting for the pre-upgrade health check: x') };
    expect(waitingRetryAfterSeconds(policy({ upgradeAtMs: NOW - HOUR }), health, NOW, 60)).toBe(10);
  });
});

describe('waitRetryAfterMaxSeconds', () => {
  it('reads the setting as a duration of 10 s to 1 h, else the process default', () => {
    expect(waitRetryAfterMaxSeconds(undefined, 60)).toBe(60);
    expect(waitRetryAfterMaxSeconds({ waitRetryAfterMax: '' }, 45)).toBe(45);
    expect(waitRetryAfterMaxSeconds({ waitRetryAfterMax: '20s' }, 60)).toBe(20);
    expect(waitRetryAfterMaxSeconds({ waitRetryAfterMax: '5m' }, 60)).toBe(300);
    for (const bad of ['5s', '2h', 'soon', 'x'.repeat(300)])
      expect(() => waitRetryAfterMaxSeconds({ waitRetryAfterMax: bad }, 60)).toThrow(PolicyError);
    expect(() => waitRetryAfterMaxSeconds({ waitRetryAfterMax: '5s' }, 60)).toThrow(
      'setting waitRetryAfterMax "5s": expected a duration from 10s to 60m, e.g. 60s',
    );
  });
});

describe('firstGate', () => {
  const call = (p: Partial<UpgradePolicy>, hook: 'BeforeClusterUpgrade' | 'BeforeControlPlaneUpgrade' = bcu.hook) => ({
    hook,
    version: hook === bcu.hook ? bcu.version : bcp.version,
    policy: policy(p),
  });

  it('names what a new upgrade waits for first, as the workflow will say it', () => {
    const at = NOW + 2 * HOUR;
    expect(firstGate(call({ upgradeAtMs: at }), NOW)).toEqual(
      waiting(`BeforeClusterUpgrade v1.33.0: waiting for upgradeAt ${new Date(at).toISOString()}`),
    );
    expect(firstGate(call({}), NOW).message).toBe('BeforeClusterUpgrade v1.33.0: running the pre-upgrade health check');
    const window = policy({ maintenanceWindow: 'Sat 02:00 4h' });
    expect(firstGate(call({ maintenanceWindow: 'Sat 02:00 4h' }), NOW).message).toBe(
      `BeforeClusterUpgrade v1.33.0: ${legacyHold(window, NOW)!.waitingFor}`,
    );
    // upgradeAt long past and delayedAfter set: the delayed prefix the workflow writes.
    const past = NOW - 3 * HOUR;
    expect(
      firstGate(call({ upgradeAtMs: past, delayedAfterMs: HOUR, maintenanceWindow: 'Sat 02:00 4h' }), NOW).message,
    ).toBe(`BeforeClusterUpgrade v1.33.0: ${delayedText(HOUR, past)}: ${legacyHold(window, NOW)!.waitingFor}`);
    // A run picked up at a later step: its calendar, else its step; never "queued behind" nothing.
    expect(firstGate(call({ maintenanceWindow: 'Sat 02:00 4h' }, bcp.hook), NOW).message).toBe(
      `BeforeControlPlaneUpgrade v1.32.0: ${legacyHold(window, NOW)!.waitingFor}`,
    );
    expect(firstGate(call({}, bcp.hook), NOW).message).toBe('BeforeControlPlaneUpgrade v1.32.0: starting its step');
  });
});
