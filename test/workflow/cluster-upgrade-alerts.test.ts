// The alert gate and silences in the cluster upgrade, through the real
// hook server and real Temporal with the alert activities stubbed: the gate holds (not fails)
// naming itself, in the status query, an Event and the CLI; it lets go when the alerts resolve
// or the gate is taken off; an unreachable source holds, then fails at the hold timeout; a
// silence covers each control-plane and workers step and is expired at its end and on abort.
// The activities against a real Prometheus and Alertmanager: test/integration/alert-gate.test.ts.
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import type { AlertReport } from '../../src/model/alerts.ts';
import { capiUpgrades } from '../support/cli.ts';
import { recordHistoryIfAsked } from '../support/record-history.ts';
import { temporalSignal } from '../support/temporal-cli.ts';
import { waitFor } from '../support/wait.ts';
import {
  beforeClusterUpgrade,
  driveChainedUpgrade,
  startUpgradeHarness,
  steps,
  type UpgradeHarness,
} from '../support/upgrade-harness.ts';

const P = 'upgrades.capi-orchestrator.io/';
const PROM = { [`${P}alert-prometheus-url`]: 'http://prometheus.monitoring:9090' };
// The platform allows these two; an annotation may name no other URL.
const settings = {
  alertAllowedUrls: 'http://prometheus.monitoring:9090, http://alertmanager.monitoring:9093',
  // Clusters of every namespace may override gates (the override test below).
  gateOverrideNamespaces: '*',
};
const HELD = 'upgrade to v1.33.0 held: alert KubeNodeNotReady firing in prometheus (gate alerts)';
const firing: AlertReport = { reachable: true, firing: ['KubeNodeNotReady'], firingCount: 1 };
const quiet: AlertReport = { reachable: true, firing: [], firingCount: 0 };

describe('alert gate of a cluster upgrade', () => {
  let h: UpgradeHarness;
  beforeEach(async () => {
    h = await startUpgradeHarness({ settings });
    await h.startWorker();
  });
  afterEach(async () => h.close());

  it('holds a step while alerts fire, naming the gate (message, status, Event, CLI), and lets go once they resolve', async () => {
    let report = firing;
    h.activities.alerts = () => report;
    const held = await waitFor(
      () => h.call('BeforeClusterUpgrade', beforeClusterUpgrade(), { annotations: PROM }),
      (a) => a.message?.includes('held') ?? false,
    );
    expect(held).toMatchObject({ status: 'Success', message: `BeforeClusterUpgrade v1.33.0: ${HELD}` });
    expect(held.retryAfterSeconds).toBeGreaterThan(0);
    const s = await h.status();
    expect(s.alerts?.held).toMatchObject({
      step: 'BeforeClusterUpgrade v1.33.0',
      message: HELD,
      firing: ['KubeNodeNotReady'],
    });
    // Held, not failed: the pre-upgrade health check passed and the phase is Upgrading.
    expect(s.phase).toBe('Upgrading');
    const events = await waitFor(
      async () => h.activities.calls.events.filter((e) => e.reason === 'UpgradeHeldByAlerts'),
      (e) => e.length > 0,
    );
    expect(events[0]).toMatchObject({ type: 'Warning', message: HELD });
    const shown = (await capiUpgrades(['status', `${h.ref.namespace}/${h.ref.name}`])).stdout;
    expect(shown).toContain(
      `held by:   alerts at BeforeClusterUpgrade v1.33.0 since ${s.alerts?.held?.since}: ${HELD}`,
    );
    await recordHistoryIfAsked(h.client, h.workflowId, 'cluster-upgrade-alert-held');

    report = quiet;
    expect(await h.pollUntilDone('BeforeClusterUpgrade', beforeClusterUpgrade(), { annotations: PROM })).toMatchObject({
      status: 'Success',
      retryAfterSeconds: 0,
      message: 'BeforeClusterUpgrade v1.33.0: done',
    });
    expect((await h.status()).alerts).toBeUndefined();
    // One Event for the one message: the checks while it held added none.
    expect(h.activities.calls.events.filter((e) => e.reason === 'UpgradeHeldByAlerts')).toHaveLength(1);
  });

  it('holds while Prometheus is unreachable, then fails at the hold timeout; retry runs the step again', async () => {
    let report: AlertReport = { reachable: false, cause: 'connection refused' };
    h.activities.alerts = () => report;
    const annotations = { ...PROM, [`${P}alert-hold-timeout`]: '5s' };
    const held = await waitFor(
      () => h.call('BeforeClusterUpgrade', beforeClusterUpgrade(), { annotations }),
      (a) => a.message?.includes('unreachable') ?? false,
    );
    expect(held).toMatchObject({
      status: 'Success',
      message:
        'BeforeClusterUpgrade v1.33.0: upgrade to v1.33.0 held: the alert source prometheus is unreachable: connection refused (gate alerts)',
    });
    const failed = await waitFor(
      () => h.call('BeforeClusterUpgrade', beforeClusterUpgrade(), { annotations }),
      (a) => a.status === 'Failure',
    );
    expect(failed.message).toBe(
      'upgrade to v1.33.0 failed at BeforeClusterUpgrade v1.33.0: the alert source prometheus was unreachable for 5s: connection refused (gate alerts); fix the cause, then signal "retry" to run the step again',
    );
    expect((await h.status()).alerts).toBeUndefined();
    report = quiet;
    await temporalSignal(h.workflowId, 'retry');
    // The answers say Failure until the worker has taken the retry in.
    const done = await waitFor(
      () => h.call('BeforeClusterUpgrade', beforeClusterUpgrade(), { annotations }),
      (a) => a.status === 'Success' && a.retryAfterSeconds === 0,
      60_000,
    );
    expect(done.message).toBe('BeforeClusterUpgrade v1.33.0: done');
  });

  it('answers Failure naming the annotation when it names a URL the ExtensionConfig does not allow, and reads no URL', async () => {
    h.activities.alerts = () => firing;
    const url = 'http://169.254.169.254/latest/meta-data';
    const annotations = { [`${P}alert-prometheus-url`]: url };
    const answer = await h.call('BeforeClusterUpgrade', beforeClusterUpgrade(), { annotations });
    expect(answer).toMatchObject({ status: 'Failure', statusCode: 200 });
    expect(answer.message).toContain(
      `annotation ${P}alert-prometheus-url=${JSON.stringify(url)}: an annotation may only name a URL the ExtensionConfig allows`,
    );
    // The same again: a stable message, and the gate never asked anything of any URL.
    expect((await h.call('BeforeClusterUpgrade', beforeClusterUpgrade(), { annotations })).message).toBe(
      answer.message,
    );
    expect(h.activities.calls.alertChecks).toBe(0);
  });

  it('lets a held step go when the gate is taken off the cluster (the annotation removed)', async () => {
    h.activities.alerts = () => firing;
    await waitFor(
      () => h.call('BeforeClusterUpgrade', beforeClusterUpgrade(), { annotations: PROM }),
      (a) => a.message?.includes('held') ?? false,
    );
    expect(await h.pollUntilDone('BeforeClusterUpgrade', beforeClusterUpgrade())).toMatchObject({
      status: 'Success',
      retryAfterSeconds: 0,
    });
  });

  it('lets a held step go when the alerts gate is overridden with a reason, and records the override', async () => {
    h.activities.alerts = () => firing;
    await waitFor(
      () => h.call('BeforeClusterUpgrade', beforeClusterUpgrade(), { annotations: PROM }),
      (a) => a.message?.includes('held') ?? false,
    );
    const reason = 'INC-4711: the alert is the node being upgraded';
    const annotations = { ...PROM, [`${P}override-gates`]: 'alerts', [`${P}override-reason`]: reason };
    expect(await h.pollUntilDone('BeforeClusterUpgrade', beforeClusterUpgrade(), { annotations })).toMatchObject({
      status: 'Success',
      retryAfterSeconds: 0,
    });
    const s = await h.status();
    expect(s.overrides?.map((o) => [o.gate, o.reason, o.step])).toEqual([
      ['alerts', reason, 'BeforeClusterUpgrade v1.33.0'],
    ]);
    expect(s.alerts?.held).toBeUndefined();
    const overridden = await waitFor(
      async () => h.activities.calls.events.filter((e) => e.reason === 'UpgradeGateOverridden'),
      (e) => e.length === 1,
    );
    expect(overridden[0]?.message).toBe(
      `BeforeClusterUpgrade v1.33.0: gate alerts overridden (${P}override-gates, granted by setting gateOverrideNamespaces): ${reason}`,
    );
  });

  it('silences each control-plane and workers step and expires the silence when the step ends', async () => {
    await driveChainedUpgrade(h, { [`${P}alertmanager-url`]: 'http://alertmanager.monitoring:9093' });
    const comment = (step: string) =>
      `capi-upgrade-orchestrator: upgrade to v1.33.0, step ${step} (workflow ${h.workflowId})`;
    const expected = [
      comment('ControlPlaneUpgrade v1.31.14'),
      comment('ControlPlaneUpgrade v1.32.13'),
      comment('ControlPlaneUpgrade v1.33.0'),
      comment('WorkersUpgrade v1.33.0'),
    ];
    expect(h.activities.calls.silencesEnsured).toEqual(expected);
    expect(h.activities.calls.silencesExpired).toEqual(expected);
    expect((await h.status()).alerts).toBeUndefined();
    expect(h.activities.calls.events.filter((e) => e.reason === 'AlertSilenceExpired')).toHaveLength(4);
  });

  it('expires the open silence when the upgrade is aborted', async () => {
    const annotations = { [`${P}alertmanager-url`]: 'http://alertmanager.monitoring:9093' };
    expect(await h.pollUntilDone('BeforeClusterUpgrade', beforeClusterUpgrade(), { annotations })).toMatchObject({
      retryAfterSeconds: 0,
    });
    const cp = {
      fromKubernetesVersion: 'v1.30.5',
      toKubernetesVersion: 'v1.31.14',
      controlPlaneUpgrades: steps('v1.31.14', 'v1.32.13', 'v1.33.0'),
      workersUpgrades: steps('v1.33.0'),
    };
    expect(await h.pollUntilDone('BeforeControlPlaneUpgrade', cp, { annotations })).toMatchObject({
      retryAfterSeconds: 0,
    });
    expect(h.activities.calls.silencesEnsured).toHaveLength(1);
    expect((await h.status()).alerts?.silence).toMatchObject({ step: 'ControlPlaneUpgrade v1.31.14', id: 'silence-1' });
    await temporalSignal(h.workflowId, 'abort', '{"reason":"bad node image"}');
    await waitFor(
      async () => h.activities.calls.silencesExpired,
      (e) => e.length === 1,
    );
    expect(h.activities.calls.silencesExpired).toEqual(h.activities.calls.silencesEnsured);
    const s = await waitFor(
      () => h.status(),
      (x) => x.alerts === undefined,
    );
    expect(s.phase).toBe('Aborted');
    await recordHistoryIfAsked(h.client, h.workflowId, 'cluster-upgrade-silence-aborted');
  });
});
