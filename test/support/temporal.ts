// Test-file helpers: a client on the run's dev server and a real Worker on a
// task queue of the test's own, running the prebuilt bundle with the
// activities the test passes (stubs are the normal practice in workflow tests).
import { randomUUID } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, Runtime, Worker, DefaultLogger, type WorkerOptions } from '@temporalio/worker';
import { requireEnv } from './services.ts';

let runtimeInstalled = false;
function quietRuntime(): void {
  if (runtimeInstalled) return;
  runtimeInstalled = true;
  try {
    Runtime.install({ logger: new DefaultLogger('WARN') });
  } catch {
    // Already installed by another module in this registry.
  }
}

export async function testClient(): Promise<{ client: Client; close: () => Promise<void> }> {
  const connection = await Connection.connect({ address: requireEnv('TEMPORAL_ADDRESS') });
  const client = new Client({ connection, namespace: requireEnv('TEMPORAL_NAMESPACE') });
  return { client, close: () => connection.close() };
}

export function uniqueTaskQueue(prefix: string): string {
  return `${prefix}-${randomUUID()}`;
}

/** A worker on the run's prebuilt bundle (or the bundle `options` names). */
export async function createTestWorker(
  options: Omit<WorkerOptions, 'connection' | 'namespace' | 'workflowsPath'>,
): Promise<{ worker: Worker; connection: NativeConnection }> {
  quietRuntime();
  const connection = await NativeConnection.connect({ address: requireEnv('TEMPORAL_ADDRESS') });
  const worker = await Worker.create({
    connection,
    namespace: requireEnv('TEMPORAL_NAMESPACE'),
    workflowBundle: { codePath: requireEnv('TEST_WORKFLOW_BUNDLE') },
    ...options,
  });
  return { worker, connection };
}

/** A worker polling in the background until `stop()`, which shuts it down and closes its connection. */
export async function startTestWorker(
  options: Parameters<typeof createTestWorker>[0],
): Promise<{ worker: Worker; stop: () => Promise<void> }> {
  const { worker, connection } = await createTestWorker(options);
  const done = worker.run();
  return {
    worker,
    stop: async () => {
      worker.shutdown();
      await done;
      await connection.close();
    },
  };
}

/** Runs `fn` while the worker polls, then shuts the worker down and closes its connection. */
export async function withWorker<T>(
  options: Parameters<typeof createTestWorker>[0],
  fn: (worker: Worker) => Promise<T>,
): Promise<T> {
  const { worker, connection } = await createTestWorker(options);
  try {
    return await worker.runUntil(fn(worker));
  } finally {
    await connection.close();
  }
}
