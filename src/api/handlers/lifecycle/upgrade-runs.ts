// How the api reads cluster upgrade runs, with no history replay and no worker:
// a describe of one run (memo, status, whether its workflow task is a retry), a
// List of the polled ids that are running, and, for a running run whose
// workflow task is being retried, whether the last one failed (a bug in the
// workflow) or only timed out (a worker crash). upgrade-views.ts decides which
// read a poll takes; the reads are here.
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import proto from '@temporalio/proto';
import { CLUSTER_UPGRADE_MEMO_KEY } from '../../../model/cluster-upgrade.ts';
import { workflowTypes } from '../../../model/workflow-types.ts';
import { BackendUnavailable } from '../../hooks/errors.ts';
import type { HookContext } from '../../hooks/hook-route.ts';
import type { ListedRun, RunView } from './upgrade-views.ts';
import { clusterUpgradeMemo, readMemo } from '../../../platform/temporal/memo.ts';

// A CommonJS package: under native ESM only its default export is visible.
const EventType = proto.temporal.api.enums.v1.EventType;

/** A read shared by many calls gets its own deadline, never one caller's (nor its abort). */
const SHARED_READ_TIMEOUT_MS = 10_000;

function shared<T>(client: Client, fn: () => Promise<T>): Promise<T> {
  return client.connection.withDeadline(Date.now() + SHARED_READ_TIMEOUT_MS, () =>
    client.connection.withAbortSignal(new AbortController().signal, fn),
  );
}

/** A describe of the upgrade's current run; undefined when there is no such workflow. */
export function describeUpgradeRun(client: Client): (workflowId: string) => Promise<RunView | undefined> {
  return async (workflowId) => {
    try {
      const d = await shared(client, () => client.workflow.getHandle(workflowId).describe());
      const memo = readMemo(clusterUpgradeMemo, d.memo);
      return {
        runId: d.runId,
        running: d.status.name === 'RUNNING',
        status: d.status.name,
        ...(memo ? { memo } : {}),
        workflowTaskRetrying: (d.raw.pendingWorkflowTask?.attempt ?? 1) > 1,
      };
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) return undefined;
      throw err;
    }
  };
}

/**
 * The running upgrades among `workflowIds`: one List serves the polls of many calls. Only the
 * polled ids (the views pass ids a quoted literal holds as they are), so its cost follows the polls.
 */
export function listRunningUpgrades(client: Client): (workflowIds: readonly string[]) => AsyncIterable<ListedRun> {
  return async function* (workflowIds) {
    const ids = workflowIds.map((id) => `"${id}"`).join(', ');
    const query = `WorkflowType = "${workflowTypes.clusterUpgrade}" AND ExecutionStatus = "Running" AND WorkflowId IN (${ids})`;
    const runs = await shared(client, async () => {
      const all: ListedRun[] = [];
      // One more than can match: a full page would make the client ask for a next, empty one.
      for await (const wf of client.workflow.list({ query, pageSize: workflowIds.length + 1 }))
        all.push({ workflowId: wf.workflowId, runId: wf.runId, memo: wf.memo?.[CLUSTER_UPGRADE_MEMO_KEY] });
      return all;
    });
    yield* runs;
  };
}

/** A retried workflow task after a failed one (not a timeout, as after a worker crash) is a bug in the workflow. */
async function workflowTaskFailed(client: Client, workflowId: string, runId: string): Promise<boolean> {
  const res = await client.workflowService.getWorkflowExecutionHistoryReverse({
    namespace: client.options.namespace,
    execution: { workflowId, runId },
    maximumPageSize: 20,
  });
  for (const event of res.history?.events ?? []) {
    if (event.eventType === EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED) return true;
    if (
      event.eventType === EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED ||
      event.eventType === EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT
    )
      return false;
  }
  return false;
}

/** The internal-error message when the run is running and its workflow task keeps failing, else undefined. */
export async function internalErrorOf(
  client: Client,
  workflowId: string,
  run: RunView | undefined,
): Promise<string | undefined> {
  return run?.running && run.workflowTaskRetrying && (await workflowTaskFailed(client, workflowId, run.runId))
    ? `internal error in workflow ${workflowId}, see run ${run.runId}`
    : undefined;
}

/** Waits for `p` no longer than the hook may: a shared read outlives the calls that joined it. */
export async function withinHookDeadline<T>(p: Promise<T>, ctx: Pick<HookContext, 'deadline' | 'signal'>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  let onAbort: (() => void) | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<never>((_, reject) => {
        // Unavailable, whatever the clock reads: a loaded event loop fires this timer before
        // Date.now() reaches the deadline, and a plain Error then became "internal error" for CAPI.
        const give = () => reject(new BackendUnavailable('the hook deadline passed while reading the upgrade'));
        timer = setTimeout(give, Math.max(0, ctx.deadline - Date.now()));
        onAbort = give;
        ctx.signal.addEventListener('abort', onAbort, { once: true });
      }),
    ]);
  } finally {
    clearTimeout(timer);
    if (onAbort) ctx.signal.removeEventListener('abort', onAbort);
  }
}
