// How long the code that reads a workload cluster will wait, and when it stops
// waiting, carried to the transport without threading it through every API
// call: an activity's cancellation, a hook's deadline. The transport closes the
// request's socket when the scope's signal aborts.
import { AsyncLocalStorage } from 'node:async_hooks';

export interface ReadScope {
  /** Aborted when the caller stops waiting (an activity cancelled, a hook answered). */
  signal?: AbortSignal;
  /** At most this long per request (the process's limit still applies). */
  timeoutMs?: number;
}

const storage = new AsyncLocalStorage<ReadScope>();

/** Runs `fn` with `scope` added to the current one (signals both apply, the shorter timeout wins). */
export async function withReadScope<T>(scope: ReadScope, fn: () => Promise<T>): Promise<T> {
  const outer = storage.getStore();
  const signals = [outer?.signal, scope.signal].filter((s): s is AbortSignal => s !== undefined);
  const timeouts = [outer?.timeoutMs, scope.timeoutMs].filter((t): t is number => t !== undefined);
  const merged: ReadScope = {
    ...(signals.length > 0 ? { signal: signals.length === 1 ? signals[0] : AbortSignal.any(signals) } : {}),
    ...(timeouts.length > 0 ? { timeoutMs: Math.min(...timeouts) } : {}),
  };
  return await storage.run(merged, fn);
}

export function currentReadScope(): ReadScope | undefined {
  return storage.getStore();
}
