// Load shapes: a closed loop (the hook benchmarks), an open loop at a fixed
// rate, a bounded-concurrency "for each", and waiting for the machine to go
// quiet between measurements.
import { cpuSecondsOf } from './proc.ts';

export interface Phase {
  requests: number;
  errors: number;
  /** Error message → count, to print a few samples. */
  errorSamples: Map<string, number>;
  /** Milliseconds, successful requests only, in completion order. */
  latencies: number[];
  seconds: number;
}

/**
 * A closed loop: `concurrency` workers, each sending its next request as soon
 * as the last one is answered, until `seconds` have passed or `maxRequests`
 * were sent (whichever comes first), so a run is bounded in time and count.
 */
export async function closedLoop(
  concurrency: number,
  seconds: number,
  maxRequests: number,
  send: () => Promise<unknown>,
): Promise<Phase> {
  const phase: Phase = { requests: 0, errors: 0, errorSamples: new Map(), latencies: [], seconds: 0 };
  const start = process.hrtime.bigint();
  const deadline = start + BigInt(Math.round(seconds * 1e9));
  let issued = 0;
  const worker = async () => {
    while (issued < maxRequests && process.hrtime.bigint() < deadline) {
      issued++;
      const t0 = process.hrtime.bigint();
      try {
        await send();
        phase.latencies.push(Number(process.hrtime.bigint() - t0) / 1e6);
      } catch (err) {
        phase.errors++;
        const message = err instanceof Error ? err.message : String(err);
        phase.errorSamples.set(message, (phase.errorSamples.get(message) ?? 0) + 1);
      }
      phase.requests++;
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  phase.seconds = Number(process.hrtime.bigint() - start) / 1e9;
  return phase;
}

export const errorText = (err: unknown) => (err instanceof Error ? err.message : String(err));

/**
 * An open loop: request i is sent at start + i / rate whether or not earlier ones were
 * answered, as CAPI's controllers call on their own schedule. Latency runs from the scheduled
 * time, not the actual send, so a server (or a driver) that falls behind shows as latency
 * instead of quietly lowering the rate (coordinated omission). `lagMs` is how late the driver
 * itself sent at worst: large values mean the client, not the server, was the bottleneck.
 */
export async function openLoop(
  rate: number,
  seconds: number,
  send: (i: number) => Promise<unknown>,
): Promise<Phase & { lagMs: number }> {
  const total = Math.max(1, Math.round(rate * seconds));
  const phase: Phase & { lagMs: number } = {
    requests: 0,
    errors: 0,
    errorSamples: new Map(),
    latencies: [],
    seconds: 0,
    lagMs: 0,
  };
  const start = performance.now();
  const inFlight: Promise<void>[] = [];
  let next = 0;
  const fire = (i: number, due: number) => {
    phase.lagMs = Math.max(phase.lagMs, performance.now() - due);
    inFlight.push(
      send(i).then(
        () => void phase.latencies.push(performance.now() - due),
        (err: unknown) => {
          phase.errors++;
          const message = errorText(err);
          phase.errorSamples.set(message, (phase.errorSamples.get(message) ?? 0) + 1);
        },
      ),
    );
    phase.requests++;
  };
  while (next < total) {
    const now = performance.now();
    // Everything due by now goes out in this turn (timers fire late under load).
    while (next < total && start + (next * 1000) / rate <= now) {
      fire(next, start + (next * 1000) / rate);
      next++;
    }
    if (next < total) {
      const wait = start + (next * 1000) / rate - performance.now();
      await new Promise((r) => setTimeout(r, Math.max(0, wait)));
    }
  }
  await Promise.all(inFlight);
  phase.seconds = (performance.now() - start) / 1000;
  return phase;
}

/** Runs `fn` on every item, at most `limit` at once. */
export async function forEachLimit<T>(items: readonly T[], limit: number, fn: (item: T) => Promise<void>) {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await fn(items[next++]!);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

/**
 * Waits until the given processes together use less than `maxCores` of CPU over a 2 s
 * window: work one measurement leaves behind (Event activities retrying, background records)
 * must not be billed to the next. Gives up after `timeoutMs` (quiet: false).
 */
export async function waitQuiet(
  pids: number[],
  maxCores: number,
  timeoutMs: number,
): Promise<{ seconds: number; quiet: boolean }> {
  const started = performance.now();
  const total = () => pids.reduce((sum, pid) => sum + (cpuSecondsOf(pid) || 0), 0);
  for (;;) {
    const before = total();
    await new Promise((r) => setTimeout(r, 2_000));
    const cores = (total() - before) / 2;
    const waited = (performance.now() - started) / 1000;
    if (cores < maxCores || waited * 1000 >= timeoutMs) return { seconds: waited, quiet: cores < maxCores };
  }
}

/**
 * Clients driven as CAPI drives a blocking hook: client i calls, reads the answer's
 * `retryAfterSeconds` and calls again no sooner than that (CAPI's hook cache), until `seconds`
 * have passed. Client i's first call is due at `firstDueMs(i)` after the start (spread over the
 * interval it was last told, as in CAPI's steady state). Latency runs from the due time, as in
 * openLoop; `retryAfter` counts the answers by their retryAfterSeconds.
 */
export async function capiLoop(
  clients: number,
  seconds: number,
  firstDueMs: (i: number) => number,
  send: (i: number) => Promise<number>,
): Promise<Phase & { lagMs: number; retryAfter: Map<number, number> }> {
  const phase = {
    requests: 0,
    errors: 0,
    errorSamples: new Map<string, number>(),
    latencies: [] as number[],
    seconds: 0,
    lagMs: 0,
    retryAfter: new Map<number, number>(),
  };
  const start = performance.now();
  const end = start + seconds * 1000;
  const client = async (i: number) => {
    for (let due = start + firstDueMs(i); due < end;) {
      const wait = due - performance.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      phase.lagMs = Math.max(phase.lagMs, performance.now() - due);
      phase.requests++;
      let retryAfter = 10;
      try {
        retryAfter = await send(i);
        phase.latencies.push(performance.now() - due);
        phase.retryAfter.set(retryAfter, (phase.retryAfter.get(retryAfter) ?? 0) + 1);
      } catch (err) {
        phase.errors++;
        const message = errorText(err);
        phase.errorSamples.set(message, (phase.errorSamples.get(message) ?? 0) + 1);
      }
      // CAPI calls again once the answer's retryAfterSeconds has passed since it came.
      due = performance.now() + Math.max(1, retryAfter) * 1000;
    }
  };
  await Promise.all(Array.from({ length: clients }, (_, i) => client(i)));
  phase.seconds = (performance.now() - start) / 1000;
  return phase;
}
