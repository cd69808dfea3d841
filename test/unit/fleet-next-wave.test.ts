// The look ahead at a fleet rollout's next wave: its words (status, memo) and the health check it asks of the
// fleet activity (the gate's check before an upgrade, which checks no version).
import { describe, expect, it } from '@jest/globals';
import { createFleetActivities } from '../../src/activities/fleet.ts';
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
