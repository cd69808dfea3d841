// What activities do to other workflows, behind one small port: signal a workflow by its
// signal's definition (src/workflows/messages.ts; never by a name spelled here or by the
// caller) and read a workflow's status and memo. A workflow that does not exist is an answer,
// not an error. The activities hold this port, never a Temporal Client.
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import type { SignalDefinition } from '@temporalio/common';
import type { ReadinessReport } from '../../domain/readiness.ts';
import type { ReadinessInput } from '../../model/readiness.ts';
import { executeReadiness } from './readiness-run.ts';

/** A workflow as `describe` sees it: its run's status name (RUNNING, COMPLETED, …) and its memo map. */
export interface WorkflowSummary {
  status: string;
  memo: Record<string, unknown> | undefined;
}

export interface WorkflowPort {
  /** Sends `signal` to the workflow's running run: `not-found` when no workflow has the id. */
  signal<Args extends unknown[]>(
    workflowId: string,
    signal: SignalDefinition<Args>,
    ...args: Args
  ): Promise<'sent' | 'not-found'>;
  /** The workflow's latest run; undefined when no workflow has the id. */
  describe(workflowId: string): Promise<WorkflowSummary | undefined>;
  /** Runs a readiness check on `taskQueue` (joining one that runs for the same cluster and target); its report. */
  readiness(input: ReadinessInput, taskQueue: string): Promise<ReadinessReport>;
}

/** The port on a Client; `client` may be a getter (the process replaces its connection on credential rotation). */
export function workflowPort(client: Client | (() => Client)): WorkflowPort {
  const current = typeof client === 'function' ? client : () => client;
  return {
    async signal(workflowId, signal, ...args) {
      try {
        await current()
          .workflow.getHandle(workflowId)
          .signal(signal, ...args);
        return 'sent';
      } catch (err) {
        if (err instanceof WorkflowNotFoundError) return 'not-found';
        throw err;
      }
    },
    async describe(workflowId) {
      try {
        const d = await current().workflow.getHandle(workflowId).describe();
        return { status: d.status.name, memo: d.memo };
      } catch (err) {
        if (err instanceof WorkflowNotFoundError) return undefined;
        throw err;
      }
    },
    readiness: (input, taskQueue) => executeReadiness(current(), taskQueue, input),
  };
}
