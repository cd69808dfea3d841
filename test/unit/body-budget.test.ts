// The in-flight body budget (src/api/http/body-budget.ts) on its own; the e2e tier
// (test/e2e/bounded-memory.test.ts) runs it inside the real process.
import { describe, expect, it } from '@jest/globals';
import { BodyBudget } from '../../src/api/http/body-budget.ts';

const budget = (waitMs = 10_000) => new BodyBudget({ totalBytes: 100, smallBodyBytes: 10, smallReserve: 20, waitMs });

describe('BodyBudget', () => {
  it('admits large bodies only up to the total minus the small reserve, small ones up to the total', async () => {
    const b = budget();
    const large = await b.acquire(80);
    expect(large).toBeDefined();
    expect(b.inFlight).toBe(80);
    // The reserve is the small bodies' own: two of 10 fit, a third waits.
    const small = [await b.acquire(10), await b.acquire(10)];
    expect(small.every((r) => r !== undefined)).toBe(true);
    let third: (() => void) | undefined;
    const waiting = b.acquire(10).then((r) => (third = r));
    expect(b.waiting).toBe(1);
    small[0]?.();
    await waiting;
    expect(third).toBeDefined();
    expect(b.inFlight).toBe(100);
  });

  it('lets a small body that fits pass a large one that waits, and refuses after waitMs', async () => {
    const b = budget(50);
    const first = await b.acquire(70);
    const large = b.acquire(30);
    const small = b.acquire(5);
    expect(await small).toBeDefined();
    expect(await large).toBeUndefined();
    expect(b.waiting).toBe(0);
    first?.();
    expect(b.inFlight).toBe(5);
  });

  it('gives bytes back once, however often release is called', async () => {
    const b = budget();
    const release = await b.acquire(40);
    release?.();
    release?.();
    expect(b.inFlight).toBe(0);
  });
});
