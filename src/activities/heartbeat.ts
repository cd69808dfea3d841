// Heartbeats for activities that make a few Kubernetes calls. The workflow
// gives them a heartbeat timeout and cancels them on abort; Temporal delivers
// a cancellation only to an activity that heartbeats, and a call to an
// unreachable API server can hang far longer than the abort should take.
import { Context } from '@temporalio/activity';
import { withReadScope } from '../platform/kube/read-scope.ts';

/**
 * Runs `fn`, heartbeating at once and every `everyMs` while it runs. Inside an activity it
 * rejects with the activity's CancelledFailure as soon as the activity is cancelled, without
 * waiting for `fn` (which is left to settle on its own; the activities are idempotent). Outside
 * an activity (tests, tools) it just runs `fn`.
 */
export async function heartbeating<T>(fn: () => Promise<T>, everyMs = 3000): Promise<T> {
  const ctx = activityContext();
  if (!ctx) return await fn();
  // Already cancelled: do not start work nobody waits for.
  if (ctx.cancellationSignal.aborted) return await ctx.cancelled;
  ctx.heartbeat();
  const timer = setInterval(() => ctx.heartbeat(), everyMs);
  try {
    // A cancelled activity also closes its workload reads' sockets, not only stops waiting.
    return await Promise.race([withReadScope({ signal: ctx.cancellationSignal }, fn), ctx.cancelled]);
  } finally {
    clearInterval(timer);
  }
}

/** The current activity's Context; undefined outside an activity (Context.current() throws there). */
function activityContext(): Context | undefined {
  try {
    return Context.current();
  } catch {
    return undefined;
  }
}
