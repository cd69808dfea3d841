// Readiness while an upgrade waits to start, through the real hook server and real Temporal with
// the activities stubbed: `upgradeAt` two hours ahead and a PodDisruptionBudget that holds the drain
// of a worker are reported (status query, memo, search attribute, one Event) at once, hours before
// the upgrade may start; fixing the budget turns the verdict Ready within one interval; a check
// runs once more an hour before the start; and the gate at the window says what the report said.
// The dev server cannot skip time (see cluster-upgrade-calendar.test.ts): the interval is the
// policy's shortest, 10 s, and the hour-before check is placed seconds ahead; the timing itself is
// tested in test/unit/readiness-recheck.test.ts.
import { afterEach, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { READINESS_CHECKS } from '../../src/domain/readiness.ts';
import type { ClusterUpgradeMemo, ClusterUpgradeStatus } from '../../src/model/cluster-upgrade.ts';
import { PDB_HOLD } from '../support/readiness-stubs.ts';
import { upgradeReadinessChecks } from '../../src/ops/metrics.ts';
import { refreshVisibilityGauges } from '../../src/ops/visibility-gauges.ts';
import { visibilityPort } from '../../src/platform/temporal/visibility.ts';
import { recordHistoryIfAsked } from '../support/record-history.ts';
import { waitFor } from '../support/wait.ts';
import {
  beforeClusterUpgrade,
  hangUntilCancelled,
  readySurvey,
  startUpgradeHarness,
  steps,
  type UpgradeHarness,
} from '../support/upgrade-harness.ts';

const P = 'upgrades.capi-orchestrator.io/';
const HOUR = 3_600_000;
const iso = (ms: number) => new Date(Math.ceil(ms / 1000) * 1000).toISOString().replace(/\.000Z$/, 'Z');
const blockedByPdb = () => readySurvey([PDB_HOLD]);
const DAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];
/** A day three days from now (UTC): its window is closed now. */
const otherDay = () => DAYS[(new Date().getUTCDay() + 3) % 7] ?? 'Sun';

const drainOf = (s: ClusterUpgradeStatus) => s.readiness?.checks.find((c) => c.check === 'drain');
const readinessEvents = (h: UpgradeHarness) =>
  h.activities.calls.events.filter((e) => e.reason === 'UpgradeReadinessChanged');

async function describeRun(h: UpgradeHarness) {
  const d = await h.client.workflow.getHandle(h.workflowId).describe();
  return { memo: d.memo?.upgrade as ClusterUpgradeMemo | undefined, attributes: d.searchAttributes };
}

describe('readiness while an upgrade waits to start', () => {
  let h: UpgradeHarness | undefined;
  afterEach(async () => {
    await h?.close();
    h = undefined;
  });

  it('reports the PDB that holds the drain hours ahead, turns Ready within one interval once fixed, and sends an Event only on a change', async () => {
    h = await startUpgradeHarness();
    h.activities.survey = blockedByPdb;
    await h.startWorker();
    const upgradeAt = Date.now() + 2 * HOUR;
    const annotations = { [`${P}upgrade-at`]: iso(upgradeAt), [`${P}readiness-interval`]: '10s' };
    const first = await h.call('BeforeClusterUpgrade', beforeClusterUpgrade(), { annotations });
    expect(first).toMatchObject({ status: 'Success', retryAfterSeconds: 60 });

    const blocked = await waitFor(
      () => h!.status(),
      (s) => s.readiness?.verdict === 'Blocked',
    );
    expect(Date.now()).toBeLessThan(upgradeAt - HOUR);
    expect(drainOf(blocked)).toMatchObject({ verdict: 'Blocked' });
    expect(drainOf(blocked)?.message).toContain(
      'node w-1: PodDisruptionBudget shop/web (minAvailable 2 with 2 healthy: evicting one leaves 1) covers shop/web-a, shop/web-b',
    );
    // Every other check ran too, each with its verdict.
    expect(blocked.readiness?.checks.map((c) => [c.check, c.verdict])).toEqual(
      // in-place is left out: the upgrade does not know the ExtensionConfig's executor setting.
      READINESS_CHECKS.filter((c) => c !== 'in-place').map((c) => [c, c === 'drain' ? 'Blocked' : 'Ready']),
    );
    expect(blocked.conditions.find((c) => c.type === 'Readiness')).toMatchObject({
      status: 'False',
      reason: 'Blocked',
    });
    // Memo and search attribute: what the Web UI and `temporal workflow list` filter on.
    const seen = await waitFor(
      () => describeRun(h!),
      (d) => d.memo?.readiness?.verdict === 'Blocked',
    );
    expect(seen.memo?.readiness).toEqual({
      verdict: 'Blocked',
      checks: Object.fromEntries(blocked.readiness?.checks.map((c) => [c.check, c.verdict]) ?? []),
      blocked: [`drain: ${drainOf(blocked)?.message}`],
    });
    expect(seen.attributes).toMatchObject({ CapiUpgradeReadiness: ['Blocked'] });
    const listed = await waitFor(
      async () => {
        const ids: string[] = [];
        const query = `CapiUpgradeReadiness = "Blocked" AND CapiUpgradePhase = "Pending" AND CapiClusterNamespace = "${h!.ref.namespace}"`;
        for await (const w of h!.client.workflow.list({ query })) ids.push(w.workflowId);
        return ids;
      },
      (ids) => ids.length > 0,
    );
    expect(listed).toEqual([h.workflowId]);
    // The metric per check, from the same memos.
    await refreshVisibilityGauges(visibilityPort(h.client));
    const gauge = (await upgradeReadinessChecks.get()).values;
    expect(
      gauge.find((v) => v.labels.check === 'drain' && v.labels.verdict === 'Blocked')?.value,
    ).toBeGreaterThanOrEqual(1);
    // The gate still says what it waits for (CAPI comes back when the wait ends, up to the cap).
    const again = await h.call('BeforeClusterUpgrade', beforeClusterUpgrade(), { annotations });
    expect(again).toMatchObject({ message: first.message, retryAfterSeconds: 60 });
    const events = await waitFor(
      async () => readinessEvents(h!),
      (e) => e.length > 0,
    );
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({
      type: 'Warning',
      message: `readiness for v1.33.0: Blocked: drain: ${drainOf(blocked)?.message}`,
    });

    // The budget fixed: Ready within one interval (10 s) and what a check takes.
    h.activities.survey = () => readySurvey();
    const fixedAt = Date.now();
    const ready = await waitFor(
      () => h!.status(),
      (s) => s.readiness?.verdict === 'Ready',
      30_000,
    );
    expect(ready.readiness?.verdict).toBe('Ready');
    expect(Date.parse(ready.readiness?.checkedAt ?? '') - fixedAt).toBeLessThan(10_000 + 5_000);
    expect(drainOf(ready)?.message).toBe('2 nodes drain: 2 pods to evict, 0 skipped, none blocking');
    const readyRun = await waitFor(
      () => describeRun(h!),
      (d) => d.memo?.readiness?.verdict === 'Ready',
    );
    expect(readyRun.memo?.readiness).toMatchObject({ verdict: 'Ready', checks: { drain: 'Ready' } });
    expect(readyRun.memo?.readiness?.blocked).toBeUndefined();
    expect(readyRun.attributes).toMatchObject({ CapiUpgradeReadiness: ['Ready'] });
    await waitFor(
      async () => readinessEvents(h!),
      (e) => e.length > 1,
    );
    expect(readinessEvents(h).map((e) => [e.type, e.message])).toEqual([
      ['Warning', `readiness for v1.33.0: Blocked: drain: ${drainOf(blocked)?.message}`],
      ['Normal', 'readiness for v1.33.0: Ready'],
    ]);

    // One more re-check finding the same: no Event.
    const surveys = h.activities.calls.surveys;
    const later = await waitFor(
      () => h!.status(),
      (s) => s.readiness?.checkedAt !== ready.readiness?.checkedAt,
      30_000,
    );
    expect(later.readiness?.verdict).toBe('Ready');
    expect(h.activities.calls.surveys).toBeGreaterThan(surveys);
    expect(readinessEvents(h)).toHaveLength(2);
    expect(later.phase).toBe('Pending');
    await recordHistoryIfAsked(h.client, h.workflowId, 'cluster-upgrade-readiness-rechecked');
  }, 90_000);

  it('checks once more an hour before it may start, and the gate at the window says what the report said', async () => {
    h = await startUpgradeHarness();
    h.activities.survey = blockedByPdb;
    await h.startWorker();
    // An interval longer than the wait: the only check after the first is the one an hour before.
    const upgradeAt = Date.now() + HOUR + 8_000;
    const annotations = { [`${P}upgrade-at`]: iso(upgradeAt), [`${P}readiness-interval`]: '2h' };
    await h.call('BeforeClusterUpgrade', beforeClusterUpgrade(), { annotations });
    const finalAt = Math.ceil(upgradeAt / 1000) * 1000 - HOUR;
    const second = await waitFor(
      async () => ({ surveys: h!.activities.calls.surveys, status: await h!.status() }),
      (v) => Date.parse(v.status.readiness?.checkedAt ?? '') >= finalAt,
      30_000,
    );
    expect(Date.parse(second.status.readiness?.checkedAt ?? '')).toBeGreaterThanOrEqual(finalAt);
    expect(second.surveys).toBe(2);
    const report = second.status.readiness;
    expect(report?.verdict).toBe('Blocked');
    // One Event for the verdict, however many checks found it.
    expect(readinessEvents(h)).toHaveLength(1);

    // The window comes (upgradeAt moved to now): the gate names the budget in the report's words.
    h.activities.health = () => hangUntilCancelled();
    const now = { ...annotations, [`${P}upgrade-at`]: iso(Date.now() - 60_000) };
    const drain = report?.checks.find((c) => c.check === 'drain')?.message ?? '';
    const gate = await waitFor(
      () => h!.call('BeforeClusterUpgrade', beforeClusterUpgrade(), { annotations: now }),
      (a) => a.message?.includes('running the pre-upgrade health check') ?? false,
    );
    expect(gate).toMatchObject({
      status: 'Success',
      message: `BeforeClusterUpgrade v1.33.0: running the pre-upgrade health check; readiness Blocked: drain: ${drain}`,
    });
    const warning = await waitFor(
      async () => h!.activities.calls.events.find((e) => e.reason === 'UpgradeGateWarning'),
      (e) => e !== undefined,
    );
    expect(warning?.message).toBe(`BeforeClusterUpgrade v1.33.0: readiness Blocked: drain: ${drain}`);
    // Started: no more re-checks.
    expect(h.activities.calls.surveys).toBe(2);
  }, 90_000);

  it('re-checks while a later step waits for its window, and the step at the window says what the report said', async () => {
    h = await startUpgradeHarness();
    await h.startWorker();
    const interval = { [`${P}readiness-interval`]: '10s' };
    const begun = await h.pollUntilDone('BeforeClusterUpgrade', beforeClusterUpgrade(), { annotations: interval });
    expect(begun).toMatchObject({ status: 'Success', retryAfterSeconds: 0 });
    expect((await h.status()).readiness).toBeUndefined();

    // The window closes before the control plane's first hop; meanwhile a budget comes to hold the drain.
    h.activities.survey = blockedByPdb;
    const closed = { ...interval, [`${P}maintenance-window`]: `${otherDay()} 02:00 1h` };
    const step = {
      fromKubernetesVersion: 'v1.30.5',
      toKubernetesVersion: 'v1.31.14',
      controlPlaneUpgrades: steps('v1.31.14', 'v1.32.13', 'v1.33.0'),
      workersUpgrades: steps('v1.33.0'),
    };
    const waiting = await waitFor(
      () => h!.call('BeforeControlPlaneUpgrade', step, { annotations: closed }),
      (a) => a.message?.includes('maintenance window') ?? false,
    );
    expect(waiting.message).toMatch(/^BeforeControlPlaneUpgrade v1\.31\.14: waiting for the maintenance window/);
    const blocked = await waitFor(
      () => h!.status(),
      (s) => s.readiness?.verdict === 'Blocked',
    );
    expect(drainOf(blocked)?.message).toContain('node w-1: PodDisruptionBudget shop/web');
    expect(blocked.readiness?.checks.find((c) => c.check === 'plan')).toEqual({
      check: 'plan',
      verdict: 'Ready',
      message:
        'under way at BeforeControlPlaneUpgrade v1.31.14; control plane to go: v1.31.14 → v1.32.13 → v1.33.0; workers: v1.33.0',
    });
    // The gate still says what it waits for: the re-check changes nothing CAPI sees.
    expect((await h.call('BeforeControlPlaneUpgrade', step, { annotations: closed })).message).toBe(waiting.message);
    // Fixed: Ready within one interval.
    h.activities.survey = () => readySurvey();
    await waitFor(
      () => h!.status(),
      (s) => s.readiness?.verdict === 'Ready',
      30_000,
    );
    // Blocked again, then the window opens (the annotation removed): the step goes on, warning in the report's words.
    h.activities.survey = blockedByPdb;
    const again = await waitFor(
      () => h!.status(),
      (s) => s.readiness?.verdict === 'Blocked',
      30_000,
    );
    const opened = await h.pollUntilDone('BeforeControlPlaneUpgrade', step, { annotations: interval });
    expect(opened).toMatchObject({ status: 'Success', retryAfterSeconds: 0 });
    const warning = await waitFor(
      async () => h!.activities.calls.events.find((e) => e.reason === 'UpgradeGateWarning'),
      (e) => e !== undefined,
    );
    expect(warning?.message).toBe(
      `BeforeControlPlaneUpgrade v1.31.14: readiness Blocked: drain: ${drainOf(again)?.message}`,
    );
    await recordHistoryIfAsked(h.client, h.workflowId, 'cluster-upgrade-readiness-step-window');
  }, 90_000);

  it("says what the gate will do under the Cluster's granted override: an overridden removed-API finding is Ready", async () => {
    h = await startUpgradeHarness({ settings: { removedApiPolicy: 'fail', gateOverrideNamespaces: '*' } });
    h.activities.deprecatedApis = () => ({
      uses: [{ group: 'example.io', version: 'v1beta1', resource: 'widgets', subresource: '', removedRelease: '1.32' }],
      malformed: 0,
      dropped: 0,
    });
    await h.startWorker();
    const later = { [`${P}upgrade-at`]: iso(Date.now() + 2 * HOUR), [`${P}readiness-interval`]: '10s' };
    await h.call('BeforeClusterUpgrade', beforeClusterUpgrade(), { annotations: later });
    const blocked = await waitFor(
      () => h!.status(),
      (s) => s.readiness?.verdict === 'Blocked',
    );
    expect(blocked.readiness?.checks.find((c) => c.check === 'removed-apis')?.message).toContain(
      'example.io/v1beta1 widgets',
    );

    const overridden = {
      ...later,
      [`${P}override-gates`]: 'removed-apis',
      [`${P}override-reason`]: 'the widget client moves next week',
    };
    await h.call('BeforeClusterUpgrade', beforeClusterUpgrade(), { annotations: overridden });
    const ready = await waitFor(
      () => h!.status(),
      (s) => s.readiness?.verdict === 'Ready',
      30_000,
    );
    expect(ready.readiness?.checks.find((c) => c.check === 'removed-apis')).toEqual({
      check: 'removed-apis',
      verdict: 'Ready',
      message: expect.stringMatching(
        /^overridden: .*example\.io\/v1beta1 widgets.*; gate removed-apis overridden \(upgrades\.capi-orchestrator\.io\/override-gates, granted by setting gateOverrideNamespaces\): the widget client moves next week$/,
      ),
    });
  }, 90_000);

  it('never lets a re-check that hangs delay the start, nor an abort', async () => {
    h = await startUpgradeHarness();
    let surveysCancelled = 0;
    h.activities.survey = async () => {
      try {
        return await hangUntilCancelled();
      } finally {
        surveysCancelled++;
      }
    };
    await h.startWorker();
    const annotations = { [`${P}upgrade-at`]: iso(Date.now() + 6_000) };
    // The first check starts with the wait and hangs on the workload cluster: upgradeAt starts the upgrade anyway.
    const done = await h.pollUntilDone('BeforeClusterUpgrade', beforeClusterUpgrade(), { annotations });
    expect(done).toMatchObject({ status: 'Success', retryAfterSeconds: 0 });
    expect(h.activities.calls.surveys).toBe(1);
    await waitFor(
      async () => surveysCancelled,
      (n) => n === 1,
    );
    const s = await h.status();
    expect(s.readiness).toBeUndefined();

    // An abort while a check hangs: Aborted at once, the check cancelled.
    const uid = randomUUID();
    const later = { [`${P}upgrade-at`]: iso(Date.now() + 2 * HOUR) };
    await h.call('BeforeClusterUpgrade', beforeClusterUpgrade(), { annotations: later, uid });
    await waitFor(
      async () => h!.activities.calls.surveys,
      (n) => n === 2,
    );
    const handle = h.client.workflow.getHandle(`cluster-upgrade/${h.ref.namespace}/${h.ref.name}/${uid}`);
    await handle.signal('abort', { reason: 'not this week' });
    const aborted = await waitFor(
      () => h!.call('BeforeClusterUpgrade', beforeClusterUpgrade(), { annotations: later, uid }),
      (a) => a.status === 'Failure',
    );
    expect(aborted.message).toBe('upgrade to v1.33.0 aborted: not this week; signal "resume" to continue');
    await waitFor(
      async () => surveysCancelled,
      (n) => n === 2,
    );
    expect(surveysCancelled).toBe(2);
  }, 90_000);
});
