import { describe, expect, it } from '@jest/globals';
import { parseMaintenanceWindow, windowState } from '../../src/domain/maintenance-window.ts';
import { DEFAULT_UPGRADE_POLICY, policyHash, resolveUpgradePolicy } from '../../src/domain/upgrade-policy.ts';
import { formatDuration } from '../../src/domain/durations.ts';

const P = 'upgrades.capi-orchestrator.io/';

describe('resolveUpgradePolicy', () => {
  it('has safe defaults', () => {
    expect(resolveUpgradePolicy({})).toEqual({ ok: true, policy: DEFAULT_UPGRADE_POLICY });
  });

  it('reads every key from settings, with annotations winning', () => {
    const r = resolveUpgradePolicy({
      settings: {
        upgradeAt: '2026-12-01T02:00:00Z',
        capacityReservation: 'true',
        blockingPdbPolicy: 'fail',
        healthCheckTimeout: '10m',
      },
      annotations: {
        [`${P}upgrade-at`]: '2026-12-05T03:30:00+01:00',
        [`${P}maintenance-window`]: 'Sat,Sun 02:00 4h',
        [`${P}commence-within`]: '2h',
        [`${P}pdb-force-drain-timeout`]: '15m',
        [`${P}critical-namespaces`]: 'kube-system, ingress',
      },
    });
    expect(r).toEqual({
      ok: true,
      policy: {
        upgradeAtMs: Date.parse('2026-12-05T02:30:00Z'),
        maintenanceWindow: 'Sat,Sun 02:00 4h',
        commenceWithinMs: 2 * 3_600_000,
        capacityReservation: 1,
        capacityReadyTimeoutMs: 15 * 60_000,
        pdbForceDrainTimeoutMs: 15 * 60_000,
        criticalNamespaces: ['kube-system', 'ingress'],
        blockingPdbPolicy: 'fail',
        healthCheckTimeoutMs: 10 * 60_000,
      },
    });
  });

  it.each([
    [`${P}upgrade-at`, 'tomorrow', 'not an RFC 3339 time'],
    [`${P}upgrade-at`, '2026-12-01T02:00:00', 'not an RFC 3339 time'],
    [`${P}commence-within`, '-5m', 'not a duration'],
    [`${P}commence-within`, '0', 'must be greater than zero'],
    [`${P}capacity-reservation`, 'lots', 'expected true, false or a machine count'],
    [`${P}maintenance-window`, 'Caturday 02:00 1h', 'unknown day'],
    [`${P}maintenance-window`, 'Sat 25:00 1h', 'is not HH:MM'],
    [`${P}blocking-pdb-policy`, 'maybe', 'expected fail or warn'],
    [`${P}critical-namespaces`, 'Kube_System', 'is not a namespace name'],
  ])('names %s=%j in the error', (annotation, value, reason) => {
    const r = resolveUpgradePolicy({ annotations: { [annotation]: value } });
    expect(r.ok).toBe(false);
    expect(!r.ok && r.message.startsWith(`annotation ${annotation}=${JSON.stringify(value)}: `)).toBe(true);
    expect(!r.ok && r.message).toContain(reason);
  });
});

describe('maintenance windows', () => {
  const at = (iso: string) => Date.parse(iso);
  // 2026-11-21 is a Saturday.
  const weekend = parseMaintenanceWindow('Sat,Sun 02:00 4h');
  if (!weekend.ok) throw new Error('fixture');

  it('is open inside the window and says when it closes', () => {
    expect(windowState(at('2026-11-21T03:00:00Z'), weekend.window)).toEqual({
      open: true,
      closesAt: at('2026-11-21T06:00:00Z'),
    });
  });

  it('says when it next opens from outside', () => {
    expect(windowState(at('2026-11-21T07:00:00Z'), weekend.window)).toEqual({
      open: false,
      opensAt: at('2026-11-22T02:00:00Z'),
    });
    expect(windowState(at('2026-11-23T10:00:00Z'), weekend.window)).toEqual({
      open: false,
      opensAt: at('2026-11-28T02:00:00Z'),
    });
  });

  it('handles windows past midnight and day ranges', () => {
    const nightly = parseMaintenanceWindow('Mon-Fri 22:00 4h');
    if (!nightly.ok) throw new Error('fixture');
    // Friday 23:00 and Saturday 01:00 are inside Friday's window; Saturday 23:00 is not.
    expect(windowState(at('2026-11-20T23:00:00Z'), nightly.window).open).toBe(true);
    expect(windowState(at('2026-11-21T01:00:00Z'), nightly.window).open).toBe(true);
    expect(windowState(at('2026-11-21T23:00:00Z'), nightly.window)).toEqual({
      open: false,
      opensAt: at('2026-11-23T22:00:00Z'),
    });
  });

  it('formats durations deterministically', () => {
    expect([formatDuration(300_000), formatDuration(5_400_000), formatDuration(1500), formatDuration(0)]).toEqual([
      '5m',
      '1h30m',
      '1s',
      '0s',
    ]);
  });
});

describe('policyHash', () => {
  const resolve = (annotations: Record<string, string>, settings: Record<string, string> = {}) => {
    const r = resolveUpgradePolicy({ annotations, settings });
    if (!r.ok) throw new Error(r.message);
    return r.policy;
  };
  it('is the same for the same policy however it was spelled, and differs when a value changes', () => {
    const a = resolve({ 'upgrades.capi-orchestrator.io/upgrade-at': '2026-12-01T02:00:00Z' });
    const b = resolve({}, { upgradeAt: '2026-12-01T02:00:00+00:00' });
    expect(policyHash(a)).toBe(policyHash(b));
    expect(policyHash(a)).toMatch(/^[0-9a-f]{16}$/);
    const c = resolve({ 'upgrades.capi-orchestrator.io/upgrade-at': '2026-12-01T03:00:00Z' });
    expect(policyHash(c)).not.toBe(policyHash(a));
    expect(policyHash(resolve({}))).toBe(policyHash({ ...DEFAULT_UPGRADE_POLICY }));
  });
});
