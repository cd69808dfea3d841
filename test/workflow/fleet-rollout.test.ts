// The fleet rollout workflow on the real dev server with a real worker and a
// fake fleet behind stubbed activities (test/support/fake-fleet.ts).
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { WorkflowFailedError, type Client } from '@temporalio/client';
import { randomUUID } from 'node:crypto';
import type { FleetRolloutInput, FleetRolloutStatus } from '../../src/model/fleet-rollout.ts';
import { rolloutClusters } from '../../src/ops/metrics.ts';
import { refreshVisibilityGauges } from '../../src/ops/visibility-gauges.ts';
import { visibilityPort } from '../../src/platform/temporal/visibility.ts';
import { FakeFleet, startFakeFleetRollouts, type FakeFleetRollouts } from '../support/fake-fleet.ts';
import { recordHistoryIfAsked } from '../support/record-history.ts';
import { waitFor } from '../support/wait.ts';

let fleet: FakeFleet;

describe('fleet rollout workflow', () => {
  let client: Client;
  let rollouts: FakeFleetRollouts;

  beforeAll(async () => {
    rollouts = await startFakeFleetRollouts('fleet', () => fleet);
    ({ client } = rollouts);
  });
  afterAll(async () => {
    await rollouts?.close();
  });

  const input = (over: Partial<FleetRolloutInput> = {}): FleetRolloutInput => ({
    name: `r-${randomUUID().slice(0, 8)}`,
    selector: { labelSelector: 'env=prod' },
    targetVersion: 'v1.33.0',
    waves: ['1', '50%', '100%'],
    soak: '0s',
    maxConcurrent: 2,
    failureBudget: 0,
    ...over,
  });
  const start = (i: FleetRolloutInput) => rollouts.start(i);
  // A test that failed half-way must not leave its rollout acting on the next test's fleet.
  afterEach(async () => {
    await rollouts?.terminateStarted();
  });
  const status = (id: string) => client.workflow.getHandle(id).query<FleetRolloutStatus>('status');

  it('upgrades in waves, never more than maxConcurrent at once, soaks after each wave and skips clusters at the target', async () => {
    fleet = new FakeFleet(7);
    const current = fleet.clusters[6];
    if (current) current.version = 'v1.33.0';
    const h = await start(input({ soak: '1s' }));
    const result = (await h.result()) as FleetRolloutStatus;
    expect(result.phase).toBe('Completed');
    expect(result.message).toBe('completed: 6 upgraded, 1 skipped, 0 failed');
    await recordHistoryIfAsked(client, h.workflowId, 'fleet-rollout-waves');
    expect(result.waves.map((w) => [w.size, w.state])).toEqual([
      [1, 'done'],
      [2, 'done'],
      [3, 'done'],
    ]);
    expect(fleet.sets).toEqual(['c00', 'c01', 'c02', 'c03', 'c04', 'c05']);
    expect(fleet.maxInFlight).toBeLessThanOrEqual(2);
    expect(result.clusters.find((c) => c.name === 'c06')).toMatchObject({
      state: 'skipped',
      reason: 'already at v1.33.0',
    });
    // Wave 2 began only after wave 1's cluster was done and the soak had passed.
    const c0 = result.clusters.find((c) => c.name === 'c00');
    const c1 = result.clusters.find((c) => c.name === 'c01');
    expect(Date.parse(c1?.startedAt ?? '')).toBeGreaterThanOrEqual(Date.parse(c0?.finishedAt ?? '') + 1_000);
  });

  it('waits for approvals before and after a wave and records who approved', async () => {
    fleet = new FakeFleet(3);
    const h = await start(input({ waves: ['1', '100%'], approveBefore: [2], approveAfter: [1] }));
    const waiting = await waitFor(
      () => status(h.workflowId),
      (s) => s.phase === 'WaitingForApproval',
    );
    expect(waiting.message).toBe('wave 1 finished: waiting for approval to go on (signal approve with {"wave":1})');
    expect(fleet.sets).toEqual(['c00']);
    // The metric: this rollout's clusters by state, from its memo.
    const name = h.workflowId.replace('fleet-rollout/', '');
    const gauge = await waitFor(
      async () => {
        await refreshVisibilityGauges(visibilityPort(client));
        return (await rolloutClusters.get()).values.filter((v) => v.labels.rollout === name);
      },
      (values) => values.some((v) => v.labels.state === 'done' && v.value === 1),
    );
    expect(Object.fromEntries(gauge.map((v) => [v.labels.state, v.value]))).toEqual({
      pending: 2,
      upgrading: 0,
      done: 1,
      failed: 0,
      skipped: 0,
    });
    await h.signal('approve', { wave: 1, by: 'alice' });
    const before2 = await waitFor(
      () => status(h.workflowId),
      (s) => s.message.startsWith('waiting for approval of wave 2'),
    );
    expect(before2.waves[1]?.state).toBe('waiting-approval');
    expect(fleet.sets).toEqual(['c00']);
    await h.signal('approve', { wave: 2, by: 'bob' });
    const result = (await h.result()) as FleetRolloutStatus;
    expect(result.phase).toBe('Completed');
    expect(result.waves.map((w) => [w.approvedBeforeBy, w.approvedAfterBy])).toEqual([
      [undefined, 'alice'],
      ['bob', undefined],
    ]);
    await recordHistoryIfAsked(client, h.workflowId, 'fleet-rollout-approvals');
  });

  it('stops when more clusters of a wave fail than the budget allows, starting no further clusters', async () => {
    fleet = new FakeFleet(6);
    fleet.failing.add('c01').add('c02');
    const h = await start(input({ waves: ['1', '50%', '100%'], failureBudget: 1, maxConcurrent: 1 }));
    const result = (await h.result()) as FleetRolloutStatus;
    expect(result.phase).toBe('Stopped');
    expect(result.message).toBe(
      'stopped: 2 clusters of wave 2 failed, more than the failure budget 1; no further clusters started',
    );
    expect(fleet.sets).toEqual(['c00', 'c01', 'c02']);
    expect(result.waves.map((w) => w.state)).toEqual(['done', 'stopped', 'pending']);
    expect(result.clusters.find((c) => c.name === 'c01')).toMatchObject({
      state: 'failed',
      reason: 'upgrade failed: node n1 NotReady',
    });
  });

  it('counts a cluster unhealthy after the soak as failed, and skips one whose version someone else changed', async () => {
    fleet = new FakeFleet(4);
    fleet.unhealthy.add('c00');
    fleet.changedBySomeoneElse.add('c02');
    const h = await start(input({ waves: ['1', '100%'], failureBudget: 1, soak: '1s' }));
    const result = (await h.result()) as FleetRolloutStatus;
    expect(result.phase).toBe('Completed');
    expect(result.clusters.map((c) => [c.name, c.state, c.reason])).toEqual([
      ['c00', 'failed', 'unhealthy after the soak: node n1 NotReady'],
      ['c01', 'done', 'upgraded'],
      ['c02', 'skipped', 'version changed by someone else to v1.32.9 since it was selected'],
      ['c03', 'done', 'upgraded'],
    ]);
  });

  it('pauses (clusters in flight go on, no new ones), resumes, and aborts with the clusters in flight', async () => {
    fleet = new FakeFleet(8);
    fleet.upgradeMs = 1_500;
    const h = await start(input({ waves: ['100%'], maxConcurrent: 2 }));
    await waitFor(
      async () => fleet.sets.length,
      (n) => n >= 2,
    );
    await h.signal('pause');
    const paused = await waitFor(
      () => status(h.workflowId),
      (s) => s.phase === 'Paused' && s.clusters.filter((c) => c.state === 'upgrading').length === 0,
      10_000,
    );
    const setWhilePaused = fleet.sets.length;
    expect(paused.message).toMatch(/^paused: wave 1 of 1: /);
    await new Promise((r) => setTimeout(r, 1_000));
    expect(fleet.sets.length).toBe(setWhilePaused);
    await h.signal('resume');
    await waitFor(
      async () => fleet.sets.length,
      (n) => n > setWhilePaused,
    );
    await h.signal('abort', { reason: 'bad canary', abortInFlight: true });
    const result = (await h.result()) as FleetRolloutStatus;
    expect(result.phase).toBe('Aborted');
    expect(result.message).toBe('aborted: bad canary');
    await recordHistoryIfAsked(client, h.workflowId, 'fleet-rollout-paused-resumed-aborted');
    expect(fleet.aborted.length).toBeGreaterThan(0);
    expect(result.clusters.filter((c) => c.state === 'pending').length).toBeGreaterThan(0);
    for (const name of fleet.aborted)
      expect(result.clusters.find((c) => c.name === name)).toMatchObject({
        state: 'failed',
        reason: 'aborted with the rollout',
      });
  });

  it('continues as new when its history fills, and finishes every cluster', async () => {
    fleet = new FakeFleet(24);
    fleet.upgradeMs = 100;
    const i = input({ waves: ['100%'], maxConcurrent: 3, continueAsNewAtEvents: 60 });
    const h = await start(i);
    const result = (await client.workflow.getHandle(h.workflowId).result()) as FleetRolloutStatus;
    expect(result.phase).toBe('Completed');
    expect(result.clusters.every((c) => c.state === 'done')).toBe(true);
    expect(new Set(fleet.sets).size).toBe(24);
    const runs: number[] = [];
    for await (const wf of client.workflow.list({ query: `WorkflowId = ${JSON.stringify(h.workflowId)}` }))
      runs.push((await client.workflow.getHandle(h.workflowId, wf.runId).fetchHistory()).events?.length ?? 0);
    expect(runs.length).toBeGreaterThan(1);
    for (const n of runs) expect(n).toBeLessThanOrEqual(60 + 15);
  });

  it('counts a cluster whose upgrade outlasts the cluster deadline as failed', async () => {
    fleet = new FakeFleet(3);
    fleet.upgradeMs = 60_000;
    const h = await start(input({ waves: ['1', '100%'], clusterDeadline: '2s' }));
    const result = (await h.result()) as FleetRolloutStatus;
    expect(result).toMatchObject({
      phase: 'Stopped',
      message: 'stopped: 1 cluster of wave 1 failed, more than the failure budget 0; no further clusters started',
    });
    expect(result.clusters[0]).toMatchObject({
      state: 'failed',
      reason: 'did not finish within the cluster deadline 2s',
    });
    expect(fleet.sets).toEqual(['c00']);
  });

  it('rolls out to 1,000 clusters with no run over 2,000 events (default limit)', async () => {
    fleet = new FakeFleet(1_000);
    fleet.upgradeMs = 0;
    const h = await start(input({ waves: ['10', '50%', '100%'], maxConcurrent: 8 }));
    const result = (await client.workflow.getHandle(h.workflowId).result()) as FleetRolloutStatus;
    expect(result.message).toBe('completed: 1000 upgraded, 0 skipped, 0 failed');
    expect(result.waves.map((w) => w.size)).toEqual([10, 490, 500]);
    const runs: number[] = [];
    for await (const wf of client.workflow.list({ query: `WorkflowId = ${JSON.stringify(h.workflowId)}` }))
      runs.push((await client.workflow.getHandle(h.workflowId, wf.runId).fetchHistory()).events?.length ?? 0);
    expect(runs.length).toBeGreaterThan(1);
    for (const n of runs) expect(n).toBeLessThanOrEqual(2_000);
  }, 180_000);

  it.each([
    [{ waves: ['1', '50%'] }, 'waves must end at 100% (the last wave is "50%")'],
    [{ failureBudget: -1 }, 'failureBudget must be a whole number ≥ 0, got -1'],
    [{ selector: { labelSelector: 'env=nowhere' } }, 'selector matched no clusters'],
  ] as [Partial<FleetRolloutInput>, string][])('refuses %j at start, naming the field', async (over, message) => {
    fleet = new FakeFleet(over.selector ? 0 : 2);
    const h = await start(input(over));
    const err = await h.result().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(WorkflowFailedError);
    expect(String((err as WorkflowFailedError).cause?.message)).toContain(message);
    expect(fleet.sets).toEqual([]);
  });
});
