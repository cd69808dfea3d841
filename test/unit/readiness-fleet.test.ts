// `capi-upgrades readiness --all`: the fleet ranked Blocked, Unknown, Ready with the first check
// that holds each cluster, and an exit code saying whether any is Blocked.
import { describe, expect, it } from '@jest/globals';
import { fleetExitCode, fleetText, rankFleet, type FleetResult } from '../../src/cli/readiness.ts';
import type { ReadinessReport } from '../../src/domain/readiness.ts';

const report = (cluster: string, checks: ReadinessReport['checks'], verdict: ReadinessReport['verdict']) => ({
  report: { cluster, fromVersion: 'v1.33.0', targetVersion: 'v1.35.0', verdict, checks },
});

const ready = report('fleet/a', [{ check: 'plan', verdict: 'Ready', message: 'control plane …' }], 'Ready');
const blocked = report(
  'fleet/b',
  [
    { check: 'plan', verdict: 'Ready', message: 'fine' },
    { check: 'removed-apis', verdict: 'Unknown', message: 'could not read /metrics' },
    { check: 'drain', verdict: 'Blocked', message: 'node w-1: PodDisruptionBudget shop/web covers shop/web-a' },
    { check: 'alerts', verdict: 'Blocked', message: 'alert KubeNodeNotReady firing' },
  ],
  'Blocked',
);
const unknown = report('fleet/c', [{ check: 'health', verdict: 'Unknown', message: 'could not run' }], 'Unknown');
const failed: FleetResult = { cluster: 'fleet/0', error: 'readiness of fleet/0: Cluster fleet/0 not found' };

describe('the fleet readiness table', () => {
  it('ranks Blocked first, then Unknown (a failed run too), then Ready, each with its first holding check', () => {
    const rows = rankFleet([ready, unknown, failed, blocked]);
    expect(rows.map((r) => [r.cluster, r.verdict, r.check])).toEqual([
      ['fleet/b', 'Blocked', 'drain'],
      ['fleet/0', 'Unknown', ''],
      ['fleet/c', 'Unknown', 'health'],
      ['fleet/a', 'Ready', ''],
    ]);
    expect(fleetText(rows)).toBe(
      [
        '4 clusters: 1 Blocked, 2 Unknown, 1 Ready',
        '',
        'CLUSTER  VERDICT  UPGRADE            CHECK   MESSAGE',
        'fleet/b  Blocked  v1.33.0 → v1.35.0  drain   node w-1: PodDisruptionBudget shop/web covers shop/web-a',
        'fleet/0  Unknown                             readiness of fleet/0: Cluster fleet/0 not found',
        'fleet/c  Unknown  v1.33.0 → v1.35.0  health  could not run',
        'fleet/a  Ready    v1.33.0 → v1.35.0',
      ].join('\n'),
    );
  });

  it('exits 1 when any cluster is Blocked, 3 when none is but one is Unknown, 0 when all are Ready', () => {
    expect(fleetExitCode(rankFleet([ready, blocked, unknown]))).toBe(1);
    expect(fleetExitCode(rankFleet([ready, failed]))).toBe(3);
    expect(fleetExitCode(rankFleet([ready]))).toBe(0);
    expect(fleetText([])).toBe('no Cluster found');
    expect(fleetExitCode([])).toBe(0);
  });
});
