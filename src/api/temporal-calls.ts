// Every Temporal call a hook makes runs under the hook's own deadline (the
// TypeScript client sets none by default), and every way such a call can
// time out or lose the server means the same thing to CAPI: unavailable.
import {
  ServiceError,
  WorkflowNotFoundError,
  WorkflowUpdateFailedError,
  WorkflowUpdateRPCTimeoutOrCancelledError,
  type Client,
} from '@temporalio/client';
import { BackendUnavailable, HookFailure } from './errors.ts';
import type { HookContext } from './hook-route.ts';

/** gRPC status codes that mean "the server did not answer": CANCELLED, DEADLINE_EXCEEDED, UNAVAILABLE. */
const UNREACHABLE_CODES = new Set([1, 4, 14]);

export async function withinDeadline<T>(
  client: Client,
  ctx: Pick<HookContext, 'deadline' | 'signal'>,
  fn: () => Promise<T>,
): Promise<T> {
  try {
    return await client.connection.withDeadline(ctx.deadline, () => client.connection.withAbortSignal(ctx.signal, fn));
  } catch (err) {
    if (err instanceof HookFailure || err instanceof WorkflowNotFoundError || err instanceof WorkflowUpdateFailedError)
      throw err;
    const code = (err as { code?: unknown }).code;
    if (
      err instanceof ServiceError ||
      err instanceof WorkflowUpdateRPCTimeoutOrCancelledError ||
      (typeof code === 'number' && UNREACHABLE_CODES.has(code)) ||
      ctx.signal.aborted ||
      Date.now() >= ctx.deadline
    ) {
      throw new BackendUnavailable();
    }
    throw err;
  }
}
