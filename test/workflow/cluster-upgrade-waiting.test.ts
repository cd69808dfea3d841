// Waiting that costs almost nothing (a fleet waits for its windows most of the time) and a first
// answer that says what it waits for, through the real hook server and real Temporal:
// - a gate waiting for a time it knows (upgradeAt, a window's opening) answers retryAfterSeconds =
//   the time left, capped (default 60 s, setting waitRetryAfterMax); other waits keep 10 s; the
//   message stays the gate's (no countdown);
// - a waiting poll is answered from the api's kept view without a Temporal round trip (the client's
//   reads are blocked and the answer still comes), the view read again behind the answer;
// - a gate that opened is answered Open after at most one refresh, and never from a stale view.
import { afterEach, describe, expect, it } from '@jest/globals';
import type { Client } from '@temporalio/client';
import { randomUUID } from 'node:crypto';
import { gateKey, type ClusterUpgradeMemo } from '../../src/model/cluster-upgrade.ts';
import { waitFor } from '../support/wait.ts';
import {
  beforeClusterUpgrade,
  hangUntilCancelled,
  healthy,
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

/**
 * Makes every read the api's views make through `client` hang (a List, a describe) and counts
 * them: Temporal does not answer. Returns the counts and the way back.
 */
function blockReads(client: Client) {
  const workflow = client.workflow as unknown as Record<'list' | 'getHandle', unknown>;
  const saved = { list: workflow.list, getHandle: workflow.getHandle };
  const never = new Promise<never>(() => {});
  const counts = { list: 0, describe: 0 };
  workflow.list = () => {
    counts.list++;
    return { [Symbol.asyncIterator]: () => ({ next: () => never }) };
  };
  workflow.getHandle = () => ({
    describe: () => {
      counts.describe++;
      return never;
    },
  });
  return {
    counts,
    restore() {
      Object.assign(workflow, saved);
    },
  };
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

  it('answers a waiting poll without a Temporal round trip, and reads the upgrade again behind it', async () => {
    h = await startUpgradeHarness({ views: { maxStaleMs: 200, refreshBatchMs: 50 } });
    await h.startWorker();
    const annotations = { [`${P}upgrade-at`]: iso(Date.now() + 2 * 3_600_000) };
    const waiting = await waitFor(
      () => h!.call('BeforeClusterUpgrade', beforeClusterUpgrade(), { annotations }),
      (a) => a.message?.includes('waiting for upgradeAt') ?? false,
    );
    // The first answer came from the start; the workflow's own gate is read (and kept) by the next.
    await waitFor(
      () => memoGate(h!),
      (g) => g?.message === waiting.message,
    );
    expect(await h.call('BeforeClusterUpgrade', beforeClusterUpgrade(), { annotations })).toMatchObject(waiting);
    await new Promise((r) => setTimeout(r, 400)); // what is kept is older than maxStaleMs now
    const blocked = blockReads(h.client);
    try {
      const started = Date.now();
      const answer = await h.call('BeforeClusterUpgrade', beforeClusterUpgrade(), { annotations, timeout: '3s' });
      expect(answer).toMatchObject({ status: 'Success', message: waiting.message, retryAfterSeconds: 60 });
      expect(Date.now() - started).toBeLessThan(2_000);
      // The read behind the answer went out (and hangs): the answer did not wait for it.
      await new Promise((r) => setTimeout(r, 300));
      expect(blocked.counts.list + blocked.counts.describe).toBe(1);
      expect(h.views.stats.keptAnswers).toBe(1);
    } finally {
      blocked.restore();
    }
  });

  it('answers a gate that opened Open after at most one refresh, and never Open from a stale view', async () => {
    h = await startUpgradeHarness({ views: { maxStaleMs: 200, refreshBatchMs: 50 } });
    h.activities.health = unhealthy;
    await h.startWorker();
    await waitFor(
      () => h!.call('BeforeClusterUpgrade', beforeClusterUpgrade()),
      (a) => a.message?.includes('waiting for the pre-upgrade health check') ?? false,
    );
    h.activities.health = healthy;
    await waitFor(
      () => memoGate(h!),
      (g) => g?.state === 'Open',
      60_000,
    );
    await new Promise((r) => setTimeout(r, 400)); // the view still says Waiting, and is stale
    const first = await h.call('BeforeClusterUpgrade', beforeClusterUpgrade());
    if (first.retryAfterSeconds !== 0) {
      // Answered from the stale view: it waited one poll longer, and read again behind the answer.
      expect(first.message).toContain('waiting for the pre-upgrade health check');
      await new Promise((r) => setTimeout(r, 300));
    }
    const second = await h.call('BeforeClusterUpgrade', beforeClusterUpgrade());
    expect(second).toMatchObject({ status: 'Success', retryAfterSeconds: 0 });

    // What is kept now says Open. Once stale, an Open answer needs a read: with Temporal silent the
    // call answers "unavailable" (retry later), never Success with 0.
    await new Promise((r) => setTimeout(r, 400));
    const blocked = blockReads(h.client);
    try {
      const answer = await h.call('BeforeClusterUpgrade', beforeClusterUpgrade(), { timeout: '2s' });
      expect(answer.retryAfterSeconds).toBeGreaterThan(0);
      expect(blocked.counts.list + blocked.counts.describe).toBeGreaterThan(0);
    } finally {
      blocked.restore();
    }
  });
});
