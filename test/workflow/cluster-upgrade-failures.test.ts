// The bad days of a cluster upgrade, through the real hook server, dev server
// and worker (activities stubbed): abort before, during and between steps,
// resume, failures and retry, closed runs, identity, policy changes while a
// gate waits, capacity reservation that never gets Ready.
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { ApplicationFailure } from '@temporalio/common';
import { Client } from '@temporalio/client';
import { bundleWorkflowCode } from '@temporalio/worker';
import { createClusterUpgradeHandlers } from '../../src/api/handlers/lifecycle/cluster-upgrades.ts';
import { requestChecksOff } from '../../src/api/handlers/request-checks.ts';
import { defaultHandlerName, HOOKS_API_VERSION } from '../../src/api/hooks/contract.ts';
import { hookPath } from '../../src/api/hooks/hook-route.ts';
import type { ClusterUpgradeStatus } from '../../src/model/cluster-upgrade.ts';
import { recordHistoryIfAsked } from '../support/record-history.ts';
import { temporalCli, temporalSignal } from '../support/temporal-cli.ts';
import {
  driveChainedUpgrade,
  hangUntilCancelled,
  healthy,
  startUpgradeHarness,
  steps,
  type HookAnswer,
  type UpgradeHarness,
} from '../support/upgrade-harness.ts';
import { callHook } from '../../support/capi-client.ts';
import { cluster } from '../../support/capi-fixtures.ts';
import { startTestHookServer } from '../support/hook-server.ts';
import { createTestWorker, testClient } from '../support/temporal.ts';
import { settledHistory, waitFor } from '../support/wait.ts';

const noop = (): void => {};
const quietLogger = { trace: noop, debug: noop, info: noop, warn: noop, error: console.error, log: noop };

const FROM = 'v1.30.5';
const TARGET = 'v1.33.0';
const PLAN = steps('v1.31.14', 'v1.32.13', TARGET);
const bcu = () => ({
  fromKubernetesVersion: FROM,
  toKubernetesVersion: TARGET,
  controlPlaneUpgrades: PLAN,
  workersUpgrades: steps(TARGET),
});
const bcpu = (from: string, to: string) => ({ fromKubernetesVersion: from, toKubernetesVersion: to });
const acpu = (version: string) => ({ kubernetesVersion: version });
const ABORTED = (reason: string) => `upgrade to ${TARGET} aborted: ${reason}; signal "resume" to continue`;
const later = (ms: number) => new Date(Date.now() + ms).toISOString().replace(/\.\d+Z$/, 'Z');

/** Every later hook of the upgrade, as CAPI would call them after the first step. */
const laterHooks: [Parameters<UpgradeHarness['call']>[0], Record<string, unknown>][] = [
  ['BeforeControlPlaneUpgrade', bcpu('v1.31.14', 'v1.32.13')],
  ['AfterControlPlaneUpgrade', acpu('v1.32.13')],
  ['BeforeWorkersUpgrade', bcpu(FROM, TARGET)],
  ['AfterWorkersUpgrade', acpu(TARGET)],
  ['AfterClusterUpgrade', acpu(TARGET)],
];

describe('cluster upgrade on a bad day', () => {
  let h: UpgradeHarness;
  const handle = () => h.client.workflow.getHandle(h.workflowId);
  const status = async () => (await handle().query('status')) as ClusterUpgradeStatus;
  const historyLength = async () => (await handle().fetchHistory()).events?.length ?? 0;
  const settledHistoryLength = () => settledHistory(h.client, h.workflowId);

  beforeEach(async () => {
    h = await startUpgradeHarness();
    await h.startWorker();
  });
  afterEach(async () => h.close());

  it('aborts a step in flight within seconds: the activity is cancelled and every hook answers Failure; resume re-runs it', async () => {
    h.activities.health = () => hangUntilCancelled();
    const waiting = await waitFor(
      () => h.call('BeforeClusterUpgrade', bcu()),
      (a) => a.message?.includes('running the pre-upgrade health check') ?? false,
    );
    expect(waiting).toMatchObject({ status: 'Success' });
    expect(waiting.retryAfterSeconds).toBeGreaterThan(0);
    await waitFor(
      async () => h.activities.calls.health.length,
      (n) => n > 0,
    );

    const sent = Date.now();
    await temporalSignal(h.workflowId, 'abort', '{"reason":"change freeze"}');
    const aborted = await waitFor(
      () => h.call('BeforeClusterUpgrade', bcu()),
      (a) => a.status === 'Failure',
      10_000,
    );
    const latencyMs = Date.now() - sent;
    expect(aborted).toMatchObject({
      statusCode: 200,
      status: 'Failure',
      message: ABORTED('change freeze'),
      retryAfterSeconds: 0,
    });
    expect(latencyMs).toBeLessThan(10_000);
    // The hung probe learnt of the cancellation through its heartbeat.
    await waitFor(
      async () => h.activities.calls.cancelled,
      (n) => n > 0,
    );
    expect(h.activities.calls.cancelled).toBe(1);
    // The abort is on the Cluster too, in CAPI's words.
    const abortEvent = await waitFor(
      async () => h.activities.calls.events.find((e) => e.reason === 'UpgradeAborted'),
      (e) => e !== undefined,
    );
    expect(abortEvent).toMatchObject({ type: 'Warning', message: ABORTED('change freeze') });
    // Once the cancellation is recorded, hooks the workflow has never seen answer the abort too,
    // and answering them adds nothing to history.
    await waitFor(
      async () => (await handle().describe()).raw.pendingActivities?.length ?? 0,
      (n) => n === 0,
    );
    const before = await settledHistoryLength();
    for (const [hook, fields] of laterHooks) {
      expect(await h.call(hook, fields)).toMatchObject({ status: 'Failure', message: ABORTED('change freeze') });
    }
    expect(await historyLength()).toBe(before);

    h.activities.health = healthy;
    await temporalSignal(h.workflowId, 'resume');
    const resumed = await waitFor(
      () => h.call('BeforeClusterUpgrade', bcu()),
      (a) => a.status === 'Success' && a.retryAfterSeconds === 0,
    );
    expect(resumed).toMatchObject({ status: 'Success', retryAfterSeconds: 0 });
    expect(h.activities.calls.health.length).toBe(2);
    expect((await status()).phase).toBe('Upgrading');
    await recordHistoryIfAsked(h.client, h.workflowId, 'cluster-upgrade-abort-mid-step-and-resume');
  });

  it('aborts between steps: the next hook answers Failure (not "queued"), and resume picks up exactly there', async () => {
    await h.pollUntilDone('BeforeClusterUpgrade', bcu());
    await h.pollUntilDone('BeforeControlPlaneUpgrade', bcpu(FROM, 'v1.31.14'));
    expect(await h.pollUntilDone('AfterControlPlaneUpgrade', acpu('v1.31.14'))).toMatchObject({
      retryAfterSeconds: 0,
    });
    await temporalSignal(h.workflowId, 'abort', '{"reason":"bad canary"}');
    const next = await waitFor(
      () => h.call('BeforeControlPlaneUpgrade', bcpu('v1.31.14', 'v1.32.13')),
      (a) => a.status === 'Failure',
      10_000,
    );
    expect(next).toMatchObject({ status: 'Failure', message: ABORTED('bad canary'), retryAfterSeconds: 0 });
    // Steps already passed answer the abort too: the whole upgrade is stopped.
    expect(await h.call('AfterControlPlaneUpgrade', acpu('v1.31.14'))).toMatchObject({ status: 'Failure' });
    expect((await status()).phase).toBe('Aborted');

    await temporalSignal(h.workflowId, 'resume');
    const resumed = await waitFor(
      () => h.call('BeforeControlPlaneUpgrade', bcpu('v1.31.14', 'v1.32.13')),
      (a) => a.status === 'Success' && a.retryAfterSeconds === 0,
    );
    expect(resumed).toMatchObject({ status: 'Success', retryAfterSeconds: 0 });
    // The step that had passed stays passed: no second control-plane check at v1.31.14.
    expect(h.activities.calls.health.filter((c) => c.version === 'v1.31.14')).toHaveLength(1);
  });

  it('aborts before the first step opens and answers every later hook with the abort', async () => {
    const annotations = { 'upgrades.capi-orchestrator.io/upgrade-at': later(3_600_000) };
    await waitFor(
      () => h.call('BeforeClusterUpgrade', bcu(), { annotations }),
      (a) => a.message?.includes('upgradeAt') ?? false,
    );
    await temporalSignal(h.workflowId, 'abort');
    const answer = await waitFor(
      () => h.call('BeforeClusterUpgrade', bcu(), { annotations }),
      (a) => a.status === 'Failure',
      10_000,
    );
    expect(answer.message).toBe(ABORTED('aborted by operator'));
    for (const [hook, fields] of laterHooks)
      expect(await h.call(hook, fields, { annotations })).toMatchObject({ status: 'Failure' });
  });

  it('never fails the run on an expected error: Failed with a stable message, and retry runs the step again', async () => {
    await h.pollUntilDone('BeforeClusterUpgrade', bcu());
    await h.pollUntilDone('BeforeControlPlaneUpgrade', bcpu(FROM, 'v1.31.14'));
    let attempts = 0;
    h.activities.health = () => {
      attempts++;
      throw ApplicationFailure.nonRetryable(
        'Kubernetes API answered HTTP 403 Forbidden: nodes is forbidden',
        'Forbidden',
      );
    };
    const annotations = { 'upgrades.capi-orchestrator.io/health-check-timeout': '3s' };
    const failed = await h.pollUntilDone('AfterControlPlaneUpgrade', acpu('v1.31.14'), { annotations });
    const message =
      `upgrade to ${TARGET} failed at AfterControlPlaneUpgrade v1.31.14: control-plane health check at v1.31.14 did not pass within 3s: ` +
      'the health check could not run: Kubernetes API answered HTTP 403 Forbidden: nodes is forbidden; ' +
      'fix the cause, then signal "retry" to run the step again';
    expect(failed).toMatchObject({ statusCode: 200, status: 'Failure', message, retryAfterSeconds: 0 });
    // Same state, same words: nothing per call in the message.
    expect(await h.call('AfterControlPlaneUpgrade', acpu('v1.31.14'), { annotations })).toEqual(failed);
    expect(await h.call('BeforeControlPlaneUpgrade', bcpu('v1.31.14', 'v1.32.13'), { annotations })).toMatchObject({
      status: 'Failure',
      message,
    });
    const desc = await handle().describe();
    expect(desc.status.name).toBe('RUNNING');
    expect(desc.searchAttributes).toMatchObject({ CapiUpgradePhase: ['Failed'] });
    expect(attempts).toBeGreaterThan(0);

    h.activities.health = healthy;
    await temporalSignal(h.workflowId, 'retry');
    const retried = await waitFor(
      () => h.call('AfterControlPlaneUpgrade', acpu('v1.31.14'), { annotations }),
      (a) => a.status === 'Success' && a.retryAfterSeconds === 0,
    );
    expect(retried).toMatchObject({ status: 'Success', retryAfterSeconds: 0 });
    expect((await status()).phase).toBe('Upgrading');
    // On the Cluster: a Warning with what CAPI is told, then the resumed upgrade.
    const reasons = h.activities.calls.events.map((e) => e.reason);
    const failedAt = reasons.indexOf('UpgradeFailed');
    expect(h.activities.calls.events[failedAt]).toMatchObject({ type: 'Warning', message });
    expect(h.activities.calls.events.slice(failedAt + 1)).toContainEqual(
      expect.objectContaining({ reason: 'UpgradeStarted', message: `upgrade to ${TARGET} resumed` }),
    );
    await recordHistoryIfAsked(h.client, h.workflowId, 'cluster-upgrade-failed-and-retried');
  });

  it('a refused workload kubeconfig (an exec plugin) shows in BeforeClusterUpgrade, then fails the upgrade naming the field', async () => {
    // What checkClusterHealth throws for a `<cluster>-kubeconfig` whose user has `exec` (test/integration/upgrade-activities.test.ts).
    const refused =
      'Secret default/c1-kubeconfig: users[0].user.exec is refused (runs a credential plugin command); ' +
      'a workload kubeconfig may hold only a server URL, CA data, client certificate/key data or a bearer token';
    h.activities.health = () => {
      throw ApplicationFailure.nonRetryable(refused, 'WorkloadKubeconfigRefused');
    };
    const annotations = { 'upgrades.capi-orchestrator.io/health-check-timeout': '3s' };
    const waiting = await waitFor(
      () => h.call('BeforeClusterUpgrade', bcu(), { annotations }),
      (a) => a.message?.includes('could not run') ?? false,
    );
    expect(waiting).toMatchObject({ status: 'Success' });
    expect(waiting.retryAfterSeconds).toBeGreaterThan(0);
    expect(waiting.message).toContain(`the health check could not run: ${refused}`);
    const failed = await h.pollUntilDone('BeforeClusterUpgrade', bcu(), { annotations });
    expect(failed).toMatchObject({ status: 'Failure', retryAfterSeconds: 0 });
    expect(failed.message).toContain(
      `pre-upgrade health check did not pass within 3s: the health check could not run: ${refused}`,
    );
    expect(failed.message).toContain('fix the cause, then signal "retry"');
  });

  it('answers the next hook of a terminated run from a fresh run that records the old one', async () => {
    await h.pollUntilDone('BeforeClusterUpgrade', bcu());
    const old = await handle().describe();
    await temporalCli(['workflow', 'terminate', '--workflow-id', h.workflowId, '--reason', 'operator cleanup']);
    const answer = await h.pollUntilDone('BeforeControlPlaneUpgrade', bcpu(FROM, 'v1.31.14'));
    expect(answer).toMatchObject({ status: 'Success', retryAfterSeconds: 0 });
    const fresh = await handle().describe();
    expect(fresh.runId).not.toBe(old.runId);
    expect(fresh.status.name).toBe('RUNNING');
    const s = await status();
    expect(s).toMatchObject({ previousRunId: old.runId, phase: 'Upgrading' });
    expect(s.conditions.find((c) => c.type === 'Scheduled')?.message).toBe(
      `picked up mid-upgrade after run ${old.runId} closed`,
    );
  });

  it('answers the next hook of a cancelled run from a fresh run too', async () => {
    await h.pollUntilDone('BeforeClusterUpgrade', bcu());
    const old = await handle().describe();
    await temporalCli(['workflow', 'cancel', '--workflow-id', h.workflowId]);
    await waitFor(
      async () => (await h.client.workflow.getHandle(h.workflowId, old.runId).describe()).status.name,
      (s) => s !== 'RUNNING',
    );
    expect((await h.client.workflow.getHandle(h.workflowId, old.runId).describe()).status.name).toBe('CANCELLED');
    const answer = await h.pollUntilDone('BeforeControlPlaneUpgrade', bcpu(FROM, 'v1.31.14'));
    expect(answer).toMatchObject({ status: 'Success', retryAfterSeconds: 0 });
    expect((await status()).previousRunId).toBe(old.runId);
  });

  it('answers the next hook of a timed-out run from a fresh run too', async () => {
    // A run that timed out before any worker took it (as with a run timeout set by hand).
    await h.stopWorker();
    const call = {
      hook: 'BeforeClusterUpgrade' as const,
      version: TARGET,
      targetVersion: TARGET,
      policy: {
        capacityReservation: 0,
        criticalNamespaces: ['kube-system'],
        blockingPdbPolicy: 'warn' as const,
        healthCheckTimeoutMs: 60_000,
      },
    };
    const old = await h.client.workflow.start('clusterUpgradeWorkflow', {
      workflowId: h.workflowId,
      taskQueue: h.taskQueue,
      args: [{ cluster: h.ref, firstCall: call }],
      workflowRunTimeout: '1s',
    });
    await waitFor(
      async () => (await old.describe()).status.name,
      (s) => s === 'TIMED_OUT',
    );
    await h.startWorker();
    const answer = await h.pollUntilDone('BeforeClusterUpgrade', bcu());
    expect(answer).toMatchObject({ status: 'Success', retryAfterSeconds: 0 });
    expect((await status()).previousRunId).toBe(old.firstExecutionRunId);
  });

  it('surfaces a workflow-task failure (a bug) as Failure naming the run (within the re-describe interval of kept answers), and recovers once fixed', async () => {
    await h.stopWorker();
    const bundle = await bundleWorkflowCode({
      workflowsPath: new URL('../support/broken-workflows.ts', import.meta.url).pathname,
      logger: quietLogger,
    });
    const broken = await createTestWorker({ taskQueue: h.taskQueue, workflowBundle: { code: bundle.code } });
    const running = broken.worker.run();
    try {
      const answer = await waitFor(
        () => h.call('BeforeClusterUpgrade', bcu()),
        (a) => a.status === 'Failure',
      );
      const { runId } = await handle().describe();
      expect(answer).toMatchObject({
        status: 'Failure',
        message: `internal error in workflow ${h.workflowId}, see run ${runId}`,
        retryAfterSeconds: 0,
      });
    } finally {
      broken.worker.shutdown();
      await running;
      await broken.connection.close();
    }
    // The fixed code (the real worker) picks the same run up again.
    const { runId } = await handle().describe();
    await h.startWorker();
    const recovered = await waitFor(
      () => h.call('BeforeClusterUpgrade', bcu()),
      (a) => a.status === 'Success' && a.retryAfterSeconds === 0,
      60_000,
    );
    expect(recovered).toMatchObject({ status: 'Success', retryAfterSeconds: 0 });
    expect((await handle().describe()).runId).toBe(runId);
  });

  it('refuses a cluster without a uid with 400 naming the field, before any Temporal call', async () => {
    const answer = await h.call('BeforeClusterUpgrade', bcu(), { uid: '' });
    expect(answer.statusCode).toBe(400);
    await expect(handle().describe()).rejects.toThrow();
  });

  it('keys the upgrade by the cluster uid: a recreated cluster is not answered from the old one', async () => {
    await driveChainedUpgrade(h);
    // Closed (its last Events recorded): later calls read "completed" from the closed run, once the answer
    // kept from the running one (its gate Open: Success too) is past its 1.5 s.
    await handle().result();
    const completed = await waitFor(
      () => h.call('AfterClusterUpgrade', acpu(TARGET)),
      (a) => a.message === `upgrade to ${TARGET} completed`,
      2_500,
    );
    expect(completed).toMatchObject({ status: 'Success', message: `upgrade to ${TARGET} completed` });
    const recreated = { uid: '00000000-0000-4000-8000-00000000beef' };
    const first = await h.call('BeforeClusterUpgrade', bcu(), recreated);
    expect(first.message).not.toBe(`upgrade to ${TARGET} completed`);
    expect(first).toMatchObject({ status: 'Success' });
    // Visibility is eventually consistent: the new run may take a moment to be listed.
    const listIds = async () => {
      const ids: string[] = [];
      for await (const wf of h.client.workflow.list({
        query: `CapiClusterNamespace = "${h.ref.namespace}" AND WorkflowType = "clusterUpgradeWorkflow"`,
      }))
        ids.push(wf.workflowId);
      return ids.sort();
    };
    const ids = await waitFor(listIds, (x) => x.length >= 2, 10_000);
    expect(ids).toEqual([h.workflowId, `cluster-upgrade/${h.ref.namespace}/${h.ref.name}/${recreated.uid}`].sort());
  });

  it('applies a changed upgrade-at while the gate waits, within one poll, and polls add no history', async () => {
    const far = { 'upgrades.capi-orchestrator.io/upgrade-at': later(3_600_000) };
    const waiting = await waitFor(
      () => h.call('BeforeClusterUpgrade', bcu(), { annotations: far }),
      (a) => a.message?.includes('upgradeAt') ?? false,
    );
    expect(waiting.status).toBe('Success');
    const before = await settledHistoryLength();
    for (let i = 0; i < 20; i++) await h.call('BeforeClusterUpgrade', bcu(), { annotations: far });
    expect(await historyLength()).toBe(before);

    const soon = { 'upgrades.capi-orchestrator.io/upgrade-at': later(-60_000) };
    // The poll that brings the change signals it; the gate opens without any new hook.
    await h.call('BeforeClusterUpgrade', bcu(), { annotations: soon });
    const opened = await waitFor(
      () => h.call('BeforeClusterUpgrade', bcu(), { annotations: soon }),
      (a: HookAnswer) => a.retryAfterSeconds === 0,
      10_000,
    );
    expect(opened).toMatchObject({ status: 'Success', retryAfterSeconds: 0 });
    const s = await status();
    expect(s.policy.upgradeAtMs).toBeLessThan(Date.now());
    expect(s.policyChanges?.length).toBe(1);
    // Unchanged policy again: no further signal.
    const settled = await historyLength();
    for (let i = 0; i < 10; i++) await h.call('BeforeClusterUpgrade', bcu(), { annotations: soon });
    expect(await historyLength()).toBe(settled);
    await recordHistoryIfAsked(h.client, h.workflowId, 'cluster-upgrade-policy-changed-while-waiting');
  });

  it('waits for reserved capacity to be Ready, fails naming the MachineDeployment, and scales back at once', async () => {
    const annotations = {
      'upgrades.capi-orchestrator.io/capacity-reservation': '1',
      'upgrades.capi-orchestrator.io/capacity-ready-timeout': '3s',
    };
    h.activities.capacity = () => ({
      ready: false,
      pending: ['MachineDeployment prod-1-md-0-abcde: 2 of 3 machines Ready'],
    });
    await h.pollUntilDone('BeforeClusterUpgrade', bcu(), { annotations });
    const failed = await h.pollUntilDone('BeforeWorkersUpgrade', bcpu(FROM, TARGET), { annotations });
    expect(failed).toMatchObject({
      status: 'Failure',
      message:
        `upgrade to ${TARGET} failed at BeforeWorkersUpgrade ${TARGET}: the extra machines were not Ready within 3s: ` +
        'MachineDeployment prod-1-md-0-abcde: 2 of 3 machines Ready; fix the cause, then signal "retry" to run the step again',
    });
    await waitFor(
      async () => h.activities.calls.release,
      (n) => n > 0,
    );
    expect(h.activities.calls).toMatchObject({ reserve: 1, release: 1 });
    expect((await status()).reservedCapacity).toEqual([]);

    // Retry once the machines come up: reserved again, Ready, and released exactly once at the end.
    h.activities.capacity = () => ({ ready: true, pending: [] });
    await temporalSignal(h.workflowId, 'retry');
    const retried = await waitFor(
      () => h.call('BeforeWorkersUpgrade', bcpu(FROM, TARGET), { annotations }),
      (a) => a.status === 'Success' && a.retryAfterSeconds === 0,
    );
    expect(retried).toMatchObject({ status: 'Success', retryAfterSeconds: 0 });
    await h.pollUntilDone('AfterWorkersUpgrade', acpu(TARGET), { annotations });
    await h.pollUntilDone('AfterClusterUpgrade', acpu(TARGET), { annotations });
    expect(h.activities.calls).toMatchObject({ reserve: 2, release: 2 });
    await recordHistoryIfAsked(h.client, h.workflowId, 'cluster-upgrade-capacity-not-ready-then-retried');
  });

  it('scales reserved capacity back when aborted while waiting for it', async () => {
    const annotations = { 'upgrades.capi-orchestrator.io/capacity-reservation': '1' };
    h.activities.capacity = () => ({ ready: false, pending: ['MachineDeployment md-0: 2 of 3 machines Ready'] });
    await h.pollUntilDone('BeforeClusterUpgrade', bcu(), { annotations });
    await waitFor(
      () => h.call('BeforeWorkersUpgrade', bcpu(FROM, TARGET), { annotations }),
      (a) => a.message?.includes('waiting for the extra machines') ?? false,
    );
    await temporalSignal(h.workflowId, 'abort', '{"reason":"capacity"}');
    await waitFor(
      async () => h.activities.calls.release,
      (n) => n > 0,
      10_000,
    );
    expect(h.activities.calls).toMatchObject({ reserve: 1, release: 1 });
    // Answers may be kept up to ~1.5 s (an answer is never more than 2 s stale): the abort shows within that.
    const aborted = await waitFor(
      () => h.call('BeforeWorkersUpgrade', bcpu(FROM, TARGET), { annotations }),
      (a) => a.status === 'Failure',
      2_500,
    );
    expect(aborted).toMatchObject({ status: 'Failure', message: ABORTED('capacity') });
  });
});

describe('Temporal refusing a call', () => {
  it('answers Failure naming the refusal when the namespace does not exist, instead of "retry later" forever', async () => {
    const { client, close } = await testClient();
    const wrong = new Client({ connection: client.connection, namespace: 'no-such-namespace' });
    const hooks = await startTestHookServer({
      lifecycle: createClusterUpgradeHandlers({ client: wrong, taskQueue: 'unused', checks: requestChecksOff }),
    });
    try {
      const c = cluster('prod-1', 'fleet-a', TARGET);
      const res = await callHook<HookAnswer>(
        hooks.url,
        hookPath('BeforeClusterUpgrade', defaultHandlerName('BeforeClusterUpgrade')),
        { apiVersion: HOOKS_API_VERSION, kind: 'BeforeClusterUpgradeRequest', cluster: c, ...bcu() },
        { ca: hooks.ca.certPem, timeout: '10s' },
      );
      expect(res.body).toMatchObject({ status: 'Failure', retryAfterSeconds: 0 });
      expect(res.body.message).toMatch(/^the workflow service refused the call \(NOT_FOUND\): .*no-such-namespace/);
      expect(res.body.message).toMatch(/check the extension's Temporal settings$/);
    } finally {
      await hooks.close();
      await close();
    }
  });
});
