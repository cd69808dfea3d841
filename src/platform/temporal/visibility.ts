// Reading workflows from Temporal visibility, behind one small port: a list by query and a count.
// The ops gauges hold this port, never a Temporal Client.
import type { Client, WorkflowExecutionInfo } from '@temporalio/client';

/** A workflow as a visibility list shows it. */
export type ListedWorkflow = Pick<
  WorkflowExecutionInfo,
  'workflowId' | 'runId' | 'type' | 'status' | 'memo' | 'typedSearchAttributes' | 'startTime' | 'closeTime'
>;

export interface VisibilityPort {
  /** The workflows matching a visibility `query`, fetched `pageSize` at a time. */
  list(query: string, pageSize: number): AsyncIterable<ListedWorkflow>;
}

/** The port on a Client (which may forward to the process's current one across reconnections). */
export function visibilityPort(client: Client): VisibilityPort {
  return {
    list: (query, pageSize) => client.workflow.list({ query, pageSize }),
  };
}
