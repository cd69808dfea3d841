// A read of an upgrade that outlives the hook's deadline (or its abort) is the backend being
// unavailable, never an internal error: in a chaos run's Temporal outage under CPU stress the answer was
// "internal error in the BeforeClusterUpgrade handler" when this timer fired before Date.now()
// reached the deadline (libuv's timers run on the loop's cached clock, late loops fire early).
import { describe, expect, it } from '@jest/globals';
import { BackendUnavailable } from '../../src/api/hooks/errors.ts';
import { withinHookDeadline } from '../../src/api/handlers/lifecycle/upgrade-runs.ts';

const never = new Promise<never>(() => {});

describe('withinHookDeadline', () => {
  it('answers the read when it comes in time', async () => {
    const ctx = { deadline: Date.now() + 5_000, signal: new AbortController().signal };
    await expect(withinHookDeadline(Promise.resolve('run'), ctx)).resolves.toBe('run');
  });

  it('gives up with BackendUnavailable at the deadline', async () => {
    const ctx = { deadline: Date.now() + 20, signal: new AbortController().signal };
    await expect(withinHookDeadline(never, ctx)).rejects.toBeInstanceOf(BackendUnavailable);
  });

  it('gives up with BackendUnavailable when the call is aborted long before its deadline', async () => {
    const abort = new AbortController();
    const ctx = { deadline: Date.now() + 60_000, signal: abort.signal };
    const read = withinHookDeadline(never, ctx);
    abort.abort();
    const err = await read.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(BackendUnavailable);
    expect((err as Error).message).toBe('the hook deadline passed while reading the upgrade');
  });
});
