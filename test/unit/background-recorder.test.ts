import { describe, expect, it } from '@jest/globals';
import { BackgroundRecorder } from '../../src/api/hooks/background-recorder.ts';

const logs: string[] = [];
const log = {
  warn: (_o: object, m: string) => logs.push(`warn ${m}`),
  error: (_o: object, m: string) => logs.push(`error ${m}`),
};
const fast = { log, initialDelayMs: 5, maxDelayMs: 20, attemptTimeoutMs: 1_000 };

describe('BackgroundRecorder', () => {
  it('returns at once and writes the record in the background', async () => {
    const r = new BackgroundRecorder(fast);
    let written = 0;
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    r.record('a', async () => {
      await gate;
      written++;
    });
    expect(written).toBe(0);
    expect(r.pending).toBe(1);
    release();
    await r.idle();
    expect(written).toBe(1);
    expect(r.stats).toMatchObject({ recorded: 1, retried: 0, dropped: 0 });
  });

  it('retries with backoff and gives each attempt a deadline', async () => {
    const r = new BackgroundRecorder(fast);
    const deadlines: number[] = [];
    let tries = 0;
    r.record('a', async (deadline) => {
      deadlines.push(deadline - Date.now());
      if (++tries < 3) throw new Error('unavailable');
    });
    await r.idle();
    expect(tries).toBe(3);
    expect(r.stats).toMatchObject({ recorded: 1, retried: 2, dropped: 0 });
    for (const d of deadlines) expect(d).toBeGreaterThan(900);
  });

  it('drops a record after its last attempt, and logs it', async () => {
    const r = new BackgroundRecorder({ ...fast, maxAttempts: 3 });
    let tries = 0;
    r.record('a', async () => {
      tries++;
      throw new Error('refused');
    });
    await r.idle();
    expect(tries).toBe(3);
    expect(r.stats.dropped).toBe(1);
    expect(logs).toContain('error background record dropped after its last attempt');
  });

  it('queues a key once while it is pending (CAPI re-calls)', async () => {
    const r = new BackgroundRecorder(fast);
    let tries = 0;
    for (let i = 0; i < 5; i++)
      r.record('same', async () => {
        tries++;
      });
    await r.idle();
    expect(tries).toBe(1);
  });

  it('keeps the queue bounded: past maxQueued the oldest record is dropped', async () => {
    const r = new BackgroundRecorder({ ...fast, maxQueued: 3, concurrency: 1 });
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const done: string[] = [];
    for (const key of ['a', 'b', 'c', 'd', 'e'])
      r.record(key, async () => {
        await gate;
        done.push(key);
      });
    // `a` runs; b..e compete for 3 places: b is dropped.
    expect(r.stats.dropped).toBe(1);
    release();
    await r.idle();
    expect(done).toEqual(['a', 'c', 'd', 'e']);
  });

  it('takes nothing after close', async () => {
    const r = new BackgroundRecorder(fast);
    r.close();
    let tries = 0;
    r.record('a', async () => {
      tries++;
    });
    await r.idle();
    expect(tries).toBe(0);
  });

  it('flushes what is queued before a stop, for at most the time it is given, and counts what it drops', async () => {
    const r = new BackgroundRecorder({ ...fast, concurrency: 1 });
    let written = 0;
    for (const key of ['a', 'b', 'c'])
      r.record(key, async () => {
        await new Promise((resolve) => setTimeout(resolve, 20));
        written++;
      });
    await r.flush(5_000);
    expect(written).toBe(3);
    r.record('slow', () => new Promise(() => {}));
    r.record('queued', async () => {});
    const started = Date.now();
    await r.flush(100);
    expect(Date.now() - started).toBeLessThan(2_000);
    r.close();
    expect(r.stats.dropped).toBe(1);
    expect(logs).toContain('error background records dropped at stop');
  });
});
