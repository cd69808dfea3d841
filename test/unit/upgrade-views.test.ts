import { AsyncLocalStorage } from 'node:async_hooks';
import { describe, expect, it } from '@jest/globals';
import { UpgradeViews, type ListedRun, type RunView } from '../../src/api/handlers/lifecycle/upgrade-views.ts';

const running = (runId: string, memo: unknown): RunView => ({
  runId,
  running: true,
  status: 'RUNNING',
  memo,
  workflowTaskRetrying: false,
});

/** A fake Temporal: describes and Lists read `state`, each call counted; describes can be held. */
function backend() {
  const state = new Map<string, RunView>();
  const calls = { describe: 0, list: 0, rows: 0 };
  let listFails = false;
  let describeFails = false;
  let hold: Promise<void> | undefined;
  let listHold: Promise<void> | undefined;
  return {
    state,
    calls,
    holdDescribes(p: Promise<void> | undefined) {
      hold = p;
    },
    holdLists(p: Promise<void> | undefined) {
      listHold = p;
    },
    failLists(fail: boolean) {
      listFails = fail;
    },
    failDescribes(fail: boolean) {
      describeFails = fail;
    },
    describe: async (id: string) => {
      calls.describe++;
      if (describeFails) throw new Error('frontend unavailable');
      const snapshot = state.get(id);
      await hold;
      return snapshot;
    },
    /** The running upgrades among `ids` (all of them without `ids`); each row yielded is counted. */
    listRunning: async function* (ids?: readonly string[]): AsyncIterable<ListedRun> {
      calls.list++;
      if (listFails) throw new Error('visibility store unavailable');
      const wanted = ids ? new Set(ids) : undefined;
      const snapshot = [...state].filter(([id, v]) => v.running && (!wanted || wanted.has(id)));
      await listHold;
      for (const [workflowId, v] of snapshot) {
        calls.rows++;
        yield { workflowId, runId: v.runId, memo: v.memo };
      }
    },
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** Waits (up to 2 s) until `ok()` holds: a loaded machine runs timers late. */
async function eventually(ok: () => boolean): Promise<void> {
  for (const deadline = Date.now() + 2_000; !ok() && Date.now() < deadline;) await sleep(5);
}
function deferred() {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

describe('UpgradeViews', () => {
  it('coalesces concurrent reads of one upgrade into one read', async () => {
    const b = backend();
    b.state.set('a', running('r1', { phase: 'Pending' }));
    const gate = deferred();
    b.holdLists(gate.promise);
    const views = new UpgradeViews({ describe: b.describe, listRunning: b.listRunning });
    const reads = Array.from({ length: 50 }, () => views.get('a'));
    await sleep(10);
    gate.resolve();
    const results = await Promise.all(reads);
    expect(b.calls.list + b.calls.describe).toBe(1);
    expect(new Set(results.map((r) => r?.runId))).toEqual(new Set(['r1']));
    expect(views.stats.joined).toBe(49);
    // Kept: the next read costs nothing.
    await views.get('a');
    expect(b.calls.list + b.calls.describe).toBe(1);
    views.close();
  });

  it('never answers from an entry older than maxStaleMs', async () => {
    const b = backend();
    b.state.set('a', running('r1', { phase: 'Pending' }));
    const views = new UpgradeViews({ describe: b.describe, listRunning: b.listRunning, maxStaleMs: 100 });
    await views.get('a');
    b.state.set('a', running('r1', { phase: 'Aborted' }));
    expect((await views.get('a'))?.memo).toEqual({ phase: 'Pending' });
    await sleep(150);
    expect((await views.get('a'))?.memo).toEqual({ phase: 'Aborted' });
    expect(b.calls.list + b.calls.describe).toBe(2);
    views.close();
  });

  it('reads the polls of one turn with one List of their ids, so repeat reads describe nothing', async () => {
    const b = backend();
    for (let i = 0; i < 150; i++) b.state.set(`u${i}`, running(`r${i}`, { phase: 'Pending', n: i }));
    const views = new UpgradeViews({ describe: b.describe, listRunning: b.listRunning, maxStaleMs: 50 });
    const polled = Array.from({ length: 100 }, (_, i) => `u${i}`);
    for (let round = 0; round < 3; round++) {
      if (round === 1) b.state.set('u7', running('r7', { phase: 'Aborted' }));
      const answers = await Promise.all(polled.map((id) => views.get(id)));
      expect(answers.map((a) => a?.runId)).toEqual(polled.map((_, i) => `r${i}`));
      await sleep(100);
    }
    expect(b.calls.describe).toBe(0);
    expect(b.calls.list).toBe(3);
    expect(b.calls.rows).toBe(300); // the polled ones only, not the 50 others
    expect((await views.get('u7'))?.memo).toEqual({ phase: 'Aborted' });
    views.close();
  });

  it('does not let a List that began before a write put the older memo back', async () => {
    const b = backend();
    b.state.set('a', running('r1', { gate: 'old' }));
    const views = new UpgradeViews({ describe: b.describe, listRunning: b.listRunning, maxStaleMs: 10 });
    await views.get('a');
    await sleep(20);
    const listGate = deferred();
    b.holdLists(listGate.promise);
    const before = views.get('a'); // a List is now waiting with the old memo
    await sleep(10);
    views.invalidate('a');
    b.state.set('a', running('r1', { gate: 'new' }));
    // A read after the write does not join the List that began before it.
    expect((await views.get('a'))?.memo).toEqual({ gate: 'new' });
    listGate.resolve();
    b.holdLists(undefined);
    expect((await before)?.memo).toEqual({ gate: 'old' });
    expect((await views.get('a'))?.memo).toEqual({ gate: 'new' });
    views.close();
  });

  it('reads an upgrade no List shows running as absent, and what this process wrote by describe', async () => {
    const b = backend();
    const views = new UpgradeViews({ describe: b.describe, listRunning: b.listRunning, maxStaleMs: 0 });
    expect(await views.get('b')).toBeUndefined(); // most likely new: the hook starts it
    expect(b.calls).toMatchObject({ list: 1, describe: 0 });
    views.invalidate('b'); // started here
    b.state.set('b', running('r1', { phase: 'Pending' }));
    b.holdLists(new Promise(() => {})); // a lagging visibility store: never answers
    expect((await views.get('b'))?.runId).toBe('r1');
    expect(b.calls).toMatchObject({ list: 1, describe: 1 });
    views.close();
  });

  it('describes a run the List no longer shows running (how did it close?)', async () => {
    const b = backend();
    b.state.set('a', running('r1', {}));
    const views = new UpgradeViews({ describe: b.describe, listRunning: b.listRunning, maxStaleMs: 0 });
    await views.get('a');
    b.state.set('a', { runId: 'r1', running: false, status: 'TERMINATED', workflowTaskRetrying: false });
    await sleep(5);
    expect(await views.get('a')).toMatchObject({ running: false, status: 'TERMINATED' });
    expect(b.calls).toMatchObject({ list: 2, describe: 1 });
    views.close();
  });

  it('describes kept entries again in the background, so a failing workflow task shows', async () => {
    const b = backend();
    b.state.set('a', running('r1', {}));
    const views = new UpgradeViews({ describe: b.describe, listRunning: b.listRunning, redescribeMs: 50 });
    await views.get('a');
    b.state.set('a', { ...running('r1', {}), workflowTaskRetrying: true });
    await sleep(80);
    await views.get('a'); // answered from the List's entry; a describe starts behind it
    await sleep(20);
    expect((await views.get('a'))?.workflowTaskRetrying).toBe(true);
    views.close();
  });

  it('spreads re-describes: polls that find many entries due at once describe a few and List the rest', async () => {
    const b = backend();
    const ids = Array.from({ length: 200 }, (_, i) => `u${i}`);
    for (const [i, id] of ids.entries()) b.state.set(id, running(`r${i}`, {}));
    const views = new UpgradeViews({
      describe: b.describe,
      listRunning: b.listRunning,
      maxStaleMs: 10,
      redescribeMs: 40,
      maxRedescribes: 4,
    });
    await Promise.all(ids.map((id) => views.get(id)));
    expect(b.calls.describe).toBe(0);
    await sleep(60); // every entry is due now
    const gate = deferred();
    b.holdDescribes(gate.promise);
    const answers = Promise.all(ids.map((id) => views.get(id)));
    await sleep(20);
    expect(b.calls.describe).toBe(4);
    gate.resolve();
    b.holdDescribes(undefined);
    expect((await answers).every((a) => a?.running)).toBe(true);
    expect(b.calls.describe).toBe(4);
    views.close();
  });

  it('paces Lists within maxListsPerSecond: reads that come while the rate is spent share the next List', async () => {
    const b = backend();
    for (let i = 0; i < 10; i++) b.state.set(`u${i}`, running(`r${i}`, {}));
    const views = new UpgradeViews({ describe: b.describe, listRunning: b.listRunning, maxListsPerSecond: 5 });
    const reads = [views.get('u0')];
    await sleep(5); // the first List has gone; the next may start 200 ms after it
    for (let i = 1; i < 10; i++) {
      reads.push(views.get(`u${i}`));
      await new Promise((r) => setImmediate(r)); // each read in a turn of its own
    }
    expect((await Promise.all(reads)).map((r) => r?.runId)).toEqual(Array.from({ length: 10 }, (_, i) => `r${i}`));
    expect(b.calls).toMatchObject({ list: 2, rows: 10, describe: 0 });
    views.close();
  });

  it('reads outside the hook call that started it (no inherited deadline or abort)', async () => {
    const hookContext = new AsyncLocalStorage<string>();
    const seen: (string | undefined)[] = [];
    const views = new UpgradeViews({
      describe: async () => undefined,
      listRunning: async function* () {
        seen.push(hookContext.getStore());
        yield* [];
      },
      maxStaleMs: 0,
    });
    await hookContext.run('hook call', () => views.get('a'));
    await hookContext.run('hook call', () => views.get('b'));
    expect(seen).toEqual([undefined, undefined]);
    views.close();
  });
  // process Listed every running upgrade. Counted here in rows and Temporal calls, not in time.
  // With 3,000 waiting upgrades every poll cost 3.7x what it did at 500, because each
  // process Listed every running upgrade. Counted here in rows and Temporal calls, not in time.
  it('reads only the upgrades being polled: rows and calls per poll do not grow with the running upgrades', async () => {
    const perPoll = async (runningUpgrades: number) => {
      const b = backend();
      for (let i = 0; i < runningUpgrades; i++) b.state.set(`u${i}`, running(`r${i}`, { phase: 'Pending' }));
      // Every read is a miss (maxStaleMs 0): each poll needs the upgrade's current state.
      const views = new UpgradeViews({ describe: b.describe, listRunning: b.listRunning, maxStaleMs: 0 });
      const polled = Array.from({ length: 20 }, (_, i) => `u${i * 2}`);
      let polls = 0;
      for (let round = 0; round < 5; round++) {
        const answers = await Promise.all(polled.map((id) => views.get(id)));
        polls += answers.length;
        for (const a of answers) expect(a?.running).toBe(true);
        await sleep(20); // lets a refresh of the old design run between rounds
      }
      views.close();
      return { rows: b.calls.rows / polls, calls: (b.calls.list + b.calls.describe) / polls };
    };
    const small = await perPoll(50);
    const large = await perPoll(5_000);
    expect(large.rows).toBeLessThanOrEqual(1);
    expect(large.rows).toBe(small.rows);
    expect(large.calls).toBeLessThanOrEqual(1);
    expect(large.calls).toBe(small.calls);
  });

  // A waiting poll never waits on Temporal (a slow Temporal must not make a fleet's polls slow). What
  // is kept answers it however old, and the read goes out behind the answer; only a failed read makes
  // the next poll read first.
  it('gives what is kept however old, and reads it again behind the answer', async () => {
    const b = backend();
    b.state.set('a', running('r1', { gate: 'waiting' }));
    const views = new UpgradeViews({
      describe: b.describe,
      listRunning: b.listRunning,
      maxStaleMs: 20,
      refreshBatchMs: 5,
    });
    expect(views.kept('a')).toBeUndefined(); // nothing kept: the caller reads first
    await views.get('a');
    await sleep(50);
    b.state.set('a', running('r1', { gate: 'open' }));
    const never = new Promise<void>(() => {});
    b.holdLists(never); // Temporal does not answer
    const calls = b.calls.list + b.calls.describe;
    expect(views.kept('a')?.memo).toEqual({ gate: 'waiting' }); // no call made for it
    expect(b.calls.list + b.calls.describe).toBe(calls);
    views.refreshBehind('a');
    views.refreshBehind('a'); // a second answer shares the read to come
    await eventually(() => b.calls.list >= 2);
    await sleep(20);
    expect(b.calls.list).toBe(2);
    expect(views.stats.keptAnswers).toBe(2);
    b.holdLists(undefined);
    views.close();

    // One refresh later the open gate shows.
    const c = backend();
    c.state.set('a', running('r1', { gate: 'waiting' }));
    const fresh = new UpgradeViews({
      describe: c.describe,
      listRunning: c.listRunning,
      maxStaleMs: 200,
      refreshBatchMs: 5,
    });
    await fresh.get('a');
    await sleep(250);
    c.state.set('a', running('r1', { gate: 'open' }));
    expect(fresh.kept('a')?.memo).toEqual({ gate: 'waiting' });
    fresh.refreshBehind('a');
    await eventually(() => (fresh.kept('a')?.memo as { gate?: string } | undefined)?.gate === 'open');
    expect(fresh.kept('a')?.memo).toEqual({ gate: 'open' });
    // Within maxStaleMs nothing is read again (a re-describe only when one is due).
    fresh.refreshBehind('a');
    await sleep(5);
    expect(c.calls).toMatchObject({ list: 2, describe: 0 });
    fresh.close();
  });

  it('drops what is kept when the read behind an answer fails, so the next poll reads first', async () => {
    const b = backend();
    b.state.set('a', running('r1', { gate: 'waiting' }));
    const views = new UpgradeViews({
      describe: b.describe,
      listRunning: b.listRunning,
      maxStaleMs: 10,
      refreshBatchMs: 5,
    });
    await views.get('a');
    await sleep(30);
    b.failLists(true);
    b.failDescribes(true);
    expect(views.kept('a')?.memo).toEqual({ gate: 'waiting' });
    views.refreshBehind('a');
    await eventually(() => views.kept('a') === undefined);
    expect(views.kept('a')).toBeUndefined();
    views.close();
  });

  it('reads behind the answers of one batch together: one List for the polls of a second', async () => {
    const b = backend();
    const ids = Array.from({ length: 60 }, (_, i) => `u${i}`);
    for (const [i, id] of ids.entries()) b.state.set(id, running(`r${i}`, { gate: 'waiting' }));
    const views = new UpgradeViews({
      describe: b.describe,
      listRunning: b.listRunning,
      maxStaleMs: 10,
      refreshBatchMs: 1_000,
      maxListsPerSecond: 1_000,
    });
    await Promise.all(ids.map((id) => views.get(id)));
    await sleep(20);
    const lists = b.calls.list;
    // Polls spread over the batch's time, each answered at once from what is kept.
    for (const id of ids) {
      expect(views.kept(id)?.memo).toEqual({ gate: 'waiting' });
      views.refreshBehind(id);
      await sleep(1);
    }
    expect(b.calls.list).toBe(lists);
    expect(views.sizes().behind).toBe(60);
    await eventually(() => views.sizes().behind === 0 && b.calls.rows >= 120);
    expect(b.calls.list - lists).toBe(1);
    expect(b.calls.rows).toBe(120); // one row each at the start, one each behind the answers
    expect(views.sizes().behind).toBe(0);
    views.close();
  });

  it('keeps every map bounded, and prunes it, while every List fails', async () => {
    const b = backend();
    for (let i = 0; i < 1_000; i++) b.state.set(`u${i}`, running(`r${i}`, {}));
    b.failLists(true);
    const views = new UpgradeViews({
      describe: b.describe,
      listRunning: b.listRunning,
      maxEntries: 100,
      idleMs: 200,
      writeMemoryMs: 100,
    });
    for (let i = 0; i < 1_000; i++) {
      expect((await views.get(`u${i}`))?.runId).toBe(`r${i}`); // answered by a describe instead
      views.invalidate(`w${i}`);
    }
    const full = views.sizes();
    expect(full.entries).toBeLessThanOrEqual(100);
    expect(full.writtenAt).toBeLessThanOrEqual(100);
    expect(full.inflight).toBe(0);
    await sleep(600); // no calls for longer than idleMs: everything goes, although no List ever succeeded
    expect(views.sizes()).toEqual({ entries: 0, inflight: 0, writtenAt: 0, queued: 0, behind: 0 });
    views.close();
  });
});
