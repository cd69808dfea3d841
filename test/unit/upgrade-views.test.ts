import { AsyncLocalStorage } from 'node:async_hooks';
import { describe, expect, it } from '@jest/globals';
import { UpgradeViews, type ListedRun, type RunView } from '../../src/api/upgrade-views.ts';

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
  const calls = { describe: 0, list: 0 };
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
    describe: async (id: string) => {
      calls.describe++;
      const snapshot = state.get(id);
      await hold;
      return snapshot;
    },
    listRunning: async function* (): AsyncIterable<ListedRun> {
      calls.list++;
      const snapshot = [...state].filter(([, v]) => v.running);
      await listHold;
      for (const [workflowId, v] of snapshot) yield { workflowId, runId: v.runId, memo: v.memo };
    },
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
function deferred() {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

describe('UpgradeViews', () => {
  it('coalesces concurrent reads of one upgrade into one describe', async () => {
    const b = backend();
    b.state.set('a', running('r1', { phase: 'Pending' }));
    const gate = deferred();
    b.holdDescribes(gate.promise);
    b.holdLists(new Promise(() => {})); // no List answers in this test
    const views = new UpgradeViews({ describe: b.describe, listRunning: b.listRunning });
    const reads = Array.from({ length: 50 }, () => views.get('a'));
    gate.resolve();
    const results = await Promise.all(reads);
    expect(b.calls.describe).toBe(1);
    expect(new Set(results.map((r) => r?.runId))).toEqual(new Set(['r1']));
    expect(views.stats.joined).toBe(49);
    // Kept: the next read costs nothing.
    await views.get('a');
    expect(b.calls.describe).toBe(1);
    views.close();
  });

  it('never answers from an entry older than maxStaleMs', async () => {
    const b = backend();
    b.state.set('a', running('r1', { phase: 'Pending' }));
    b.holdLists(new Promise(() => {}));
    const views = new UpgradeViews({ describe: b.describe, listRunning: b.listRunning, maxStaleMs: 100 });
    await views.get('a');
    b.state.set('a', running('r1', { phase: 'Aborted' }));
    expect((await views.get('a'))?.memo).toEqual({ phase: 'Pending' });
    await sleep(150);
    expect((await views.get('a'))?.memo).toEqual({ phase: 'Aborted' });
    expect(b.calls.describe).toBe(2);
    views.close();
  });

  it('refreshes every running upgrade from one List, so repeat reads describe nothing', async () => {
    const b = backend();
    for (let i = 0; i < 100; i++) b.state.set(`u${i}`, running(`r${i}`, { phase: 'Pending', n: i }));
    const views = new UpgradeViews({
      describe: b.describe,
      listRunning: b.listRunning,
      maxStaleMs: 300,
      refreshMs: 50,
    });
    await views.get('u0'); // starts the refresh
    await sleep(120);
    b.state.set('u7', running('r7', { phase: 'Aborted' }));
    await sleep(120);
    const before = b.calls.describe;
    for (let round = 0; round < 3; round++) {
      for (let i = 0; i < 100; i++) await views.get(`u${i}`);
      await sleep(100);
    }
    expect(b.calls.describe).toBe(before);
    expect(b.calls.list).toBeGreaterThan(3);
    expect((await views.get('u7'))?.memo).toEqual({ phase: 'Aborted' });
    views.close();
  });

  it('does not let a List that began before a write put the older memo back', async () => {
    const b = backend();
    b.state.set('a', running('r1', { gate: 'old' }));
    const views = new UpgradeViews({ describe: b.describe, listRunning: b.listRunning, refreshMs: 10 });
    await views.get('a');
    const listGate = deferred();
    b.holdLists(listGate.promise);
    await sleep(30); // a List is now waiting with the old memo
    views.invalidate('a');
    b.state.set('a', running('r1', { gate: 'new' }));
    listGate.resolve();
    b.holdLists(undefined);
    await sleep(30);
    expect((await views.get('a'))?.memo).toEqual({ gate: 'new' });
    views.close();
  });

  it('says an upgrade is probably absent only after a fresh List without it', async () => {
    const b = backend();
    b.state.set('a', running('r1', {}));
    const views = new UpgradeViews({
      describe: b.describe,
      listRunning: b.listRunning,
      maxStaleMs: 200,
      refreshMs: 20,
    });
    expect(views.probablyAbsent('b')).toBe(false); // nothing listed yet
    await views.get('a');
    await sleep(60);
    expect(views.probablyAbsent('a')).toBe(false);
    expect(views.probablyAbsent('b')).toBe(true);
    views.invalidate('b'); // written here: no longer a guess
    expect(views.probablyAbsent('b')).toBe(false);
    views.close();
    await sleep(250);
    expect(views.probablyAbsent('c')).toBe(false); // the List is too old
  });

  it('describes kept entries again in the background, so a failing workflow task shows', async () => {
    const b = backend();
    b.state.set('a', running('r1', {}));
    const views = new UpgradeViews({
      describe: b.describe,
      listRunning: b.listRunning,
      refreshMs: 20,
      redescribeMs: 50,
    });
    await views.get('a');
    b.state.set('a', { ...running('r1', {}), workflowTaskRetrying: true });
    await sleep(80);
    await views.get('a'); // answered from the List's entry; a describe starts behind it
    await sleep(20);
    expect((await views.get('a'))?.workflowTaskRetrying).toBe(true);
    views.close();
  });

  it('refreshes outside the hook call that started it (no inherited deadline or abort)', async () => {
    const hookContext = new AsyncLocalStorage<string>();
    const seen: (string | undefined)[] = [];
    const views = new UpgradeViews({
      describe: async () => undefined,
      listRunning: async function* () {
        seen.push(hookContext.getStore());
        yield* [];
      },
      refreshMs: 10,
    });
    await hookContext.run('hook call', () => views.get('a'));
    await sleep(50);
    expect(seen.length).toBeGreaterThan(1);
    expect(seen.every((s) => s === undefined)).toBe(true);
    views.close();
  });
});
