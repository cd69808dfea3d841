// The fleet rollout looks at the next wave ahead (real dev server, fake fleet): while a wave runs or soaks, each
// cluster of the next one gets a readiness run (health, drain, removed APIs, …), and the status and the memo name
// the ones that will hold it.
// Advisory: the wave in progress is neither held nor delayed, and the next one still opens.
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import type { Client } from '@temporalio/client';
import { randomUUID } from 'node:crypto';
import {
  FLEET_ROLLOUT_MEMO_KEY,
  type FleetRolloutInput,
  type FleetRolloutMemo,
  type FleetRolloutStatus,
} from '../../src/model/fleet-rollout.ts';
import { rolloutText } from '../../src/cli/rollouts.ts';
import { FakeFleet, startFakeFleetRollouts, type FakeFleetRollouts } from '../support/fake-fleet.ts';
import { recordHistoryIfAsked } from '../support/record-history.ts';
import { waitFor } from '../support/wait.ts';

let fleet: FakeFleet;
const HOLD = 'wave 2: 1 of 2 clusters will hold it: fleet/c02: health: node n1 NotReady';

describe('fleet rollout: the next wave checked ahead', () => {
  let client: Client;
  let rollouts: FakeFleetRollouts;

  beforeAll(async () => {
    rollouts = await startFakeFleetRollouts('fleet-next-wave', () => fleet);
    ({ client } = rollouts);
  });
  afterAll(async () => {
    await rollouts?.close();
  });
  afterEach(async () => {
    await rollouts?.terminateStarted();
  });

  const start = (over: Partial<FleetRolloutInput>) =>
    rollouts.start({
      name: `n-${randomUUID().slice(0, 8)}`,
      selector: { labelSelector: '' },
      targetVersion: 'v1.33.0',
      waves: ['1', '100%'],
      soak: '0s',
      maxConcurrent: 1,
      failureBudget: 0,
      ...over,
    });
  /** A rollout whose first wave stays in flight, once it has looked at the next wave. */
  const lookedAhead = async (clusters: number, unhealthy: string[]) => {
    fleet = new FakeFleet(clusters);
    fleet.upgradeMs = 600_000;
    for (const name of unhealthy) fleet.unhealthy.add(name);
    const h = await start({});
    const seen = await waitFor(
      () => h.query<FleetRolloutStatus>('status'),
      (s) => s.nextWave?.state === 'checked',
      30_000,
    );
    return { h, seen };
  };
  const memoOf = async (id: string) =>
    (await client.workflow.getHandle(id).describe()).memo?.[FLEET_ROLLOUT_MEMO_KEY] as FleetRolloutMemo | undefined;

  it('names a cluster of the next wave whose health check fails while the first wave still runs', async () => {
    const { h, seen } = await lookedAhead(3, ['c02']);
    // Wave 1 is still running: the look ahead neither waited for it nor held it.
    expect(seen.waves.map((w) => w.state)).toEqual(['running', 'pending']);
    expect(seen.clusters.map((c) => [c.name, c.state])).toEqual([
      ['c00', 'upgrading'],
      ['c01', 'pending'],
      ['c02', 'pending'],
    ]);
    expect(seen.phase).toBe('Running');
    expect(seen.nextWave).toEqual({
      wave: 2,
      state: 'checked',
      checked: 2,
      holding: [{ cluster: 'fleet/c02', finding: 'health: node n1 NotReady' }],
      message: HOLD,
    });
    const memo = await waitFor(
      () => memoOf(h.workflowId),
      (m) => m?.nextWave !== undefined,
    );
    expect(memo?.nextWave).toEqual({ wave: 2, holding: ['fleet/c02'], message: HOLD });
    expect(rolloutText(seen)).toContain(`next wave: ${HOLD}`);
    expect(fleet.sets).toEqual(['c00']);
  });

  it('names a cluster whose readiness is Blocked by more than health (a drain held by a budget), and the ones it could not tell', async () => {
    fleet = new FakeFleet(4);
    fleet.upgradeMs = 600_000;
    const drain = 'drain: node w-1: PodDisruptionBudget shop/web (minAvailable 2 with 2 healthy) covers shop/web-a';
    fleet.blocked.set('c02', drain);
    fleet.unknownReadiness.add('c03');
    const h = await start({});
    const seen = await waitFor(
      () => h.query<FleetRolloutStatus>('status'),
      (s) => s.nextWave?.state === 'checked',
      30_000,
    );
    expect(seen.nextWave).toEqual({
      wave: 2,
      state: 'checked',
      checked: 3,
      holding: [{ cluster: 'fleet/c02', finding: drain }],
      message: `wave 2: 1 of 3 clusters will hold it: fleet/c02: ${drain}; could not tell for 1: fleet/c03`,
    });
    expect(seen.waves.map((w) => w.state)).toEqual(['running', 'pending']);
  });

  it("checks a large next wave in batches and names the clusters that will hold it in the wave's order", async () => {
    const { seen } = await lookedAhead(46, ['c44', 'c03']);
    expect(seen.waves.map((w) => w.state)).toEqual(['running', 'pending']);
    expect(seen.nextWave?.checked).toBe(45);
    expect(seen.nextWave?.message).toBe(
      'wave 2: 2 of 45 clusters will hold it: fleet/c03: health: node n1 NotReady; fleet/c44: health: node n1 NotReady',
    );
    expect(fleet.readinessChecks).toEqual([20, 20, 5]);
    // The readiness runs check health themselves: no health-only look.
    expect(fleet.healthChecks).toEqual([]);
  });

  it('checks the next wave again when a wave starts to soak, and says when none of its clusters will hold it', async () => {
    fleet = new FakeFleet(3);
    fleet.upgradeMs = 5_000;
    fleet.unhealthy.add('c02');
    const h = await start({ soak: '1h' });
    await waitFor(
      () => h.query<FleetRolloutStatus>('status'),
      (s) => s.nextWave?.state === 'checked' && s.nextWave.holding.length === 1,
      30_000,
    );
    // Fixed while wave 1 runs: the look when its soak starts says so.
    fleet.unhealthy.delete('c02');
    const soaking = await waitFor(
      () => h.query<FleetRolloutStatus>('status'),
      (s) => s.phase === 'Soaking' && s.nextWave?.state === 'checked' && s.nextWave.holding.length === 0,
      30_000,
    );
    expect(soaking.waves.map((w) => w.state)).toEqual(['soaking', 'pending']);
    expect(soaking.nextWave?.message).toBe('wave 2: none of its 2 clusters will hold it (readiness checked)');
    await recordHistoryIfAsked(client, h.workflowId, 'fleet-rollout-next-wave-checked');
  });

  it('does not stop or delay the rollout when a cluster of the next wave will hold it', async () => {
    fleet = new FakeFleet(3);
    fleet.unhealthy.add('c02');
    const h = await start({ failureBudget: 1 });
    const result = (await h.result()) as FleetRolloutStatus;
    expect(result.phase).toBe('Completed');
    expect(fleet.sets).toEqual(['c00', 'c01', 'c02']);
  });
});
