// CAPI's pacing annotations in the fleet rollout workflow (real dev server, fake fleet): a cluster CAPI's
// pacing annotations defer is neither started, failed nor late; it is started once they go.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Client } from '@temporalio/client';
import { randomUUID } from 'node:crypto';
import type { FleetRolloutInput, FleetRolloutStatus } from '../../src/model/fleet-rollout.ts';
import { FakeFleet, startFakeFleetRollouts, type FakeFleetRollouts } from '../support/fake-fleet.ts';
import { recordHistoryIfAsked } from '../support/record-history.ts';
import { waitFor } from '../support/wait.ts';

const DEFERRED = 'deferred by CAPI annotation topology.cluster.x-k8s.io/defer-upgrade (MachineDeployment md-1)';
let fleet: FakeFleet;

describe('fleet rollout workflow and CAPI pacing annotations', () => {
  let client: Client;
  let rollouts: FakeFleetRollouts;

  beforeAll(async () => {
    rollouts = await startFakeFleetRollouts('fleet-pacing', () => fleet);
    ({ client } = rollouts);
  });
  afterAll(async () => {
    await rollouts?.close();
  });

  const start = (over: Partial<FleetRolloutInput>) =>
    rollouts.start({
      name: `p-${randomUUID().slice(0, 8)}`,
      selector: { labelSelector: '' },
      targetVersion: 'v1.33.0',
      waves: ['100%'],
      soak: '0s',
      maxConcurrent: 2,
      failureBudget: 0,
      deferralRecheckMs: 300,
      ...over,
    });

  it('leaves a deferred cluster alone without a place or a failure, and starts it when the annotation goes', async () => {
    fleet = new FakeFleet(3);
    fleet.deferred.set('c00', DEFERRED);
    const h = await start({ maxConcurrent: 1 });
    const held = await waitFor(
      () => h.query<FleetRolloutStatus>('status'),
      (s) => s.clusters.filter((c) => c.state === 'done').length === 2,
      60_000,
    );
    // The deferred one took no place: the other two went one after the other.
    expect(held.clusters.map((c) => [c.name, c.state, c.reason])).toEqual([
      ['c00', 'deferred', DEFERRED],
      ['c01', 'done', 'upgraded'],
      ['c02', 'done', 'upgraded'],
    ]);
    expect(held.clusters[0]?.startedAt).toBeUndefined();
    expect(held).toMatchObject({ phase: 'Running', message: 'wave 1 of 1: 1 deferred, 2 done (failure budget 0)' });
    expect(fleet.sets).toEqual(['c01', 'c02']);
    fleet.deferred.delete('c00');
    const result = (await h.result()) as FleetRolloutStatus;
    expect(result).toMatchObject({ phase: 'Completed', message: 'completed: 3 upgraded, 0 skipped, 0 failed' });
    expect(fleet.sets).toEqual(['c01', 'c02', 'c00']);
    expect(result.clusters[0]?.startedAt).toBeDefined();
    await recordHistoryIfAsked(client, h.workflowId, 'fleet-rollout-capi-deferral');
  });

  it('does not fail a cluster on its deadline while CAPI defers its workers after its version was set', async () => {
    fleet = new FakeFleet(1);
    fleet.upgradeMs = 600_000;
    const h = await start({ clusterDeadline: '2s' });
    await waitFor(
      () => Promise.resolve(fleet.sets.length),
      (n) => n === 1,
    );
    // The annotation comes once the version is set (CAPI then holds the workers).
    fleet.deferred.set('c00', DEFERRED);
    const shown = await waitFor(
      () => h.query<FleetRolloutStatus>('status'),
      (s) => s.clusters[0]?.reason === DEFERRED,
      30_000,
    );
    expect(shown.clusters[0]?.state).toBe('upgrading');
    // Well past the deadline: still upgrading, not failed.
    await new Promise((r) => setTimeout(r, 4_000));
    expect((await h.query<FleetRolloutStatus>('status')).clusters[0]).toMatchObject({
      state: 'upgrading',
      reason: DEFERRED,
    });
    // The annotation goes and CAPI finishes the upgrade.
    fleet.deferred.delete('c00');
    fleet.upgradeMs = 0;
    const result = (await h.result()) as FleetRolloutStatus;
    expect(result).toMatchObject({ phase: 'Completed', message: 'completed: 1 upgraded, 0 skipped, 0 failed' });
  });
});
