// The removed-API gate and per-cluster gate overrides with a
// recorded reason, through the real hook server and real Temporal (activities
// stubbed; the activity itself runs against the real kube-apiserver in
// test/integration/deprecated-apis.test.ts). What CAPI sees in each case is the
// BeforeClusterUpgrade answer asserted here.
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { ApplicationFailure } from '@temporalio/common';
import type { DeprecatedApiUse } from '../../src/domain/deprecated-apis.ts';
import type { ClusterUpgradeMemo, ClusterUpgradeStatus } from '../../src/model/cluster-upgrade.ts';
import { recordHistoryIfAsked } from '../support/record-history.ts';
import { beforeClusterUpgrade, startUpgradeHarness, type UpgradeHarness } from '../support/upgrade-harness.ts';
import { waitFor } from '../support/wait.ts';

const P = 'upgrades.capi-orchestrator.io/';
const DAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];
/** A window three days from now (UTC): closed now. */
const closedWindow = () => `${DAYS[(new Date().getUTCDay() + 3) % 7] ?? 'Sun'} 02:00 1h`;

// The harness's chain is v1.30.5 → v1.31.14 → v1.32.13 → v1.33.0: flowcontrol v1beta3 (removed in 1.32) is
// reached at the v1.32 hop, not only at the target; networking v1beta1 (1.37) never.
const requested: DeprecatedApiUse[] = [
  {
    group: 'flowcontrol.apiserver.k8s.io',
    version: 'v1beta3',
    resource: 'flowschemas',
    subresource: '',
    removedRelease: '1.32',
  },
  { group: 'networking.k8s.io', version: 'v1beta1', resource: 'ipaddresses', subresource: '', removedRelease: '1.37' },
  { group: '', version: 'v1', resource: 'componentstatuses', subresource: '', removedRelease: '' },
];
const HELD =
  'removed-apis: clients of the workload cluster requested APIs the upgrade to v1.33.0 removes: ' +
  'flowcontrol.apiserver.k8s.io/v1beta3 flowschemas (removed in 1.32, reached at v1.32.13)';

describe('removed-API gate and gate overrides', () => {
  let h: UpgradeHarness;
  beforeEach(async () => {
    h = await startUpgradeHarness();
    h.activities.deprecatedApis = () => ({ uses: requested, malformed: 0, dropped: 0 });
    await h.startWorker();
  });
  afterEach(async () => h.close());

  const status = async () => (await h.client.workflow.getHandle(h.workflowId).query('status')) as ClusterUpgradeStatus;
  const memo = async () =>
    (await h.client.workflow.getHandle(h.workflowId).describe()).memo?.upgrade as ClusterUpgradeMemo;

  it('policy fail: BeforeClusterUpgrade answers Failure naming the API and the hop that removes it', async () => {
    const answer = await h.pollUntilDone('BeforeClusterUpgrade', beforeClusterUpgrade(), {
      annotations: { [`${P}removed-api-policy`]: 'fail' },
    });
    expect(answer).toMatchObject({
      status: 'Failure',
      message: `upgrade to v1.33.0 failed at BeforeClusterUpgrade v1.33.0: ${HELD}; fix the cause, then signal "retry" to run the step again`,
    });
    const s = await status();
    expect(s.removedApis).toEqual({ policy: 'fail', result: 'held', message: HELD });
    expect(s.conditions).toContainEqual(
      expect.objectContaining({ type: 'RemovedApis', status: 'False', reason: 'RemovedApisRequested' }),
    );
    expect(h.activities.calls.deprecatedApis).toBe(1);
  });

  it('policy warn (the default): goes on, with a Warning Event and the verdict in the status', async () => {
    const answer = await h.pollUntilDone('BeforeClusterUpgrade', beforeClusterUpgrade());
    expect(answer).toMatchObject({ status: 'Success', retryAfterSeconds: 0 });
    expect((await status()).removedApis).toEqual({ policy: 'warn', result: 'warned', message: HELD });
    await waitFor(
      async () => h.activities.calls.events.find((e) => e.reason === 'UpgradeGateWarning'),
      (e) => e?.message === `BeforeClusterUpgrade v1.33.0: ${HELD}` && e.type === 'Warning',
    );
  });

  it('policy off: /metrics is not read', async () => {
    const answer = await h.pollUntilDone('BeforeClusterUpgrade', beforeClusterUpgrade(), {
      annotations: { [`${P}removed-api-policy`]: 'off' },
    });
    expect(answer).toMatchObject({ status: 'Success', retryAfterSeconds: 0 });
    expect(h.activities.calls.deprecatedApis).toBe(0);
  });

  it('/metrics refused under policy fail: Failure saying why, and retry reads it again', async () => {
    h.activities.deprecatedApis = () => {
      throw ApplicationFailure.nonRetryable(
        'GET /metrics: 403 Forbidden (the workload identity may not get the nonResourceURL /metrics (config/workload grants it))',
        'WorkloadMetricsRefused',
      );
    };
    const annotations = { [`${P}removed-api-policy`]: 'fail' };
    const answer = await h.pollUntilDone('BeforeClusterUpgrade', beforeClusterUpgrade(), { annotations });
    expect(answer.status).toBe('Failure');
    expect(answer.message).toContain(
      "BeforeClusterUpgrade v1.33.0: removed-apis: could not read the workload API server's /metrics: GET /metrics: 403 Forbidden",
    );
    h.activities.deprecatedApis = () => ({ uses: [], malformed: 0, dropped: 0 });
    await h.client.workflow.getHandle(h.workflowId).signal('retry');
    // The memo says Failed until the worker has taken the signal: poll like CAPI until it opens.
    await waitFor(
      () => h.call('BeforeClusterUpgrade', beforeClusterUpgrade(), { annotations }),
      (a) => a.status === 'Success' && a.retryAfterSeconds === 0,
    );
    expect((await status()).removedApis?.result).toBe('passed');
    await recordHistoryIfAsked(h.client, h.workflowId, 'cluster-upgrade-removed-apis-unreadable-then-retried');
  });

  it('an override with a reason lets removed-apis and the maintenance window through, and records it', async () => {
    const reason = 'CVE-2026-0001 hotfix, approved in CHG-1234';
    const annotations = {
      [`${P}removed-api-policy`]: 'fail',
      [`${P}maintenance-window`]: closedWindow(),
      [`${P}override-gates`]: 'removed-apis,maintenance-window',
      [`${P}override-reason`]: reason,
    };
    // The platform grants this Cluster's namespace overrides; the records name that grant.
    const settings = { gateOverrideNamespaces: `other, ${h.ref.namespace}` };
    const answer = await h.pollUntilDone('BeforeClusterUpgrade', beforeClusterUpgrade(), { annotations, settings });
    expect(answer).toMatchObject({ status: 'Success', retryAfterSeconds: 0 });
    const s = await status();
    const by = `${P}override-gates, granted by setting gateOverrideNamespaces`;
    expect(s.removedApis).toEqual({
      policy: 'fail',
      result: 'overridden',
      message: `${HELD}; gate removed-apis overridden (${by}): ${reason}`,
    });
    expect(s.overrides?.map((o) => [o.gate, o.reason, o.grantedBy, o.step])).toEqual([
      ['maintenance-window', reason, 'setting gateOverrideNamespaces', 'BeforeClusterUpgrade v1.33.0'],
      ['removed-apis', reason, 'setting gateOverrideNamespaces', 'BeforeClusterUpgrade v1.33.0'],
    ]);
    expect((await memo()).overrides).toEqual([`maintenance-window: ${reason}`, `removed-apis: ${reason}`]);
    const overridden = await waitFor(
      async () => h.activities.calls.events.filter((e) => e.reason === 'UpgradeGateOverridden'),
      (list) => list.length === 2,
    );
    expect(overridden.map((e) => [e.type, e.message])).toEqual([
      ['Warning', `BeforeClusterUpgrade v1.33.0: gate maintenance-window overridden (${by}): ${reason}`],
      ['Warning', `BeforeClusterUpgrade v1.33.0: gate removed-apis overridden (${by}): ${reason}`],
    ]);
    await recordHistoryIfAsked(h.client, h.workflowId, 'cluster-upgrade-gates-overridden');
  });

  it('a bad override is a Failure naming the annotation, and starts nothing', async () => {
    const answer = await h.call('BeforeClusterUpgrade', beforeClusterUpgrade(), {
      annotations: { [`${P}override-gates`]: 'removed-apis' },
    });
    expect(answer).toMatchObject({
      status: 'Failure',
      message: expect.stringContaining(`annotation ${P}override-reason is required with ${P}override-gates`) as unknown,
    });
  });
});
