// heartbeating: outside an activity it only runs the function; inside one it
// heartbeats while the function runs and gives up at once when the activity is
// cancelled, even if the function never settles (a hung Kubernetes call).
import { describe, expect, it, jest } from '@jest/globals';
import { CancelledFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { heartbeating } from '../../src/activities/heartbeat.ts';

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** A MockActivityEnvironment that counts heartbeats. */
function activityEnv(): { env: MockActivityEnvironment; beats: () => number } {
  const env = new MockActivityEnvironment();
  let beats = 0;
  env.on('heartbeat', () => beats++);
  return { env, beats: () => beats };
}

describe('heartbeating outside an activity', () => {
  it('runs the function and passes its result and its error through', async () => {
    expect(await heartbeating(async () => 42)).toBe(42);
    const boom = new Error('boom');
    await expect(
      heartbeating(async () => {
        throw boom;
      }),
    ).rejects.toBe(boom);
  });
});

describe('heartbeating inside an activity', () => {
  it('heartbeats at once and every interval while the function runs, then stops', async () => {
    jest.useFakeTimers();
    try {
      const { env, beats } = activityEnv();
      let finish: (v: string) => void = () => undefined;
      const running = env.run(() => heartbeating(() => new Promise<string>((resolve) => (finish = resolve)), 40));
      expect(beats()).toBe(1);
      await jest.advanceTimersByTimeAsync(130);
      expect(beats()).toBe(4); // at 0, 40, 80 and 120 ms
      finish('done');
      expect(await running).toBe('done');
      await jest.advanceTimersByTimeAsync(200);
      expect(beats()).toBe(4);
    } finally {
      jest.useRealTimers();
    }
  });

  it('rejects with CancelledFailure promptly when the activity is cancelled while the function hangs', async () => {
    const { env, beats } = activityEnv();
    const hung = new Promise<never>(() => undefined);
    const running = env.run(() => heartbeating(() => hung, 60_000));
    await sleep(20);
    expect(beats()).toBe(1);
    const cancelledAt = Date.now();
    env.cancel();
    // `hung` never settles: rejecting at all shows the cancellation won the race.
    await expect(running).rejects.toBeInstanceOf(CancelledFailure);
    expect(Date.now() - cancelledAt).toBeLessThan(1000);
  });

  it('does not start the function once the activity is cancelled', async () => {
    const { env, beats } = activityEnv();
    env.cancel();
    let called = false;
    await expect(
      env.run(() =>
        heartbeating(async () => {
          called = true;
        }),
      ),
    ).rejects.toBeInstanceOf(CancelledFailure);
    expect(called).toBe(false);
    expect(beats()).toBe(0);
  });
});
