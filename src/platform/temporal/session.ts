// A short-lived connection for a tool (`make dev`'s self-check, the demo, the local Temporal
// stacks): opened, used through the ports, closed. The tools hold the session, never a Client.
import { Client, Connection } from '@temporalio/client';
import { visibilityPort, type VisibilityPort } from './visibility.ts';
import { workflowPort, type WorkflowPort } from './workflows.ts';

export interface TemporalSession {
  /** The connection, for the operator and Worker Deployment calls (search attributes, promotion). */
  connection: Connection;
  namespace: string;
  workflows: WorkflowPort;
  visibility: VisibilityPort;
  /** Starts a workflow and waits for its result. */
  execute(workflowType: string, options: { taskQueue: string; workflowId: string; args: unknown[] }): Promise<unknown>;
}

/** Connects to `address`, runs `use` with a session on `namespace`, and closes the connection. */
export async function withTemporal<T>(
  endpoint: { address: string; namespace: string; connectTimeoutMs?: number },
  use: (session: TemporalSession) => Promise<T>,
): Promise<T> {
  const connection = await Connection.connect({
    address: endpoint.address,
    ...(endpoint.connectTimeoutMs !== undefined ? { connectTimeout: endpoint.connectTimeoutMs } : {}),
  });
  try {
    const client = new Client({ connection, namespace: endpoint.namespace });
    return await use({
      connection,
      namespace: endpoint.namespace,
      workflows: workflowPort(client),
      visibility: visibilityPort(client),
      execute: (workflowType, options) => client.workflow.execute(workflowType, options),
    });
  } finally {
    await connection.close();
  }
}
