// Polling helpers for tests that watch state converge (never a fixed sleep).
import type { Client } from '@temporalio/client';
import { temporal } from '@temporalio/proto';

/** Calls `fn` until `ok` holds or `timeoutMs` passed; returns the last value either way. */
export async function waitFor<T>(fn: () => Promise<T>, ok: (v: T) => boolean, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (ok(v) || Date.now() > deadline) return v;
    await new Promise((r) => setTimeout(r, 150));
  }
}

/**
 * A workflow's history length once nothing is in flight: no activity (a Kubernetes Event being
 * recorded beside the work) and the workflow task that follows the last event completed.
 */
export async function settledHistory(client: Client, workflowId: string): Promise<number> {
  const handle = client.workflow.getHandle(workflowId);
  const settled = await waitFor(
    async () => {
      const events = (await handle.fetchHistory()).events ?? [];
      const { raw } = await handle.describe();
      const pending = (raw.pendingActivities?.length ?? 0) + (raw.pendingWorkflowTask ? 1 : 0);
      return { length: events.length, last: events.at(-1)?.eventType, pending };
    },
    (h) => h.pending === 0 && h.last === temporal.api.enums.v1.EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED,
  );
  return settled.length;
}

/** Resolves once `ok()` holds; rejects naming `what` after `ms`. */
export async function until(ok: () => boolean, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
