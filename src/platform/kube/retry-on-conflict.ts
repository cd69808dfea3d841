// Read-modify-write against the API server: a write conditioned on what was read may lose a race
// with another writer, and then the whole read-modify-write runs again.
import { statusCode } from './errors.ts';

/** 422 from a failed JSON patch `test` operation, or 409 from a stale resourceVersion. */
export function isPreconditionFailed(err: unknown): boolean {
  const code = statusCode(err);
  return code === 409 || code === 422;
}

/**
 * A write conditioned on what was read lost a race: read again and retry, up to `attempts` tries.
 * The one rule for every read-modify-write here: 409 (a stale resourceVersion) or 422 (a JSON
 * patch's `test` operation failed).
 */
export async function retryOnConflict<T>(fn: () => Promise<T>, attempts = 5): Promise<T> {
  for (let i = 1; ; i++) {
    try {
      return await fn();
    } catch (err) {
      if (i >= attempts || !isPreconditionFailed(err)) throw err;
    }
  }
}
