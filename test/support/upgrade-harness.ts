// Workflow-tier harness for cluster upgrades: the real HTTPS hook server
// backed by the real Temporal client, a real Worker with stubbed activities
// on a task queue of the test's own, and a CAPI-like poller.
import { randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import type { NativeConnection, Worker } from '@temporalio/worker';
import { defaultHandlerName, HOOKS_API_VERSION, type HookName } from '../../src/api/contract.ts';
import { createClusterUpgradeHandlers } from '../../src/api/cluster-upgrades.ts';
import { hookPath } from '../../src/api/hook-route.ts';
import type { HealthCheckInput, HealthReport, UpgradeActivities } from '../../src/activities/upgrade-types.ts';
import type { ClusterRef, ReservedCapacity } from '../../src/workflows/messages.ts';
import { callHook } from './capi-client.ts';
import { cluster } from './capi-fixtures.ts';
import { startTestHookServer, type TestHookServer } from './hook-server.ts';
import { createTestWorker, testClient } from './temporal.ts';

export interface StubUpgradeActivities extends UpgradeActivities {
  health: (input: HealthCheckInput) => HealthReport;
  calls: { health: HealthCheckInput[]; reserve: number; release: number };
}

export function stubUpgradeActivities(): StubUpgradeActivities {
  const calls = { health: [] as HealthCheckInput[], reserve: 0, release: 0 };
  let reserved: ReservedCapacity[] = [];
  const stub: StubUpgradeActivities = {
    calls,
    health: () => ({ healthy: true, summary: 'all checks passed', findings: [], warnings: [] }),
    async checkClusterHealth(input) {
      calls.health.push(input);
      return stub.health(input);
    },
    async reserveCapacity(input) {
      calls.reserve++;
      reserved = [{ machineDeployment: 'md-0', originalReplicas: 2, reservedReplicas: 2 + input.count }];
      return reserved;
    },
    async releaseCapacity() {
      calls.release++;
      const was = reserved;
      reserved = [];
      return was;
    },
  };
  return stub;
}

export interface HookAnswer {
  statusCode: number;
  status: 'Success' | 'Failure';
  message?: string;
  retryAfterSeconds: number;
}

export interface UpgradeHarness {
  client: Client;
  taskQueue: string;
  hooks: TestHookServer;
  activities: StubUpgradeActivities;
  ref: ClusterRef;
  startWorker(): Promise<void>;
  stopWorker(): Promise<void>;
  call(
    hook: HookName,
    fields: Record<string, unknown>,
    opts?: { annotations?: Record<string, string>; timeout?: string; topologyVersion?: string },
  ): Promise<HookAnswer>;
  /** Calls like CAPI until the gate opens (retryAfterSeconds 0) or fails; returns the last answer. */
  pollUntilDone(
    hook: HookName,
    fields: Record<string, unknown>,
    opts?: { annotations?: Record<string, string>; timeoutMs?: number; topologyVersion?: string },
  ): Promise<HookAnswer>;
  close(): Promise<void>;
}

export async function startUpgradeHarness(options: { env?: Record<string, string> } = {}): Promise<UpgradeHarness> {
  const { client, close: closeClient } = await testClient();
  const taskQueue = `upgrades-${randomUUID()}`;
  const ref = { namespace: `ns-${randomUUID().slice(0, 8)}`, name: 'prod-1' };
  const hooks = await startTestHookServer({
    ...(options.env ? { env: options.env } : {}),
    server: { unavailableRetryAfterSeconds: 15 },
    lifecycle: createClusterUpgradeHandlers({ client, taskQueue }),
  });
  const activities = stubUpgradeActivities();
  let running: { worker: Worker; connection: NativeConnection; done: Promise<void> } | undefined;

  const harness: UpgradeHarness = {
    client,
    taskQueue,
    hooks,
    activities,
    ref,
    async startWorker() {
      const { worker, connection } = await createTestWorker({ taskQueue, activities });
      running = { worker, connection, done: worker.run() };
    },
    async stopWorker() {
      if (!running) return;
      running.worker.shutdown();
      await running.done;
      await running.connection.close();
      running = undefined;
    },
    async call(hook, fields, opts = {}) {
      const c = cluster(ref.name, ref.namespace, opts.topologyVersion ?? 'v1.33.0');
      if (opts.annotations) c.metadata.annotations = { ...c.metadata.annotations, ...opts.annotations };
      const body = { apiVersion: HOOKS_API_VERSION, kind: `${hook}Request`, cluster: c, ...fields };
      const res = await callHook<HookAnswer>(hooks.url, hookPath(hook, defaultHandlerName(hook)), body, {
        ca: hooks.ca.certPem,
        timeout: opts.timeout ?? '10s',
      });
      return { ...res.body, statusCode: res.statusCode };
    },
    async pollUntilDone(hook, fields, opts = {}) {
      const deadline = Date.now() + (opts.timeoutMs ?? 30_000);
      for (;;) {
        const answer = await harness.call(hook, fields, opts);
        if (answer.status === 'Failure' || answer.retryAfterSeconds === 0 || Date.now() > deadline) return answer;
        await new Promise((r) => setTimeout(r, 150));
      }
    },
    async close() {
      await harness.stopWorker();
      await hooks.close();
      await closeClient();
    },
  };
  return harness;
}

export const steps = (...versions: string[]) => versions.map((version) => ({ version }));
