// Bounded history: a cluster upgrade whose health check fails for a long time
// continues as new in the middle of the wait, each run stays under its limit,
// the wait goes on where it was (its timeout counts from the first check), and
// the hooks answer through it all. Real dev server and worker, activities stubbed.
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { gateKey, type ClusterUpgradeStatus, type HookCall } from '../../src/model/cluster-upgrade.ts';
import { recordHistoryIfAsked } from '../support/record-history.ts';
import { startUpgradeHarness, steps, type UpgradeHarness } from '../support/upgrade-harness.ts';
import { waitFor } from '../support/wait.ts';

const FROM = 'v1.30.5';
const TARGET = 'v1.33.0';
const bcu = () => ({
  fromKubernetesVersion: FROM,
  toKubernetesVersion: TARGET,
  controlPlaneUpgrades: steps('v1.31.14', 'v1.32.13', TARGET),
  workersUpgrades: steps(TARGET),
});
const LIMIT = 45;
const unhealthy = { healthy: false, summary: 'node n1 is NotReady', findings: ['node n1 is NotReady'], warnings: [] };

describe('cluster upgrade history', () => {
  let h: UpgradeHarness;
  beforeEach(async () => {
    h = await startUpgradeHarness();
    await h.startWorker();
  });
  afterEach(async () => h.close());

  /** Every run of the upgrade, oldest first, with its history length. */
  const runs = async () => {
    const found: { runId: string; status: string; start: number; events: number }[] = [];
    for await (const wf of h.client.workflow.list({ query: `WorkflowId = ${JSON.stringify(h.workflowId)}` })) {
      const events = (await h.client.workflow.getHandle(h.workflowId, wf.runId).fetchHistory()).events?.length ?? 0;
      found.push({ runId: wf.runId, status: wf.status.name, start: wf.startTime.getTime(), events });
    }
    return found.sort((a, b) => a.start - b.start);
  };

  it('continues as new in the middle of a failing health check and picks the wait up where it was', async () => {
    h.activities.health = () => unhealthy;
    const call: HookCall = {
      hook: 'BeforeClusterUpgrade',
      version: TARGET,
      targetVersion: TARGET,
      fromVersion: FROM,
      controlPlaneUpgrades: ['v1.31.14', 'v1.32.13', TARGET],
      workersUpgrades: [TARGET],
      policy: {
        capacityReservation: 0,
        criticalNamespaces: ['kube-system'],
        blockingPdbPolicy: 'warn',
        healthCheckTimeoutMs: 3_600_000,
      },
    };
    const first = await h.client.workflow.start('clusterUpgradeWorkflow', {
      workflowId: h.workflowId,
      taskQueue: h.taskQueue,
      args: [{ cluster: h.ref, firstCall: call, continueAsNewAtEvents: LIMIT }],
    });
    const waiting = `BeforeClusterUpgrade ${TARGET}: waiting for the pre-upgrade health check: node n1 is NotReady`;
    await waitFor(
      async () => (await h.client.workflow.getHandle(h.workflowId, first.firstExecutionRunId).describe()).status.name,
      (s) => s === 'CONTINUED_AS_NEW',
      60_000,
    );
    // The hooks answer from the new run as they did from the old one.
    const answer = await waitFor(
      () => h.call('BeforeClusterUpgrade', bcu()),
      (a) => a.message === waiting,
    );
    expect(answer).toMatchObject({ status: 'Success', message: waiting });
    expect(answer.retryAfterSeconds).toBeGreaterThan(0);

    // The wait began in the first run: its timeout counts from there.
    const current = h.client.workflow.getHandle(h.workflowId);
    const started = (await current.describe()).startTime.getTime();
    const status = await waitFor(
      async () => (await current.query('status')) as ClusterUpgradeStatus,
      (s) => s.waits?.[gateKey('BeforeClusterUpgrade', TARGET)] !== undefined,
    );
    const wait = status.waits?.[gateKey('BeforeClusterUpgrade', TARGET)];
    expect(Date.parse(wait?.since ?? '')).toBeLessThan(started);
    expect(wait?.delayMs).toBeGreaterThan(2_000);

    // Healthy again: the gate opens in the new run, and no run grew past its limit.
    h.activities.health = () => ({ healthy: true, summary: 'healthy', findings: [], warnings: [] });
    const done = await h.pollUntilDone('BeforeClusterUpgrade', bcu(), { timeoutMs: 60_000 });
    expect(done).toMatchObject({ status: 'Success', retryAfterSeconds: 0 });
    const all = await runs();
    expect(all.length).toBeGreaterThanOrEqual(2);
    expect(all.slice(0, -1).every((r) => r.status === 'CONTINUED_AS_NEW')).toBe(true);
    // The limit stops the step at its next check; the run then settles and continues: a few events more.
    for (const r of all) expect(r.events).toBeLessThanOrEqual(LIMIT + 15);
    const final = (await current.query('status')) as ClusterUpgradeStatus;
    expect(final.waits?.[gateKey('BeforeClusterUpgrade', TARGET)]).toBeUndefined();
    expect(final.conditions.find((c) => c.type === 'PreHealthCheck')).toMatchObject({ status: 'True' });
    await recordHistoryIfAsked(h.client, h.workflowId, 'cluster-upgrade-continued-mid-wait', all[0]?.runId);
    await recordHistoryIfAsked(h.client, h.workflowId, 'cluster-upgrade-after-continue', all.at(-1)?.runId);
  });
});
