// Operating an upgrade: abort and resume from the real CLI, supersede,
// cluster deletion, outages of the worker, schedule policies.
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { UNAVAILABLE_MESSAGE } from '../../src/api/hooks/hook-route.ts';
import type { ClusterUpgradeStatus } from '../../src/model/cluster-upgrade.ts';
import { recordHistoryIfAsked } from '../support/record-history.ts';
import { temporalSignal } from '../support/temporal-cli.ts';
import { waitFor } from '../support/wait.ts';
import { driveChainedUpgrade, startUpgradeHarness, steps, type UpgradeHarness } from '../support/upgrade-harness.ts';

const TARGET = 'v1.33.0';
const bcu = (to = TARGET) => ({
  fromKubernetesVersion: 'v1.30.5',
  toKubernetesVersion: to,
  controlPlaneUpgrades: steps('v1.31.14', 'v1.32.13', to),
  workersUpgrades: steps(to),
});
const later = (ms: number) => new Date(Date.now() + ms).toISOString().replace(/\.\d+Z$/, 'Z');

describe('operating a cluster upgrade', () => {
  let h: UpgradeHarness;
  const wfId = () => h.workflowId;
  beforeEach(async () => {
    h = await startUpgradeHarness();
    await h.startWorker();
  });
  afterEach(async () => h.close());

  it('aborts from the temporal CLI, answers Failure with the reason, and resumes', async () => {
    const annotations = { 'upgrades.capi-orchestrator.io/upgrade-at': later(3_600_000) };
    const waiting = await waitFor(
      () => h.call('BeforeClusterUpgrade', bcu(), { annotations }),
      (a) => a.message?.includes('upgradeAt') ?? false,
    );
    expect(waiting.retryAfterSeconds).toBeGreaterThan(0);
    await temporalSignal(wfId(), 'abort', '{"reason":"change freeze"}');
    const aborted = await waitFor(
      () => h.call('BeforeClusterUpgrade', bcu(), { annotations }),
      (a) => a.status === 'Failure',
    );
    expect(aborted).toMatchObject({
      status: 'Failure',
      message: `upgrade to ${TARGET} aborted: change freeze; signal "resume" to continue`,
      retryAfterSeconds: 0,
    });
    const status = (await h.client.workflow.getHandle(wfId()).query('status')) as ClusterUpgradeStatus;
    expect(status).toMatchObject({ phase: 'Aborted', reason: 'change freeze' });
    await temporalSignal(wfId(), 'resume');
    const resumed = await waitFor(
      () => h.call('BeforeClusterUpgrade', bcu(), { annotations }),
      (a) => a.message?.includes('upgradeAt') ?? false,
    );
    expect(resumed).toEqual(waiting);
    await recordHistoryIfAsked(h.client, wfId(), 'cluster-upgrade-abort-and-resume');
  });

  it('supersedes a running upgrade when BeforeClusterUpgrade names a new target', async () => {
    const annotations = { 'upgrades.capi-orchestrator.io/upgrade-at': later(3_600_000) };
    await waitFor(
      () => h.call('BeforeClusterUpgrade', bcu('v1.32.13'), { annotations, topologyVersion: 'v1.32.13' }),
      (a) => a.message?.includes('upgradeAt') ?? false,
    );
    const firstRun = await h.client.workflow.getHandle(wfId()).describe();
    const answer = await h.pollUntilDone('BeforeClusterUpgrade', bcu(), {});
    expect(answer).toMatchObject({ status: 'Success', retryAfterSeconds: 0 });
    const old = (await h.client.workflow.getHandle(wfId(), firstRun.runId).query('status')) as ClusterUpgradeStatus;
    expect(old).toMatchObject({
      phase: 'Aborted',
      reason: `superseded by an upgrade to ${TARGET}`,
      targetVersion: 'v1.32.13',
    });
    const current = (await h.client.workflow.getHandle(wfId()).query('status')) as ClusterUpgradeStatus;
    expect(current.targetVersion).toBe(TARGET);
    await recordHistoryIfAsked(h.client, wfId(), 'cluster-upgrade-superseded', firstRun.runId);
  });

  it('answers a repeat of the superseding call "waiting", not the old run\'s abort, while the old run winds down', async () => {
    const annotations = { 'upgrades.capi-orchestrator.io/upgrade-at': later(3_600_000) };
    await waitFor(
      () => h.call('BeforeClusterUpgrade', bcu('v1.32.13'), { annotations, topologyVersion: 'v1.32.13' }),
      (a) => a.message?.includes('upgradeAt') ?? false,
    );
    // The old run records its abort (an activity) before it continues as new: a window CAPI's retry can hit.
    let release!: () => void;
    const recording = new Promise<void>((r) => (release = r));
    let aborting = false;
    h.activities.event = async (e) => {
      if (e.reason !== 'UpgradeAborted') return;
      aborting = true;
      await recording;
    };
    const first = await h.call('BeforeClusterUpgrade', bcu(), {});
    expect(first).toMatchObject({ status: 'Success' });
    await waitFor(
      async () => aborting,
      (a) => a,
    );
    const repeat = await h.call('BeforeClusterUpgrade', bcu(), {});
    release();
    expect(repeat.status).toBe('Success');
    expect(repeat.retryAfterSeconds).toBeGreaterThan(0);
    expect(await h.pollUntilDone('BeforeClusterUpgrade', bcu(), {})).toMatchObject({
      status: 'Success',
      retryAfterSeconds: 0,
    });
  });

  it('lets BeforeClusterDelete wait until the running upgrade has wound down, releasing reserved capacity', async () => {
    const annotations = { 'upgrades.capi-orchestrator.io/capacity-reservation': 'true' };
    await h.pollUntilDone('BeforeClusterUpgrade', bcu(), { annotations });
    await h.pollUntilDone(
      'BeforeWorkersUpgrade',
      { fromKubernetesVersion: 'v1.30.5', toKubernetesVersion: 'v1.31.14', workersUpgrades: steps(TARGET) },
      { annotations },
    );
    expect(h.activities.calls.reserve).toBe(1);
    const first = await h.call('BeforeClusterDelete', {});
    expect(
      first.retryAfterSeconds === 0 ||
        first.message === `waiting for 1 workflow(s) of this cluster to wind down: ${wfId()}`,
    ).toBe(true);
    const done = await h.pollUntilDone('BeforeClusterDelete', {});
    expect(done).toMatchObject({ status: 'Success', retryAfterSeconds: 0 });
    const result = (await h.client.workflow.getHandle(wfId()).result()) as ClusterUpgradeStatus;
    expect(result).toMatchObject({ phase: 'Aborted', reason: 'cluster is being deleted', reservedCapacity: [] });
    expect(h.activities.calls.release).toBe(1);
    await recordHistoryIfAsked(h.client, wfId(), 'cluster-upgrade-deleted-during-upgrade');
  });

  it('keeps answering (blocking) while no worker runs, and never opens a gate on stale state', async () => {
    expect(await h.pollUntilDone('BeforeClusterUpgrade', bcu())).toMatchObject({ retryAfterSeconds: 0 });
    await h.stopWorker();
    // Known state: answered from the memo alone.
    expect(await h.call('BeforeClusterUpgrade', bcu(), { timeout: '2s' })).toMatchObject({
      status: 'Success',
      retryAfterSeconds: 0,
    });
    // New information needs the worker: hold CAPI back, within the deadline.
    const started = Date.now();
    const blocked = await h.call(
      'BeforeControlPlaneUpgrade',
      { fromKubernetesVersion: 'v1.30.5', toKubernetesVersion: 'v1.31.14' },
      { timeout: '2s' },
    );
    // The answer is the deadline's (UNAVAILABLE_MESSAGE), not the workflow's: without a deadline the call
    // would wait for a worker that never comes. The bound only says "not a hang": a loaded machine can
    // lag the answer past 2 s by its event loop alone.
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(blocked).toMatchObject({
      statusCode: 200,
      status: 'Success',
      message: UNAVAILABLE_MESSAGE,
      retryAfterSeconds: 15,
    });
    await h.startWorker();
    expect(
      await h.pollUntilDone('BeforeControlPlaneUpgrade', {
        fromKubernetesVersion: 'v1.30.5',
        toKubernetesVersion: 'v1.31.14',
      }),
    ).toMatchObject({ retryAfterSeconds: 0 });
  });

  it('fails with a clear reason when it cannot commence within commenceWithin of upgradeAt', async () => {
    const annotations = {
      'upgrades.capi-orchestrator.io/upgrade-at': new Date(Date.now() - 600_000).toISOString(),
      'upgrades.capi-orchestrator.io/commence-within': '5m',
    };
    const answer = await h.pollUntilDone('BeforeClusterUpgrade', bcu(), { annotations });
    expect(answer.status).toBe('Failure');
    expect(answer.message).toMatch(
      /^upgrade to v1\.33\.0 failed at BeforeClusterUpgrade v1\.33\.0: the upgrade could not start within 5m of \d{4}-\d\d-\d\dT.*; fix the cause, then signal "retry" to run the step again$/,
    );
  });

  it('blocks while the maintenance window is closed', async () => {
    const now = new Date();
    const other = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'][(now.getUTCDay() + 3) % 7];
    const annotations = { 'upgrades.capi-orchestrator.io/maintenance-window': `${other} 02:00 1h` };
    const answer = await waitFor(
      () => h.call('BeforeClusterUpgrade', bcu(), { annotations }),
      (a) => a.message?.includes('maintenance window') ?? false,
    );
    expect(answer.status).toBe('Success');
    expect(answer.retryAfterSeconds).toBeGreaterThan(0);
    expect(answer.message).toContain(`waiting for the maintenance window "${other} 02:00 1h"`);
  });

  it('answers a bad policy annotation with Failure naming it, without starting anything', async () => {
    const answer = await h.call('BeforeClusterUpgrade', bcu(), {
      annotations: { 'upgrades.capi-orchestrator.io/upgrade-at': 'tomorrow' },
    });
    expect(answer).toMatchObject({ status: 'Failure', retryAfterSeconds: 0 });
    expect(answer.message).toBe(
      'annotation upgrades.capi-orchestrator.io/upgrade-at="tomorrow": not an RFC 3339 time such as 2026-12-01T02:00:00Z',
    );
    await expect(h.client.workflow.getHandle(wfId()).describe()).rejects.toThrow();
  });

  it('records BeforeClusterCreate and AfterControlPlaneInitialized in the cluster history without holding it back', async () => {
    expect(await h.call('BeforeClusterCreate', {})).toMatchObject({ status: 'Success', retryAfterSeconds: 0 });
    expect(await h.call('AfterControlPlaneInitialized', {})).toMatchObject({ status: 'Success' });
    // Repeated calls record nothing new.
    expect(await h.call('BeforeClusterCreate', {})).toMatchObject({ status: 'Success', retryAfterSeconds: 0 });
    const query = `CapiClusterNamespace = "${h.ref.namespace}" AND CapiClusterName = "${h.ref.name}" AND WorkflowType = "clusterEventWorkflow"`;
    const ids = await waitFor(
      async () => {
        const found: string[] = [];
        for await (const wf of h.client.workflow.list({ query })) found.push(wf.workflowId);
        return found.sort();
      },
      (found) => found.length === 2,
    );
    expect(ids.map((id) => id.split('/').slice(0, 4).join('/'))).toEqual([
      `cluster-event/${h.ref.namespace}/${h.ref.name}/AfterControlPlaneInitialized`,
      `cluster-event/${h.ref.namespace}/${h.ref.name}/BeforeClusterCreate`,
    ]);
  });

  it('finishes with the same result after the worker is replaced mid-upgrade', async () => {
    await h.pollUntilDone('BeforeClusterUpgrade', bcu());
    await h.pollUntilDone('BeforeControlPlaneUpgrade', {
      fromKubernetesVersion: 'v1.30.5',
      toKubernetesVersion: 'v1.31.14',
    });
    await h.stopWorker();
    await h.startWorker();
    await driveChainedUpgrade(h);
    const result = (await h.client.workflow.getHandle(wfId()).result()) as ClusterUpgradeStatus;
    expect(result.phase).toBe('Upgraded');
    expect(result.history.map((e) => e.version)).toEqual(['v1.31.14', 'v1.32.13', 'v1.33.0']);
  });
});
