// Waiting that costs almost nothing (issue 42 item 3) and a first answer that says what it waits
// for (issue 40), through the real hook server and real Temporal:
// - a gate waiting for a time it knows (upgradeAt, a window's opening) answers retryAfterSeconds =
//   the time left, capped (default 60 s, setting waitRetryAfterMax); other waits keep 10 s; the
//   message stays the gate's (no countdown);
import { afterEach, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { gateKey, type ClusterUpgradeMemo } from '../../src/model/cluster-upgrade.ts';
import { waitFor } from '../support/wait.ts';
import {
  beforeClusterUpgrade,
  hangUntilCancelled,
  startUpgradeHarness,
  type UpgradeHarness,
} from '../support/upgrade-harness.ts';

const P = 'upgrades.capi-orchestrator.io/';
/** RFC 3339 to the second, as an annotation is written. */
const iso = (ms: number) => new Date(Math.ceil(ms / 1000) * 1000).toISOString().replace(/\.000Z$/, 'Z');
const DAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];
/** A day three days from now (UTC): its window is closed now. */
const otherDay = () => DAYS[(new Date().getUTCDay() + 3) % 7] ?? 'Sun';
const KEY = gateKey('BeforeClusterUpgrade', 'v1.33.0');
const unhealthy = () => ({ healthy: false, summary: 'node n1 NotReady', findings: ['node n1 NotReady'], warnings: [] });

/** The gate as the workflow published it (its memo, read by describe). */
async function memoGate(h: UpgradeHarness, uid = h.ref.uid) {
  const id = `cluster-upgrade/${h.ref.namespace}/${h.ref.name}/${uid}`;
  const d = await h.client.workflow.getHandle(id).describe();
  return (d.memo?.upgrade as ClusterUpgradeMemo | undefined)?.gates[KEY];
}

describe('a waiting upgrade costs almost nothing', () => {
  let h: UpgradeHarness | undefined;
  afterEach(async () => {
    await h?.close();
    h = undefined;
  });

  it('answers a new upgrade first with what it waits for, as every later answer says it', async () => {
    h = await startUpgradeHarness();
    await h.startWorker();
    const upgradeAt = iso(Date.now() + 2 * 3_600_000);
    const annotations = { [`${P}upgrade-at`]: upgradeAt };
    const waiting = `BeforeClusterUpgrade v1.33.0: waiting for upgradeAt ${new Date(upgradeAt).toISOString()}`;
    const first = await h.call('BeforeClusterUpgrade', beforeClusterUpgrade(), { annotations });
    expect(first).toMatchObject({ status: 'Success', message: waiting });
    await waitFor(
      () => memoGate(h!),
      (g) => g?.message === waiting,
    );
    const second = await h.call('BeforeClusterUpgrade', beforeClusterUpgrade(), { annotations });
    expect(second).toMatchObject({ status: 'Success', message: waiting });

    // No upgradeAt, no calendar: the first thing it waits for is the pre-upgrade health check.
    h.activities.health = () => hangUntilCancelled();
    const uid = randomUUID();
    const now = await h.call('BeforeClusterUpgrade', beforeClusterUpgrade(), { uid });
    expect(now).toMatchObject({
      status: 'Success',
      message: 'BeforeClusterUpgrade v1.33.0: running the pre-upgrade health check',
      retryAfterSeconds: 10,
    });
    expect(now.message).not.toContain('queued');
  });

  it('tells CAPI to come back when a known wait ends, up to the cap; other waits keep 10 s', async () => {
    h = await startUpgradeHarness();
    await h.startWorker();
    const far = { [`${P}upgrade-at`]: iso(Date.now() + 2 * 3_600_000) };
    // upgradeAt two hours ahead: the default cap, 60 s, from the first answer on.
    const first = await h.call('BeforeClusterUpgrade', beforeClusterUpgrade(), { annotations: far });
    expect(first.retryAfterSeconds).toBe(60);
    await waitFor(
      () => memoGate(h!),
      (g) => g?.message.includes('waiting for upgradeAt') ?? false,
    );
    const fromMemo = await h.call('BeforeClusterUpgrade', beforeClusterUpgrade(), { annotations: far });
    expect(fromMemo).toMatchObject({ status: 'Success', message: first.message, retryAfterSeconds: 60 });
    // The cap is a setting (the ExtensionConfig's): 20 s.
    const capped = await h.call('BeforeClusterUpgrade', beforeClusterUpgrade(), {
      annotations: far,
      settings: { waitRetryAfterMax: '20s' },
    });
    expect(capped).toMatchObject({ message: first.message, retryAfterSeconds: 20 });
    const bad = await h.call('BeforeClusterUpgrade', beforeClusterUpgrade(), {
      annotations: far,
      settings: { waitRetryAfterMax: '2s' },
    });
    expect(bad).toMatchObject({ status: 'Failure', retryAfterSeconds: 0 });
    expect(bad.message).toContain('setting waitRetryAfterMax "2s"');

    // upgradeAt in 25 s: the seconds left.
    const soon = { [`${P}upgrade-at`]: iso(Date.now() + 25_000) };
    const left = await h.call('BeforeClusterUpgrade', beforeClusterUpgrade(), { annotations: soon, uid: randomUUID() });
    expect(left.retryAfterSeconds).toBeGreaterThanOrEqual(20);
    expect(left.retryAfterSeconds).toBeLessThanOrEqual(26);

    // A window that opens in days: the cap.
    const window = { [`${P}maintenance-window`]: `${otherDay()} 02:00 1h` };
    const windowUid = randomUUID();
    const held = await waitFor(
      () => h!.call('BeforeClusterUpgrade', beforeClusterUpgrade(), { annotations: window, uid: windowUid }),
      (a) => a.message?.includes('maintenance window') ?? false,
    );
    expect(held).toMatchObject({ status: 'Success', retryAfterSeconds: 60 });
    await waitFor(
      () => memoGate(h!, windowUid),
      (g) => g?.message === held.message,
    );
    const again = await h.call('BeforeClusterUpgrade', beforeClusterUpgrade(), { annotations: window, uid: windowUid });
    expect(again).toMatchObject({ message: held.message, retryAfterSeconds: 60 });

    // A health check that fails may pass any moment: 10 s.
    h.activities.health = unhealthy;
    const sickUid = randomUUID();
    const sick = await waitFor(
      () => h!.call('BeforeClusterUpgrade', beforeClusterUpgrade(), { uid: sickUid }),
      (a) => a.message?.includes('waiting for the pre-upgrade health check') ?? false,
    );
    expect(sick).toMatchObject({ status: 'Success', retryAfterSeconds: 10 });
  });
});
