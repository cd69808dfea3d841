// End to end on a bad day, with nothing stubbed: HTTPS hook calls shaped like
// CAPI's, the real Temporal client and dev server, a real worker running the
// real activities against the test bed's management API server, and a Cluster
// whose workload API server cannot be reached: one that accepts connections
// and never answers (a hung network path), one that refuses them.
import { createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Client } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { createClusterUpgradeHandlers } from '../../src/api/handlers/lifecycle/cluster-upgrades.ts';
import { requestChecksOff } from '../../src/api/handlers/request-checks.ts';
import { defaultHandlerName, HOOKS_API_VERSION, type HookName } from '../../src/api/hooks/contract.ts';
import { hookPath } from '../../src/api/hooks/hook-route.ts';
import { clusterUpgradeWorkflowId } from '../../src/model/cluster-upgrade.ts';
import { callHook } from '../../support/capi-client.ts';
import { cluster as clusterRequest } from '../../support/capi-fixtures.ts';
import {
  capiCluster,
  createCapiObject,
  createNamespace,
  managementApi,
  testGroup,
  workloadKubeconfigYaml,
} from '../../support/testbed-fixtures.ts';
import { startTestHookServer, type TestHookServer } from '../support/hook-server.ts';
import { temporalSignal } from '../support/temporal-cli.ts';
import { testClient, uniqueTaskQueue } from '../support/temporal.ts';
import { startTestbedWorker, type TestbedWorker } from '../support/testbed-worker.ts';
import { waitFor } from '../support/wait.ts';

const group = testGroup('unreach');
const ns = group.name;
const mg = managementApi();
const TARGET = 'v1.33.0';

/** A TCP server that accepts and never answers: requests hang until the caller gives up. */
async function blackHole(): Promise<{ server: Server; port: number; sockets: Set<Socket> }> {
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  return { server, port: typeof address === 'object' && address ? address.port : 0, sockets };
}

/** A port nothing listens on: connections are refused. */
async function closedPort(): Promise<number> {
  const { server, port } = await blackHole();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

function kubeconfigFor(server: string): string {
  return workloadKubeconfigYaml(server, { token: 'not-a-real-token' });
}

async function createUnreachableCluster(name: string, server: string): Promise<void> {
  await createCapiObject(mg.custom, capiCluster(name, ns, { version: 'v1.30.5' }));
  await mg.core.createNamespacedSecret({
    namespace: ns,
    body: {
      metadata: { name: `${name}-kubeconfig`, namespace: ns },
      type: 'cluster.x-k8s.io/secret',
      data: { value: Buffer.from(kubeconfigFor(server)).toString('base64') },
    },
  });
}

describe('a workload cluster that cannot be reached', () => {
  let client: Client;
  let closeClient: () => Promise<void>;
  let hooks: TestHookServer;
  let worker: TestbedWorker | undefined;
  let hole: Awaited<ReturnType<typeof blackHole>>;
  const taskQueue = uniqueTaskQueue('unreachable');

  const call = async (name: string, uid: string, hook: HookName, fields: Record<string, unknown>, annotations = {}) => {
    const c = clusterRequest(name, ns, TARGET);
    c.metadata.uid = uid;
    c.metadata.annotations = { ...c.metadata.annotations, ...annotations };
    const res = await callHook<{ status: string; message?: string; retryAfterSeconds: number }>(
      hooks.url,
      hookPath(hook, defaultHandlerName(hook)),
      { apiVersion: HOOKS_API_VERSION, kind: `${hook}Request`, cluster: c, ...fields },
      { ca: hooks.ca.certPem, timeout: '10s' },
    );
    return res.body;
  };
  const bcu = {
    fromKubernetesVersion: 'v1.30.5',
    toKubernetesVersion: TARGET,
    controlPlaneUpgrades: [{ version: 'v1.31.14' }, { version: 'v1.32.13' }, { version: TARGET }],
  };

  beforeAll(async () => {
    await createNamespace(mg.core, ns);
    hole = await blackHole();
    ({ client, close: closeClient } = await testClient());
    hooks = await startTestHookServer({
      lifecycle: createClusterUpgradeHandlers({ client, taskQueue, checks: requestChecksOff }),
    });
    worker = await startTestbedWorker(taskQueue);
  });
  afterAll(async () => {
    await worker?.stop();
    await hooks?.close();
    await closeClient?.();
    for (const s of hole?.sockets ?? []) s.destroy();
    hole?.server.close();
    await mg.core.deleteNamespace({ name: ns }).catch(() => undefined);
  });

  it('aborts a health check hung on the network within 10 s: every hook answers Failure and the activity is cancelled', async () => {
    const name = 'hung';
    const uid = '11111111-0000-4000-8000-000000000001';
    await createUnreachableCluster(name, `https://127.0.0.1:${hole.port}`);
    const workflowId = clusterUpgradeWorkflowId({ namespace: ns, name, uid });
    const waiting = await waitFor(
      () => call(name, uid, 'BeforeClusterUpgrade', bcu),
      (a) => a.message?.includes('running the pre-upgrade health check') ?? false,
    );
    expect(waiting).toMatchObject({ status: 'Success' });
    // The probe is in flight, stuck on a connection that never answers.
    await waitFor(
      async () => hole.sockets.size,
      (n) => n > 0,
    );

    const sent = Date.now();
    await temporalSignal(workflowId, 'abort', '{"reason":"workload cluster unreachable"}');
    const aborted = await waitFor(
      () => call(name, uid, 'BeforeClusterUpgrade', bcu),
      (a) => a.status === 'Failure',
      10_000,
    );
    const latencyMs = Date.now() - sent;
    const message = `upgrade to ${TARGET} aborted: workload cluster unreachable; signal "resume" to continue`;
    expect(aborted).toMatchObject({ status: 'Failure', message, retryAfterSeconds: 0 });
    expect(latencyMs).toBeLessThanOrEqual(10_000);
    console.log(`abort → Failure latency: ${latencyMs} ms`);
    for (const [hook, fields] of [
      ['BeforeControlPlaneUpgrade', { fromKubernetesVersion: 'v1.30.5', toKubernetesVersion: 'v1.31.14' }],
      ['AfterControlPlaneUpgrade', { kubernetesVersion: 'v1.31.14' }],
      ['BeforeWorkersUpgrade', { fromKubernetesVersion: 'v1.30.5', toKubernetesVersion: TARGET }],
      ['AfterWorkersUpgrade', { kubernetesVersion: TARGET }],
      ['AfterClusterUpgrade', { kubernetesVersion: TARGET }],
    ] as const)
      expect(await call(name, uid, hook, fields)).toMatchObject({ status: 'Failure', message });

    // The workflow asked the in-flight activity to stop, and the run is still open for `resume`.
    const events = (await client.workflow.getHandle(workflowId).fetchHistory()).events ?? [];
    const types = events.map((e) => e.eventType);
    expect(types).toContain(temporal.api.enums.v1.EventType.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED);
    expect((await client.workflow.getHandle(workflowId).describe()).status.name).toBe('RUNNING');
  });

  it('fails a refused health check with a stable message naming the cause, and keeps the run open', async () => {
    const name = 'refused';
    const uid = '11111111-0000-4000-8000-000000000002';
    const port = await closedPort();
    await createUnreachableCluster(name, `https://127.0.0.1:${port}`);
    const annotations = { 'upgrades.capi-orchestrator.io/health-check-timeout': '4s' };
    const failed = await waitFor(
      () => call(name, uid, 'BeforeClusterUpgrade', bcu, annotations),
      (a) => a.status === 'Failure',
      30_000,
    );
    expect(failed.message).toBe(
      `upgrade to ${TARGET} failed at BeforeClusterUpgrade ${TARGET}: pre-upgrade health check did not pass within 4s: ` +
        `the health check could not run: cannot reach the Kubernetes API at 127.0.0.1:${port}: ECONNREFUSED; ` +
        'fix the cause, then signal "retry" to run the step again',
    );
    expect(failed.message).not.toMatch(/date|HTTP\/|headers|at .*\.ts/i);
    expect(await call(name, uid, 'BeforeClusterUpgrade', bcu, annotations)).toEqual(failed);
    const workflowId = clusterUpgradeWorkflowId({ namespace: ns, name, uid });
    expect((await client.workflow.getHandle(workflowId).describe()).status.name).toBe('RUNNING');
  });
});
