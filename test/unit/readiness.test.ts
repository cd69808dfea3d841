// The verdicts of the readiness check: each check says Ready, Blocked or Unknown with a message
// naming the object and the fix; the report is Blocked when any check is.
import { describe, expect, it } from '@jest/globals';
import {
  calendarCheck,
  healthCheck,
  lowestWorkerVersion,
  overallVerdict,
  planChain,
  planCheck,
  readinessReport,
  removedApisCheck,
  skewCheck,
  unknownCheck,
} from '../../src/domain/readiness.ts';
import { defaultPlanPolicy } from '../../src/domain/upgrade-plan.ts';
import { DEFAULT_UPGRADE_POLICY } from '../../src/domain/upgrade-policy.ts';
import type { UpgradePolicy } from '../../src/model/cluster-upgrade.ts';

const NOW = Date.parse('2026-11-25T12:00:00Z'); // a Wednesday
const policy = (p: Partial<UpgradePolicy> = {}): UpgradePolicy => ({ ...DEFAULT_UPGRADE_POLICY, ...p });

describe('planCheck', () => {
  it('is Ready with the hops GenerateUpgradePlan gives and Cluster API accepts', () => {
    const { check, plan } = planCheck({ controlPlane: 'v1.33.0', workers: 'v1.33.0' }, 'v1.35.0', defaultPlanPolicy());
    expect(check.verdict).toBe('Ready');
    expect(plan?.controlPlaneUpgrades.at(-1)).toBe('v1.35.0');
    expect(check.message).toMatch(/^control plane v1\.33\.0 → v1\.34\.\d+ → v1\.35\.0; workers: /);
    expect(planChain(plan!, 'v1.35.0')).toContain('v1.35.0');
  });

  it('is Blocked naming the versions when no plan exists', () => {
    const { check, plan } = planCheck({ controlPlane: 'v1.35.0' }, 'v1.33.0', defaultPlanPolicy());
    expect(plan).toBeUndefined();
    expect(check.verdict).toBe('Blocked');
    expect(check.message).toMatch(/^cannot plan an upgrade from v1\.35\.0 to v1\.33\.0.*\(fix the target/);
  });
});

describe('removedApisCheck', () => {
  const use = {
    group: 'flowcontrol.apiserver.k8s.io',
    version: 'v1beta3',
    resource: 'flowschemas',
    removedRelease: '1.32',
    count: 3,
  };
  it('is Blocked naming an API a hop removes, Ready otherwise', () => {
    const scan = { uses: [use], malformed: 0, dropped: 0 };
    const blocked = removedApisCheck(scan as never, ['v1.32.0'], 'v1.32.0');
    expect(blocked.verdict).toBe('Blocked');
    expect(blocked.message).toContain('flowschemas');
    expect(blocked.message).toMatch(/move those clients/);
    const fine = removedApisCheck({ uses: [], malformed: 0, dropped: 0 } as never, ['v1.32.0'], 'v1.32.0');
    expect(fine).toEqual({
      check: 'removed-apis',
      verdict: 'Ready',
      message: 'no requested API is removed by v1.32.0',
    });
  });
});

describe('healthCheck', () => {
  it('passes the report through: Blocked with its summary when unhealthy', () => {
    expect(healthCheck({ healthy: true, summary: '3 of 3 nodes Ready', findings: [], warnings: [] })).toEqual({
      check: 'health',
      verdict: 'Ready',
      message: '3 of 3 nodes Ready',
    });
    expect(
      healthCheck({ healthy: false, summary: '2 of 3 nodes Ready (w3: NotReady)', findings: [], warnings: [] }).verdict,
    ).toBe('Blocked');
  });
});

describe('skewCheck', () => {
  const plan = { controlPlaneUpgrades: ['v1.34.0', 'v1.35.0'], workersUpgrades: [] };
  it('is Blocked naming kubelets more than 3 minors behind where the control plane goes before the workers move', () => {
    const check = skewCheck(
      [
        { node: 'w2', version: 'v1.31.4' },
        { node: 'w1', version: 'v1.32.0' },
      ],
      plan,
      'v1.35.0',
    );
    expect(check).toEqual({
      check: 'version-skew',
      verdict: 'Blocked',
      message: 'kubelets more than 3 minors behind v1.35.0: w2 (v1.31.4) (upgrade or replace those nodes first)',
    });
  });
  it('measures against the first workers hop when the plan has one', () => {
    const check = skewCheck(
      [{ node: 'w1', version: 'v1.31.0' }],
      { ...plan, workersUpgrades: ['v1.34.0', 'v1.35.0'] },
      'v1.35.0',
    );
    expect(check).toEqual({
      check: 'version-skew',
      verdict: 'Ready',
      message: '1 kubelets within 3 minors of v1.34.0',
    });
  });
  it('is Unknown when a kubelet reports no readable version', () => {
    expect(skewCheck([{ node: 'w1', version: '' }], plan, 'v1.35.0').verdict).toBe('Unknown');
  });
});

describe('lowestWorkerVersion', () => {
  it('is the lowest kubelet of the nodes that are not control plane', () => {
    expect(
      lowestWorkerVersion([
        { node: 'cp', version: 'v1.30.0', controlPlane: true },
        { node: 'w1', version: 'v1.33.2', controlPlane: false },
        { node: 'w2', version: 'v1.33.0', controlPlane: false },
      ]),
    ).toBe('v1.33.0');
    expect(lowestWorkerVersion([])).toBeUndefined();
  });
});

describe('calendarCheck', () => {
  it('can start now with no upgradeAt ahead and no calendar', () => {
    expect(calendarCheck(policy(), NOW).message).toBe(
      'can start now: no upgradeAt ahead, the maintenance calendar is open',
    );
  });
  it('says when upgradeAt lets it start, in the policy time zone', () => {
    const check = calendarCheck(
      policy({ upgradeAtMs: NOW + 2 * 3_600_000, maintenanceTimeZone: 'Europe/Berlin' }),
      NOW,
    );
    expect(check).toEqual({
      check: 'calendar',
      verdict: 'Ready',
      message: 'can start at 2026-11-25T15:00:00+01:00 (waiting for upgradeAt 2026-11-25T14:00:00.000Z)',
    });
  });
  it('says when the window opens', () => {
    const check = calendarCheck(policy({ maintenanceWindow: 'Sat 02:00 4h' }), NOW);
    expect(check.verdict).toBe('Ready');
    expect(check.message).toBe(
      'can start at 2026-11-28T02:00:00Z (waiting for the maintenance window "Sat 02:00 4h" (opens 2026-11-28T02:00:00.000Z))',
    );
  });
  it('an overridden maintenance window does not hold it, and it does not claim the calendar is open', () => {
    const gateOverride = { gates: ['maintenance-window' as const], reason: 'hotfix' };
    expect(calendarCheck(policy({ maintenanceWindow: 'Sat 02:00 4h', gateOverride }), NOW)).toEqual({
      check: 'calendar',
      verdict: 'Ready',
      message: 'can start now: no upgradeAt ahead',
    });
  });
});

describe('the report', () => {
  it('is Blocked when any check is, else Unknown when any is, else Ready; checks in a fixed order', () => {
    const r = readinessReport({ cluster: 'ns/c', targetVersion: 'v1.35.0' }, [
      unknownCheck('health', 'could not run the health check: x'),
      { check: 'plan', verdict: 'Ready', message: 'p' },
    ]);
    expect(r.verdict).toBe('Unknown');
    expect(r.checks.map((c) => c.check)).toEqual(['plan', 'health']);
    expect(overallVerdict([...r.checks, { check: 'drain', verdict: 'Blocked', message: 'd' }])).toBe('Blocked');
    expect(overallVerdict([{ check: 'plan', verdict: 'Ready', message: 'p' }])).toBe('Ready');
  });
});
