// Read-modify-write against the API server: a write conditioned on what was read may lose a race
// with another writer, and then the whole read-modify-write runs again.
import { statusCode } from './errors.ts';

/** 422 from a failed JSON patch `test` operation, or 409 from a stale resourceVersion. */
export function isPreconditionFailed(err: unknown): boolean {
  const code = statusCode(err);
  return code === 409 || code === 422;
}

/**
 * A write conditioned on what was read lost a race: read again and retry, up to `attempts` tries,
 * then the last error. One rule for every read-modify-write, 409 or 422, because the writers
 * condition their writes both ways: the cordon, remediation and capacity merge patches carry the
 * resourceVersion they read (409 when stale), the capacity and fleet JSON patches `test` the
 * values they read (422 when changed). A 422 that is no race (a validation refusal) fails the
 * same way on every try: the extra tries cost reads, never a write made on a stale read, since
 * each try reads before it writes.
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
