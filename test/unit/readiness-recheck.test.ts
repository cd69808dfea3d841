// Readiness while an upgrade waits to start, the pure part: when the next re-check is due (the
// interval, and once more an hour before the start), the plan check of a plan CAPI sent, the
// words of the memo, Event and gate, and the policy setting readinessInterval.
import { describe, expect, it } from '@jest/globals';
import {
  blockingText,
  DEFAULT_READINESS_INTERVAL_MS,
  FINAL_READINESS_LEAD_MS,
  nextReadinessCheck,
  plannedCheck,
  readinessEvent,
  readinessGateText,
} from '../../src/domain/readiness-recheck.ts';
import type { ReadinessCheck } from '../../src/domain/readiness.ts';
import { resolveUpgradePolicy } from '../../src/domain/upgrade-policy.ts';

const NOW = Date.parse('2026-11-25T12:00:00Z');
const MIN = 60_000;
const HOUR = 60 * MIN;

describe('nextReadinessCheck', () => {
  const next = (lastCheckAt: number | undefined, startsAt: number, intervalMs = DEFAULT_READINESS_INTERVAL_MS) =>
    nextReadinessCheck({ lastCheckAt, intervalMs, startsAt });

  it('is due at once when nothing was checked yet', () => {
    expect(next(undefined, NOW + 2 * HOUR)).toBeLessThanOrEqual(NOW);
  });

  it('is due one interval after the last check', () => {
    expect(next(NOW, NOW + 5 * HOUR)).toBe(NOW + 15 * MIN);
    expect(next(NOW, NOW + 5 * HOUR, 10_000)).toBe(NOW + 10_000);
  });

  it('is due an hour before the start when that comes before the next interval', () => {
    // Checked at 12:00, may start at 13:05, every 6 h: once more at 12:05.
    expect(next(NOW, NOW + HOUR + 5 * MIN, 6 * HOUR)).toBe(NOW + 5 * MIN);
    expect(FINAL_READINESS_LEAD_MS).toBe(HOUR);
  });

  it('does not repeat the hour-before check once a check ran inside the last hour', () => {
    // Checked at 12:05 (the hour-before one), may start at 13:05: the next is the interval's.
    expect(next(NOW + 5 * MIN, NOW + HOUR + 5 * MIN, 6 * HOUR)).toBe(NOW + 5 * MIN + 6 * HOUR);
    // The wait began inside the last hour: the first check was after the mark already.
    expect(next(NOW, NOW + 30 * MIN)).toBe(NOW + 15 * MIN);
  });

  it('follows a start that moves (a window after upgradeAt): an hour before the new start', () => {
    expect(next(NOW, NOW + 10 * HOUR, 24 * HOUR)).toBe(NOW + 9 * HOUR);
  });

  it('is never due when re-checks are off', () => {
    expect(next(undefined, NOW + HOUR, 0)).toBeUndefined();
    expect(next(NOW, NOW + HOUR, 0)).toBeUndefined();
  });
});

describe('plannedCheck', () => {
  const base = {
    fromVersion: 'v1.30.5',
    lowestWorker: 'v1.30.5',
    target: 'v1.33.0',
    controlPlaneUpgrades: ['v1.31.14', 'v1.32.13', 'v1.33.0'],
    workersUpgrades: ['v1.33.0'],
  };

  it('is Ready with the plan CAPI sent, its workers plan defaulted when empty', () => {
    expect(plannedCheck(base)).toEqual({
      check: {
        check: 'plan',
        verdict: 'Ready',
        message: 'control plane v1.30.5 → v1.31.14 → v1.32.13 → v1.33.0; workers: v1.33.0',
      },
      plan: { controlPlaneUpgrades: base.controlPlaneUpgrades, workersUpgrades: ['v1.33.0'] },
    });
    expect(plannedCheck({ ...base, workersUpgrades: [] }).plan?.workersUpgrades).toEqual(['v1.33.0']);
  });

  it('is Blocked naming the broken rule, Unknown without a from version', () => {
    const skipped = plannedCheck({ ...base, controlPlaneUpgrades: ['v1.33.0'] });
    expect(skipped.check.verdict).toBe('Blocked');
    expect(skipped.check.message).toMatch(/^the plan breaks Cluster API's rules: /);
    expect(skipped.plan).toBeUndefined();
    expect(plannedCheck({ ...base, fromVersion: undefined }).check).toEqual({
      check: 'plan',
      verdict: 'Unknown',
      message: 'the hook did not say the version it upgrades from',
    });
  });
});

describe('the words of a report', () => {
  const checks: ReadinessCheck[] = [
    { check: 'plan', verdict: 'Ready', message: 'fine' },
    { check: 'drain', verdict: 'Blocked', message: 'node w-1: PodDisruptionBudget shop/web covers shop/web-a' },
    { check: 'health', verdict: 'Unknown', message: 'could not run the health check: timeout' },
  ];

  it('names each blocked check in its own words, bounded', () => {
    expect(blockingText(checks)).toEqual(['drain: node w-1: PodDisruptionBudget shop/web covers shop/web-a']);
    const many = ['plan', 'drain', 'health', 'calendar', 'removed-apis'].map(
      (check) => ({ check, verdict: 'Blocked', message: 'x'.repeat(1000) }) as ReadinessCheck,
    );
    const text = blockingText(many);
    expect(text).toHaveLength(4);
    expect(text[0]).toHaveLength(400);
    expect(text[3]).toBe('and 2 more blocked checks');
    expect(readinessGateText(checks)).toBe(
      'readiness Blocked: drain: node w-1: PodDisruptionBudget shop/web covers shop/web-a',
    );
  });

  it('makes an Event per verdict: Warning naming what blocks or cannot be told, Normal when Ready', () => {
    expect(readinessEvent('v1.33.0', 'Blocked', checks)).toEqual({
      type: 'Warning',
      message: 'readiness for v1.33.0: Blocked: drain: node w-1: PodDisruptionBudget shop/web covers shop/web-a',
    });
    expect(readinessEvent('v1.33.0', 'Unknown', checks)).toEqual({
      type: 'Warning',
      message: 'readiness for v1.33.0: Unknown: health: could not run the health check: timeout',
    });
    expect(readinessEvent('v1.33.0', 'Ready', [])).toEqual({ type: 'Normal', message: 'readiness for v1.33.0: Ready' });
  });
});

describe('policy readinessInterval', () => {
  const resolve = (value: string) =>
    resolveUpgradePolicy({ annotations: { 'upgrades.capi-orchestrator.io/readiness-interval': value } });

  it('is unset by default (the default interval applies, the policy hash of older upgrades is kept)', () => {
    const r = resolveUpgradePolicy({});
    expect(r.ok && r.policy.readinessIntervalMs).toBeUndefined();
  });

  it('reads a duration from 10s to 24h, or off', () => {
    expect(resolve('30m')).toMatchObject({ ok: true, policy: { readinessIntervalMs: 30 * MIN } });
    expect(resolve('10s')).toMatchObject({ ok: true, policy: { readinessIntervalMs: 10_000 } });
    expect(resolve('off')).toMatchObject({ ok: true, policy: { readinessIntervalMs: 0 } });
    expect(resolveUpgradePolicy({ settings: { readinessInterval: '1h' } })).toMatchObject({
      ok: true,
      policy: { readinessIntervalMs: HOUR },
    });
  });

  it('refuses anything else, naming the annotation', () => {
    for (const bad of ['5s', '25h', 'soon'])
      expect(resolve(bad)).toEqual({
        ok: false,
        message: `annotation upgrades.capi-orchestrator.io/readiness-interval=${JSON.stringify(bad)}: expected off or a duration from 10s to 24h, e.g. 15m`,
      });
  });
});
