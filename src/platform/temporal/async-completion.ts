// Completing activities from outside them (an activity that returned with
// CompleteAsyncError is finished later by whoever holds its task token): the
// part of @temporalio/client's AsyncCompletionClient the node upgrade watch
// uses, and what its heartbeat's refusals mean. An AsyncCompletionClient is one.
import { ActivityCancelledError, ActivityNotFoundError } from '@temporalio/client';

export interface AsyncCompletions {
  complete(taskToken: Uint8Array, result: unknown): Promise<void>;
  fail(taskToken: Uint8Array, failure: unknown): Promise<void>;
  reportCancellation(taskToken: Uint8Array, details?: unknown): Promise<void>;
  heartbeat(taskToken: Uint8Array, details?: unknown): Promise<void>;
}

/**
 * Why a heartbeat was refused: `cancelled` (the workflow cancelled the activity: report the
 * cancellation), `gone` (the activity ended otherwise, e.g. timed out server-side), or undefined
 * (any other error, such as Temporal unreachable).
 */
export function heartbeatRefusal(err: unknown): 'cancelled' | 'gone' | undefined {
  if (err instanceof ActivityCancelledError) return 'cancelled';
  if (err instanceof ActivityNotFoundError) return 'gone';
  return undefined;
}
