// What a failed Kubernetes call means, in plain typed errors: the callers decide what to make of
// them (an activity wraps them into Temporal failures at its edge, the api into its answers), so
// nothing here knows Temporal.
import { ApiException } from '@kubernetes/client-node';

/**
 * A deliberate failure with a stable message: `type` names the cause (a Temporal failure type at
 * an activity's edge), `retryable` says whether trying again can help.
 */
export class KubeError extends Error {
  readonly type: string;
  readonly retryable: boolean;
  constructor(message: string, type: string, opts: { retryable: boolean }) {
    super(message);
    this.name = type;
    this.type = type;
    this.retryable = opts.retryable;
  }

  static nonRetryable(message: string, type: string): KubeError {
    return new KubeError(message, type, { retryable: false });
  }
}

/** HTTP status of a failed API call (client-node 2.x ApiException), undefined otherwise. */
export function statusCode(err: unknown): number | undefined {
  if (err instanceof ApiException) return err.code;
  if (typeof err === 'object' && err !== null && 'code' in err && typeof err.code === 'number') return err.code;
  return undefined;
}

export function isNotFound(err: unknown): boolean {
  return statusCode(err) === 404;
}

/**
 * A 404 for the named object itself: the API server's Status names it in `details.name`. A 404
 * without it is a kind the server does not serve (a missing CRD or version): that says nothing
 * about whether the object exists.
 */
export function isObjectNotFound(err: unknown, name: string): boolean {
  if (!isNotFound(err) || !(err instanceof ApiException)) return false;
  const raw: unknown = err.body;
  let status: unknown = raw;
  if (typeof raw === 'string') {
    try {
      status = JSON.parse(raw);
    } catch {
      return false;
    }
  }
  const details = (status as { details?: { name?: unknown } } | null)?.details;
  return details?.name === name;
}

export function isConflict(err: unknown): boolean {
  return statusCode(err) === 409;
}

/** 429: e.g. an eviction refused because of a PodDisruptionBudget. */
export function isTooManyRequests(err: unknown): boolean {
  return statusCode(err) === 429;
}
