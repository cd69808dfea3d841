// The look ahead at a fleet rollout's next wave: its words (status, memo), the health check it asks of the
// fleet activity in runs from before readiness (the gate's check before an upgrade, which checks no version),
// and the readiness runs it asks for now, a few at a time.
import { describe, expect, it } from '@jest/globals';
import { MockActivityEnvironment } from '@temporalio/testing';
import { createFleetActivities } from '../../src/activities/fleet.ts';
import { READINESS_RUNS_AT_ONCE } from '../../src/activities/fleet-readiness.ts';
import type { ReadinessReport } from '../../src/domain/readiness.ts';
import type { ReadinessInput } from '../../src/model/readiness.ts';
import type { HealthCheckInput } from '../../src/activities/upgrade-types.ts';
import { nextWaveChecked, nextWaveChecking, nextWaveMemo, nextWaveUnknown } from '../../src/domain/fleet-next-wave.ts';
import type { SelectedCluster } from '../../src/model/fleet-rollout.ts';
import { managementKubeConfig } from '../../src/platform/kube/clients.ts';

const hold = (name: string, finding = 'node n1 NotReady') => ({ cluster: `fleet/${name}`, finding });

describe('next wave words', () => {
  it('names the clusters that will hold the wave, at most three, and says when none will', () => {
    expect(nextWaveChecked(2, 1, []).message).toBe('wave 2: none of its 1 cluster will hold it (health checked)');
    expect(nextWaveChecked(2, 3, [hold('c02')]).message).toBe(
      'wave 2: 1 of 3 clusters will hold it: fleet/c02: node n1 NotReady',
    );
    const many = nextWaveChecked(
      3,
      9,
      ['a', 'b', 'c', 'd', 'e'].map((n) => hold(n, 'x')),
    );
    expect(many.message).toBe('wave 3: 5 of 9 clusters will hold it: fleet/a: x; fleet/b: x; fleet/c: x; and 2 more');
    expect(many.holding).toHaveLength(5);
    expect(nextWaveChecked(2, 1, [hold('c', 'y'.repeat(1_000))]).message).toHaveLength(400);
  });

  it('keeps the last result of the same wave while a new look runs, and starts empty for another wave', () => {
    const last = nextWaveChecked(2, 2, [hold('c02')]);
    expect(nextWaveChecking(2, 2, last)).toEqual({ ...last, state: 'checking' });
    expect(nextWaveChecking(3, 4, last)).toEqual({
      wave: 3,
      state: 'checking',
      checked: 0,
      holding: [],
      message: 'wave 3: checking its 4 clusters',
    });
  });

  it('says why a look could not tell', () => {
    expect(nextWaveUnknown(2, 2, 'connection refused')).toMatchObject({
      holding: [],
      message: 'wave 2: could not check its 2 clusters: connection refused',
    });
  });

  it('leaves the memo as it was until a look has finished, then names at most five clusters', () => {
    expect(nextWaveMemo(undefined)).toBeUndefined();
    expect(nextWaveMemo(nextWaveChecking(2, 2, undefined))).toBeUndefined();
    const names = ['a', 'b', 'c', 'd', 'e', 'f'];
    const memo = nextWaveMemo(
      nextWaveChecked(
        2,
        6,
        names.map((n) => hold(n)),
      ),
    );
    expect(memo?.holding).toEqual(['fleet/a', 'fleet/b', 'fleet/c', 'fleet/d', 'fleet/e']);
  });
});

describe('checkClustersHealth', () => {
  const c: SelectedCluster = { namespace: 'fleet', name: 'c02', uid: 'uid-2', version: 'v1.32.4' };
  const fleetWith = (asked: HealthCheckInput[]) =>
    createFleetActivities({
      management: managementKubeConfig(undefined, {}),
      checkClusterHealth: async (input) => {
        asked.push(input);
        return { healthy: false, summary: 'node n1 NotReady', findings: ['node n1: NotReady'], warnings: [] };
      },
    });

  it('asks the check before an upgrade (no version) for the next wave, and the check after it by default', async () => {
    const asked: HealthCheckInput[] = [];
    const fleet = fleetWith(asked);
    expect(await fleet.checkClustersHealth({ clusters: [c], version: 'v1.33.0', scope: 'pre' })).toEqual([
      { uid: 'uid-2', summary: 'node n1 NotReady' },
    ]);
    await fleet.checkClustersHealth({ clusters: [c], version: 'v1.33.0' });
    expect(asked.map((a) => [a.scope, a.version])).toEqual([
      ['pre', undefined],
      ['post', 'v1.33.0'],
    ]);
  });
});

describe('checkClustersReadiness', () => {
  const clusters: SelectedCluster[] = ['c00', 'c01', 'c02', 'c03', 'c04', 'c05'].map((name, i) => ({
    namespace: 'fleet',
    name,
    uid: `uid-${i}`,
    version: 'v1.32.4',
  }));
  const report = (name: string, verdict: ReadinessReport['verdict']): ReadinessReport => ({
    cluster: `fleet/${name}`,
    targetVersion: 'v1.33.0',
    verdict,
    checks: [
      { check: 'plan', verdict: 'Ready', message: 'control plane v1.32.4 → v1.33.0' },
      ...(verdict === 'Blocked'
        ? [
            { check: 'drain' as const, verdict: 'Blocked' as const, message: 'node w-1: PodDisruptionBudget shop/web' },
            { check: 'health' as const, verdict: 'Blocked' as const, message: '1 of 2 nodes Ready' },
          ]
        : []),
      ...(verdict === 'Unknown'
        ? [{ check: 'removed-apis' as const, verdict: 'Unknown' as const, message: 'could not read /metrics' }]
        : []),
    ],
  });

  it('runs one readiness run per cluster on its own task queue, a few at a time, and returns those not Ready', async () => {
    const asked: { input: ReadinessInput; taskQueue: string }[] = [];
    let running = 0;
    let most = 0;
    const fleet = createFleetActivities({
      management: managementKubeConfig(undefined, {}),
      checkClusterHealth: () => Promise.reject(new Error('not asked')),
      temporal: {
        signal: () => Promise.reject(new Error('not asked')),
        describe: () => Promise.reject(new Error('not asked')),
        async readiness(input, taskQueue) {
          asked.push({ input, taskQueue });
          running++;
          most = Math.max(most, running);
          await new Promise((r) => setTimeout(r, 20));
          running--;
          const name = input.cluster.name;
          if (name === 'c04') throw new Error('workflow execution timed out');
          return report(name, name === 'c01' ? 'Blocked' : name === 'c03' ? 'Unknown' : 'Ready');
        },
      },
    });
    const env = new MockActivityEnvironment({ taskQueue: 'upgrades' });
    const found = await env.run(fleet.checkClustersReadiness, { clusters, version: 'v1.33.0' });
    expect(found).toEqual([
      {
        uid: 'uid-1',
        verdict: 'Blocked',
        finding: 'drain: node w-1: PodDisruptionBudget shop/web; health: 1 of 2 nodes Ready',
      },
      { uid: 'uid-3', verdict: 'Unknown', finding: 'removed-apis: could not read /metrics' },
      { uid: 'uid-4', verdict: 'Unknown', finding: 'its readiness run failed: workflow execution timed out' },
    ]);
    expect(asked.map((a) => a.input)).toEqual(
      clusters.map((c) => ({ cluster: { namespace: 'fleet', name: c.name }, targetVersion: 'v1.33.0' })),
    );
    expect(new Set(asked.map((a) => a.taskQueue))).toEqual(new Set(['upgrades']));
    expect(most).toBe(READINESS_RUNS_AT_ONCE);
  });
});

describe('next wave words after readiness', () => {
  it('says readiness was checked, and names the clusters it could not tell for', () => {
    expect(nextWaveChecked(2, 3, [], { unknown: [] }).message).toBe(
      'wave 2: none of its 3 clusters will hold it (readiness checked)',
    );
    expect(nextWaveChecked(2, 6, [hold('a')], { unknown: ['fleet/b', 'fleet/c', 'fleet/d', 'fleet/e'] }).message).toBe(
      'wave 2: 1 of 6 clusters will hold it: fleet/a: node n1 NotReady; could not tell for 4: fleet/b, fleet/c, fleet/d and 1 more',
    );
  });
});
