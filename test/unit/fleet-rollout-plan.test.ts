import { describe, expect, it } from '@jest/globals';
import { checkRolloutInput, planRollout, waveBoundaries } from '../../src/domain/fleet-rollout-plan.ts';
import type { FleetRolloutInput, SelectedCluster } from '../../src/model/fleet-rollout.ts';

const input = (over: Partial<FleetRolloutInput> = {}): FleetRolloutInput => ({
  name: 'prod-1-33',
  selector: { labelSelector: 'env=prod' },
  targetVersion: 'v1.33.0',
  waves: ['1', '10%', '50%', '100%'],
  soak: '30m',
  maxConcurrent: 5,
  failureBudget: 0,
  ...over,
});
const clusters = (n: number, version = 'v1.32.4'): SelectedCluster[] =>
  Array.from({ length: n }, (_, i) => ({
    namespace: `team-${String(i % 3)}`,
    name: `c${String(i).padStart(3, '0')}`,
    uid: `uid-${i}`,
    version,
  }));

describe('fleet rollout input', () => {
  it.each([
    [{ name: 'Prod_1' }, 'name "Prod_1" must be a DNS-1123 label'],
    [{ targetVersion: '1.33.x' }, 'targetVersion "1.33.x" is not a Kubernetes version'],
    [{ waves: [] }, 'waves must list at least one wave, ending at 100%'],
    [{ waves: ['1', '50%'] }, 'waves must end at 100% (the last wave is "50%")'],
    [{ waves: ['0', '100%'] }, 'waves[0] "0" is not a count (e.g. 1) or a percentage (e.g. 10%) above 0'],
    [{ waves: ['1', '120%'] }, 'waves[1] "120%" is not a count'],
    [{ failureBudget: -1 }, 'failureBudget must be a whole number ≥ 0, got -1'],
    [{ maxConcurrent: 0 }, 'maxConcurrent must be a whole number ≥ 1, got 0'],
    [{ soak: 'soon' }, 'soak "soon" is not a duration like 30m or 0s'],
    [{ clusterDeadline: '0s' }, 'clusterDeadline "0s" is not a positive duration like 6h'],
    [{ approveBefore: [5] }, 'approveBefore: wave 5 does not exist (waves are 1 to 4)'],
    [
      { selector: { labelSelector: '', namespaces: ['Bad NS'] } },
      'selector.namespaces: "Bad NS" is not a namespace name',
    ],
  ] as [Partial<FleetRolloutInput>, string][])('refuses %j naming the field', (over, message) => {
    const checked = checkRolloutInput(input(over));
    expect(checked.ok).toBe(false);
    expect(checked.ok ? '' : checked.message).toContain(message);
  });

  it('accepts a good input with durations in milliseconds', () => {
    expect(checkRolloutInput(input({ approveAfter: [1, 1], clusterDeadline: '2h' }))).toEqual({
      ok: true,
      value: {
        maxConcurrent: 5,
        failureBudget: 0,
        soakMs: 1_800_000,
        clusterDeadlineMs: 7_200_000,
        approveBefore: [],
        approveAfter: [1],
      },
    });
  });
});

describe('waves', () => {
  it('turns counts and percentages into cumulative sizes, dropping waves that add nothing', () => {
    expect(waveBoundaries(['1', '10%', '50%', '100%'], 100)).toEqual([1, 10, 50, 100]);
    expect(waveBoundaries(['1', '10%', '50%', '100%'], 5)).toEqual([1, 3, 5]);
    expect(waveBoundaries(['3', '2', '100%'], 10)).toEqual([3, 10]);
    expect(waveBoundaries(['100%'], 1)).toEqual([1]);
    expect(waveBoundaries(['1', '100%'], 0)).toEqual([]);
  });

  it('splits the selection in a stable order and skips clusters at or above the target', () => {
    const found = [
      ...clusters(9),
      { namespace: 'a', name: 'done', uid: 'u-done', version: 'v1.33.0' },
      { namespace: 'a', name: 'newer', uid: 'u-newer', version: 'v1.34.1' },
    ];
    const shuffled = [...found].reverse();
    const plan = planRollout(input({ waves: ['1', '50%', '100%'] }), shuffled);
    expect(plan).toEqual(planRollout(input({ waves: ['1', '50%', '100%'] }), found));
    if (!plan.ok) throw new Error(plan.message);
    expect(plan.value.waves.map((w) => w.size)).toEqual([1, 4, 4]);
    const skipped = plan.value.clusters.filter((c) => c.state === 'skipped');
    expect(skipped.map((c) => [c.name, c.reason])).toEqual([
      ['done', 'already at v1.33.0'],
      ['newer', 'at v1.34.1, above or beside the target v1.33.0'],
    ]);
    const first = plan.value.clusters.find((c) => c.wave === 1);
    expect(first).toMatchObject({ namespace: 'team-0', name: 'c000', state: 'pending' });
  });

  it('refuses an empty selection and a target below every cluster it could touch', () => {
    expect(planRollout(input(), [])).toEqual({
      ok: false,
      message: 'selector matched no clusters (labelSelector "env=prod"): nothing to roll out',
    });
    const down = planRollout(input({ targetVersion: 'v1.31.0' }), clusters(3));
    expect(down.ok ? '' : down.message).toBe(
      'targetVersion v1.31.0 is below the version of cluster team-0/c000 (v1.32.4) and no selected cluster is below it: a rollout never downgrades',
    );
    // Everything already there: nothing to refuse, nothing to do.
    const none = planRollout(input(), clusters(2, 'v1.33.0'));
    expect(none.ok && none.value.waves).toEqual([]);
  });
});
