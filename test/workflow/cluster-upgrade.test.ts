// Cluster upgrades driven by HTTPS hook calls in CAPI's order, on the real
// dev server with a real worker; activities stubbed.
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { clusterUpgradeWorkflowId, type ClusterUpgradeStatus } from '../../src/model/cluster-upgrade.ts';
import { recordHistoryIfAsked } from '../support/record-history.ts';
import { settledHistory, waitFor } from '../support/wait.ts';
import {
  beforeClusterUpgrade,
  driveChainedUpgrade,
  startUpgradeHarness,
  type UpgradeHarness,
} from '../support/upgrade-harness.ts';

const TARGET = 'v1.33.0';
const CP_PLAN = ['v1.31.14', 'v1.32.13', 'v1.33.0'];

describe('cluster upgrade workflow through the hooks', () => {
  let h: UpgradeHarness;
  beforeEach(async () => {
    h = await startUpgradeHarness();
    await h.startWorker();
  });
  afterEach(async () => h.close());

  const handle = () => h.client.workflow.getHandle(h.workflowId);

  it('runs a chained upgrade v1.30 → v1.33 with capacity reservation, in CAPI order', async () => {
    await driveChainedUpgrade(h, { 'upgrades.capi-orchestrator.io/capacity-reservation': '1' });
    const result = (await handle().result()) as ClusterUpgradeStatus;
    await recordHistoryIfAsked(h.client, h.workflowId, 'cluster-upgrade-chained-with-capacity');
    expect(result.phase).toBe('Upgraded');
    expect(result.history.map((e) => [e.version, e.phase])).toEqual(CP_PLAN.map((v) => [v, 'Upgraded']));
    const condition = (type: string) => result.conditions.find((c) => c.type === type);
    expect(condition('Scheduled')?.status).toBe('True');
    expect(condition('PreHealthCheck')?.status).toBe('True');
    expect(condition('ScaleUpExtraNodes')).toMatchObject({ status: 'True', message: 'reserved md-0 2→3' });
    expect(condition('RemoveExtraNodes')).toMatchObject({ status: 'True', message: 'released md-0 3→2' });
    expect(condition('PostHealthCheck')?.status).toBe('True');
    const v33 = result.history.find((e) => e.version === 'v1.33.0');
    expect(v33?.conditions.map((c) => [c.type, c.status])).toEqual([
      ['ControlPlaneUpgraded', 'True'],
      ['WorkersUpgraded', 'True'],
    ]);
    expect(h.activities.calls.reserve).toBe(1);
    expect(h.activities.calls.release).toBe(1);
    expect(h.activities.calls.health.map((c) => `${c.scope}@${c.version ?? '-'}`)).toEqual([
      'pre@-',
      'control-plane@v1.31.14',
      'control-plane@v1.32.13',
      'control-plane@v1.33.0',
      'workers@v1.33.0',
      'post@v1.33.0',
    ]);
    // Kubernetes Events on the Cluster: started, each step waiting and opened, completed; in order, each once.
    const events = h.activities.calls.events;
    expect(events[0]).toMatchObject({
      reason: 'UpgradeStarted',
      type: 'Normal',
      message: `upgrade to ${TARGET} started`,
    });
    // Done, as the last step opens its gate.
    expect(events.slice(-2).map((e) => [e.reason, e.message])).toEqual([
      ['UpgradeCompleted', `upgraded to ${TARGET}`],
      ['UpgradeStepOpened', `AfterClusterUpgrade ${TARGET}: done`],
    ]);
    expect(new Set(events.map((e) => e.key)).size).toBe(events.length);
    expect(events.every((e) => e.cluster.name === 'prod-1' && e.type === 'Normal')).toBe(true);
    const opened = events.filter((e) => e.reason === 'UpgradeStepOpened').map((e) => e.message);
    for (const gate of [
      'BeforeClusterUpgrade v1.33.0',
      ...CP_PLAN.map((v) => `AfterControlPlaneUpgrade ${v}`),
      'AfterWorkersUpgrade v1.33.0',
      'AfterClusterUpgrade v1.33.0',
    ])
      expect(opened.filter((m) => m.startsWith(`${gate}:`))).toHaveLength(1);
    expect(events.filter((e) => e.reason === 'UpgradeStepWaiting').map((e) => e.message)).toContain(
      'BeforeClusterUpgrade v1.33.0: running the pre-upgrade health check',
    );
    // Once done, CAPI's later calls still read "done" from the closed workflow.
    expect(await h.call('AfterClusterUpgrade', { kubernetesVersion: TARGET })).toMatchObject({
      status: 'Success',
      retryAfterSeconds: 0,
    });
    const desc = await handle().describe();
    expect(desc.searchAttributes).toMatchObject({
      CapiUpgradePhase: ['Upgraded'],
      CapiClusterName: ['prod-1'],
      CapiTargetVersion: [TARGET],
    });
  });

  it('answers 100 repeated polls without adding a single history event', async () => {
    expect(await h.pollUntilDone('BeforeClusterUpgrade', beforeClusterUpgrade())).toMatchObject({
      retryAfterSeconds: 0,
    });
    const before = await settledHistory(h.client, h.workflowId);
    for (let i = 0; i < 100; i++) {
      expect(await h.call('BeforeClusterUpgrade', beforeClusterUpgrade())).toMatchObject({
        status: 'Success',
        retryAfterSeconds: 0,
      });
    }
    const after = (await handle().fetchHistory()).events?.length;
    expect(after).toBe(before);
  });

  it('serves concurrent polls of a waiting gate from one read, and starts a new upgrade in one round trip', async () => {
    const at = new Date(Date.now() + 3_600_000).toISOString().replace(/\.\d+Z$/, 'Z');
    const annotations = { 'upgrades.capi-orchestrator.io/upgrade-at': at };
    const waiting = `BeforeClusterUpgrade ${TARGET}: waiting for upgradeAt ${new Date(at).toISOString()}`;
    await waitFor(
      () => h.call('BeforeClusterUpgrade', beforeClusterUpgrade(), { annotations }),
      (a) => a.message === waiting,
    );
    const before = await settledHistory(h.client, h.workflowId);
    // 50 at once: one read between them. Then 50 more in a row: a kept answer is read again
    // at most once per maxStaleMs (1.5 s), however slow the machine makes those 50 calls.
    const readsOf = (s: typeof h.views.stats) => s.describes + s.lists;
    const reads = { ...h.views.stats };
    const burstStarted = Date.now();
    const answers = await Promise.all(
      Array.from({ length: 50 }, () => h.call('BeforeClusterUpgrade', beforeClusterUpgrade(), { annotations })),
    );
    const burstReads = 1 + Math.floor((Date.now() - burstStarted) / 1_500);
    expect(readsOf(h.views.stats) - readsOf(reads)).toBeLessThanOrEqual(burstReads);
    // Answered from what is kept (a waiting gate: also once older than maxStaleMs, read again behind).
    const kept = (st: typeof h.views.stats) => st.hits + st.keptAnswers + st.joined;
    expect(kept(h.views.stats) - kept(reads)).toBeGreaterThanOrEqual(50 - burstReads);
    const inRow = { ...h.views.stats };
    const rowStarted = Date.now();
    for (let i = 0; i < 50; i++)
      answers.push(await h.call('BeforeClusterUpgrade', beforeClusterUpgrade(), { annotations }));
    const rereads = 1 + Math.floor((Date.now() - rowStarted) / 1_500);
    for (const a of answers) expect(a).toMatchObject({ status: 'Success', message: waiting });
    expect(readsOf(h.views.stats) - readsOf(inRow)).toBeLessThanOrEqual(rereads);
    expect(kept(h.views.stats) - kept(inRow)).toBeGreaterThanOrEqual(50 - rereads);
    expect((await handle().fetchHistory()).events?.length).toBe(before);

    // Another cluster's first call, once a List has shown it is not running: no describe, and
    // the answer names what the new run waits for first (upgradeAt, an hour ahead: the 60 s cap).
    const uid = '3f1c2f55-8d0c-4f4e-9a55-0a5b3f0c9d10';
    await new Promise((r) => setTimeout(r, 1_200));
    const describes = h.views.stats.describes;
    const first = await h.call('BeforeClusterUpgrade', beforeClusterUpgrade(), { annotations, uid });
    expect(first).toMatchObject({ status: 'Success', message: waiting, retryAfterSeconds: 60 });
    expect(h.views.stats.describes).toBe(describes);
    const other = h.client.workflow.getHandle(clusterUpgradeWorkflowId({ ...h.ref, uid }));
    expect((await other.describe()).status.name).toBe('RUNNING');
    await other.terminate('test done');
  });

  it('holds a blocked gate with a stable message that names the step', async () => {
    const at = new Date(Date.now() + 3_000).toISOString().replace(/\.\d+Z$/, 'Z');
    const annotations = { 'upgrades.capi-orchestrator.io/upgrade-at': at };
    let first = await h.call('BeforeClusterUpgrade', beforeClusterUpgrade(), { annotations });
    for (let i = 0; i < 20 && first.message?.includes('queued'); i++)
      first = await h.call('BeforeClusterUpgrade', beforeClusterUpgrade(), { annotations });
    const second = await h.call('BeforeClusterUpgrade', beforeClusterUpgrade(), { annotations });
    expect(first).toMatchObject({
      status: 'Success',
      message: `BeforeClusterUpgrade ${TARGET}: waiting for upgradeAt ${new Date(at).toISOString()}`,
    });
    expect(first.retryAfterSeconds).toBeGreaterThan(0);
    // The same message (CAPI copies it); the number is the time left, so it may count down.
    expect(second).toMatchObject({ status: first.status, message: first.message });
    expect(second.retryAfterSeconds).toBeGreaterThan(0);
    expect(second.retryAfterSeconds).toBeLessThanOrEqual(first.retryAfterSeconds);
    expect(await h.pollUntilDone('BeforeClusterUpgrade', beforeClusterUpgrade(), { annotations })).toMatchObject({
      status: 'Success',
      retryAfterSeconds: 0,
    });
  });
});
