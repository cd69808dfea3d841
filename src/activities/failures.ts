// Activity failures with stable messages. An activity's failure message reaches CAPI conditions
// through the workflow, so it must be deterministic for a given cause and carry no internals
// (src/platform/kube/stable-error.ts says which). Every activity the worker registers throws
// through stableFailure: this is where the platform's plain errors become Temporal failures.
import { ApplicationFailure, CancelledFailure, CompleteAsyncError } from '@temporalio/common';
import { KubeError } from '../platform/kube/errors.ts';
import { stableError } from '../platform/kube/stable-error.ts';

/**
 * The ApplicationFailure an activity should fail with for `err`, its message stable for a given
 * cause. An ApplicationFailure is already deliberate and is returned as is.
 */
export function stableFailure(err: unknown): ApplicationFailure {
  if (err instanceof ApplicationFailure) return err;
  return applicationFailure(stableError(err));
}

/**
 * The ApplicationFailure of a deliberate failure (one raised on purpose: an ApplicationFailure,
 * or the platform's {@link KubeError}); undefined for anything else.
 */
export function deliberateFailure(err: unknown): ApplicationFailure | undefined {
  if (err instanceof ApplicationFailure) return err;
  return err instanceof KubeError ? applicationFailure(err) : undefined;
}

function applicationFailure(err: KubeError): ApplicationFailure {
  return err.retryable
    ? ApplicationFailure.retryable(err.message, err.type)
    : ApplicationFailure.nonRetryable(err.message, err.type);
}

/**
 * `activities` with every function's errors passed through {@link stableFailure}. Cancellation
 * (CancelledFailure, AbortError) and async completion pass untouched: the worker recognises them
 * by class to report the activity cancelled or pending rather than failed.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- any function shape; T keeps the caller's types
export function withStableFailures<T extends { [K in keyof T]: (...args: any[]) => Promise<unknown> }>(
  activities: T,
): T {
  const wrapped: Record<string, (...args: unknown[]) => Promise<unknown>> = {};
  for (const [name, fn] of Object.entries<(...args: unknown[]) => Promise<unknown>>(activities)) {
    wrapped[name] = async (...args: unknown[]) => {
      try {
        return await fn(...args);
      } catch (err) {
        if (passesThrough(err)) throw err;
        throw stableFailure(err);
      }
    };
    // The worker registers activities by key, but a readable name helps stack traces and logs.
    Object.defineProperty(wrapped[name], 'name', { value: name });
  }
  return wrapped as T;
}

function passesThrough(err: unknown): boolean {
  return (
    err instanceof CancelledFailure ||
    err instanceof CompleteAsyncError ||
    (err instanceof Error && err.name === 'AbortError')
  );
}
