// The alert gate's activities against a real Prometheus and Alertmanager (Debian's packages,
// started by the global setup: test/support/alerting.ts) and the test bed's management API server
// (the token Secret): firing → held, resolved → none, the filter, the ignore list, other clusters'
// and pending alerts, an unreachable or hostile source, and one silence per step, expired once.
import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { managementKubeConfig } from '../../src/platform/kube/clients.ts';
import { createAlertActivities } from '../../src/activities/alerts.ts';
import { boundedRequest } from '../../src/activities/alert-http.ts';
import { resolveAlertPolicy } from '../../src/domain/alert-policy.ts';
import type { AlertPolicy, AlertReport } from '../../src/model/alerts.ts';
import { freePort } from '../../src/local/free-ports.ts';
import { alertTarget, type AlertTarget } from '../support/alerting.ts';
import { beforeClusterUpgrade, startUpgradeHarness, steps } from '../support/upgrade-harness.ts';
import { temporalSignal } from '../support/temporal-cli.ts';
import { requireEnv } from '../support/services.ts';
import { createNamespace, managementApi, testbed, testGroup, waitFor } from '../../support/testbed-fixtures.ts';

const group = testGroup('alerts');
const g = group.name;
const mg = managementApi();
const activities = createAlertActivities(managementKubeConfig(testbed().workerKubeconfig));
const cluster = { namespace: g, name: 'wl' };
const own = `${g}/wl`;
const TOKEN = 'not-a-real-token-4e1d';
let target: AlertTarget;

function policy(settings: Record<string, string> = {}): AlertPolicy {
  const r = resolveAlertPolicy({
    settings: {
      alertPrometheusUrl: requireEnv('TEST_PROMETHEUS_URL'),
      alertmanagerUrl: requireEnv('TEST_ALERTMANAGER_URL'),
      alertTokenSecret: `${g}/prom-token/token`,
      ...settings,
    },
  });
  if (!r.ok || !r.policy) throw new Error(r.ok ? 'no policy' : r.message);
  return r.policy;
}

const check = (p: AlertPolicy = policy()) => activities.checkAlerts({ cluster, policy: p });
/** Checks until Prometheus has evaluated what the target now serves (scrape and rules run every second). */
const checkUntil = (what: string, p: AlertPolicy, done: (r: AlertReport) => boolean) =>
  waitFor(what, async () => {
    const r = await check(p);
    return done(r) ? r : undefined;
  });
const firing =
  (...names: string[]) =>
  (r: AlertReport) =>
    r.reachable && JSON.stringify(r.firing) === JSON.stringify(names);

beforeAll(async () => {
  await createNamespace(mg.core, g);
  await mg.core.createNamespacedSecret({
    namespace: g,
    body: { metadata: { name: 'prom-token' }, stringData: { token: TOKEN } },
  });
  target = await alertTarget(requireEnv('TEST_ALERT_TARGETS_DIR'), g);
});
afterAll(async () => {
  await target.close();
  await mg.core.deleteNamespace({ name: g }).catch(() => undefined);
});

describe('alert gate against a real Prometheus', () => {
  it('holds while a matching alert fires and lets go once it resolves', async () => {
    target.set('KubeNodeNotReady', own, 1);
    expect(await checkUntil('KubeNodeNotReady firing', policy(), firing('KubeNodeNotReady'))).toEqual({
      reachable: true,
      firing: ['KubeNodeNotReady'],
      firingCount: 1,
    });
    target.set('KubeNodeNotReady', own, 0);
    expect(await checkUntil('no alert', policy(), firing())).toEqual({ reachable: true, firing: [], firingCount: 0 });
  });

  it('leaves out ignored, pending and other clusters’ alerts, and applies the filter to names and labels', async () => {
    target.set('KubeNodeNotReady', own, 1);
    target.set('KubePodCrashLooping', own, 1);
    target.set('Watchdog', own, 1); // ignored by default
    target.set('SlowBurn', own, 1); // pending for an hour
    target.set('TargetDown', 'someone/else', 1); // another cluster's
    await checkUntil('both firing', policy(), firing('KubeNodeNotReady', 'KubePodCrashLooping'));
    // Pending counts once firingOnly is off; the other cluster's alert never does.
    await checkUntil(
      'pending too',
      policy({ alertFiringOnly: 'false' }),
      firing('KubeNodeNotReady', 'KubePodCrashLooping', 'SlowBurn'),
    );
    expect(await check(policy({ alertFilter: '^KubeNode' }))).toMatchObject({ firing: ['KubeNodeNotReady'] });
    expect(await check(policy({ alertFilter: 'alert="KubePodCrashLooping"' }))).toMatchObject({
      firing: ['KubePodCrashLooping'],
    });
    expect(await check(policy({ alertIgnore: 'KubeNodeNotReady' }))).toMatchObject({
      firing: ['KubePodCrashLooping', 'Watchdog'],
    });
    // Without a cluster label scope the other cluster's alert is just an alert.
    expect(await check(policy({ alertClusterLabel: 'nothing_here' }))).toMatchObject({
      firing: ['KubeNodeNotReady', 'KubePodCrashLooping', 'TargetDown'],
    });
    for (const name of ['KubeNodeNotReady', 'KubePodCrashLooping', 'Watchdog', 'SlowBurn']) target.set(name, own, 0);
    target.set('TargetDown', 'someone/else', 0);
    await checkUntil('all resolved', policy(), firing());
  });

  it('says the source is unreachable, with a stable cause, when nothing listens', async () => {
    const url = `http://127.0.0.1:${await freePort()}`;
    expect(await check(policy({ alertPrometheusUrl: url }))).toEqual({ reachable: false, cause: 'connection refused' });
  });

  it('sends the token from the Secret, and caps what it reads from a hostile source', async () => {
    let seen: string | undefined;
    const hostile: Server = createServer((req, res) => {
      seen = req.headers.authorization;
      res.writeHead(200, { 'content-type': 'application/json' });
      // An endless answer: the reader stops at its cap.
      const chunk = Buffer.alloc(64 << 10, 0x20);
      const write = () => {
        while (res.write(chunk));
        res.once('drain', write);
      };
      write();
    });
    await new Promise<void>((resolve) => hostile.listen(0, '127.0.0.1', resolve));
    const address = hostile.address();
    const url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
    try {
      const report = await check(policy({ alertPrometheusUrl: url }));
      expect(report).toEqual({ reachable: false, cause: 'answer larger than 4 MiB' });
      expect(seen).toBe(`Bearer ${TOKEN}`);
      expect(JSON.stringify(report)).not.toContain(TOKEN);
      // A source that never answers: the request's own timeout (shortened here) ends it.
      const silent = await boundedRequest(`${url}/api/v1/alerts`, { method: 'GET', timeoutMs: 300, maxBytes: 2 ** 40 });
      expect(silent).toEqual({ ok: false, cause: 'no answer within 0.3s' });
    } finally {
      hostile.closeAllConnections();
      await new Promise<void>((resolve) => hostile.close(() => resolve()));
    }
  });

  it('fails naming the Secret (not its value) when the token Secret is missing', async () => {
    await expect(check(policy({ alertTokenSecret: `${g}/nothing/token` }))).rejects.toThrow(
      `alertTokenSecret: Secret ${g}/nothing not found`,
    );
  });
});

interface Silence {
  id: string;
  comment: string;
  createdBy: string;
  endsAt: string;
  matchers: { name: string; value: string; isRegex: boolean; isEqual: boolean }[];
  status: { state: string };
}

async function silences(comment?: string): Promise<Silence[]> {
  const res = await fetch(`${requireEnv('TEST_ALERTMANAGER_URL')}/api/v2/silences`);
  return ((await res.json()) as Silence[]).filter((s) => comment === undefined || s.comment === comment);
}

describe('silences against a real Alertmanager', () => {
  it('creates one silence per step however often it is asked, scoped to the cluster, and expires it once', async () => {
    const p = policy({ alertSilenceMatchers: 'alertname=~"KubeNode.*"', alertSilenceDuration: '30m' });
    const comment = `capi-upgrade-orchestrator: upgrade to v1.33.0, step WorkersUpgrade v1.33.0 (workflow ${g})`;
    const input = { cluster, policy: p, comment };
    const before = Date.now();
    const first = await activities.ensureSilence(input);
    // A retried activity (its first answer lost) finds the same silence.
    expect(await activities.ensureSilence(input)).toEqual(first);
    const [made, ...more] = await silences(comment);
    expect(more).toEqual([]);
    expect(made).toMatchObject({
      id: first.id,
      createdBy: 'capi-upgrade-orchestrator',
      status: { state: 'active' },
      matchers: expect.arrayContaining([
        { name: 'alertname', value: 'KubeNode.*', isRegex: true, isEqual: true },
        { name: 'cluster', value: own, isRegex: false, isEqual: true },
      ]),
    });
    expect(Date.parse(made!.endsAt)).toBeLessThanOrEqual(Date.now() + 30 * 60_000);
    expect(Date.parse(made!.endsAt)).toBeGreaterThanOrEqual(before + 30 * 60_000 - 1000);
    expect(await activities.expireSilences(input)).toEqual({ expired: 1 });
    expect((await silences(comment)).map((s) => s.status.state)).toEqual(['expired']);
    expect(await activities.expireSilences(input)).toEqual({ expired: 0 });
    // Once expired, the next step's (or a retried step's) silence is a new one.
    const again = await activities.ensureSilence(input);
    expect(again.id).not.toBe(first.id);
    expect(await activities.expireSilences(input)).toEqual({ expired: 1 });
  });

  it('fails with a stable cause when Alertmanager cannot be reached', async () => {
    const p = policy({ alertmanagerUrl: `http://127.0.0.1:${await freePort()}` });
    await expect(activities.ensureSilence({ cluster, policy: p, comment: 'x' })).rejects.toThrow(
      'Alertmanager: connection refused',
    );
  });
});

describe('silences of a running upgrade against a real Alertmanager', () => {
  it('opens one for the control-plane step, expires it when the step ends, and the next one on abort', async () => {
    // The platform allows this Alertmanager; the annotation chooses it.
    const h = await startUpgradeHarness({
      activities,
      settings: { alertAllowedUrls: requireEnv('TEST_ALERTMANAGER_URL') },
    });
    await h.startWorker();
    try {
      const annotations = { 'upgrades.capi-orchestrator.io/alertmanager-url': requireEnv('TEST_ALERTMANAGER_URL') };
      const ours = async () =>
        (await silences())
          .filter((s) => s.comment.includes(h.workflowId))
          .map((s) => [s.comment.replace(/ \(.*/, ''), s.status.state]);
      expect(await h.pollUntilDone('BeforeClusterUpgrade', beforeClusterUpgrade(), { annotations })).toMatchObject({
        retryAfterSeconds: 0,
      });
      const cp = (from: string, to: string, rest: string[]) => ({
        fromKubernetesVersion: from,
        toKubernetesVersion: to,
        controlPlaneUpgrades: steps(...rest),
        workersUpgrades: steps('v1.33.0'),
      });
      const plan = ['v1.31.14', 'v1.32.13', 'v1.33.0'];
      expect(
        await h.pollUntilDone('BeforeControlPlaneUpgrade', cp('v1.30.5', 'v1.31.14', plan), { annotations }),
      ).toMatchObject({ retryAfterSeconds: 0 });
      const step1 = 'capi-upgrade-orchestrator: upgrade to v1.33.0, step ControlPlaneUpgrade v1.31.14';
      expect(await ours()).toEqual([[step1, 'active']]);
      const after = {
        kubernetesVersion: 'v1.31.14',
        controlPlaneUpgrades: steps(...plan.slice(1)),
        workersUpgrades: steps('v1.33.0'),
      };
      expect(await h.pollUntilDone('AfterControlPlaneUpgrade', after, { annotations })).toMatchObject({
        retryAfterSeconds: 0,
      });
      expect(await ours()).toEqual([[step1, 'expired']]);
      expect(
        await h.pollUntilDone('BeforeControlPlaneUpgrade', cp('v1.31.14', 'v1.32.13', plan.slice(1)), { annotations }),
      ).toMatchObject({ retryAfterSeconds: 0 });
      const step2 = 'capi-upgrade-orchestrator: upgrade to v1.33.0, step ControlPlaneUpgrade v1.32.13';
      expect((await ours()).sort()).toEqual([
        [step1, 'expired'],
        [step2, 'active'],
      ]);
      await temporalSignal(h.workflowId, 'abort', '{"reason":"bad image"}');
      await waitFor(
        'the silence expired on abort',
        async () => {
          const all = await ours();
          return all.every(([, state]) => state === 'expired') ? all : undefined;
        },
        { timeoutMs: 60_000 },
      );
      expect(await ours()).toHaveLength(2);
    } finally {
      await h.close();
    }
  });
});
