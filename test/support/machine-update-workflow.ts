// The machine update workflow tests' common parts: stubbed activities, UpdateMachine
// requests, and a harness (a real dev server, a real worker per test, the real
// UpdateMachine handler over HTTPS) that each test file sets up once.
import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach } from '@jest/globals';
import { Context } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import type { NativeConnection, Worker } from '@temporalio/worker';
import { defaultHandlerName, HOOKS_API_VERSION } from '../../src/api/hooks/contract.ts';
import { hookPath } from '../../src/api/hooks/hook-route.ts';
import { createClusterUpgradeHandlers } from '../../src/api/handlers/lifecycle/cluster-upgrades.ts';
import { createInPlaceHandlers } from '../../src/api/handlers/in-place/machine-updates.ts';
import { requestChecksOff } from '../../src/api/handlers/request-checks.ts';
import type {
  MachineEventInput,
  MachineUpdateActivities,
  PreflightResult,
} from '../../src/activities/machine-update-types.ts';
import { withStepEvents } from '../../src/activities/step-events.ts';
import { specHash } from '../../src/domain/in-place.ts';
import type { BlockingPods } from '../../src/domain/node-pacing.ts';
import { machineUpdateWorkflowId, type MachineUpdateStatus } from '../../src/model/machine-update.ts';
import {
  cluster as capiClusterObject,
  infrastructureMachine,
  kubeadmConfig,
  machine,
} from '../../support/capi-fixtures.ts';
import { callHook } from '../../support/capi-client.ts';
import { startTestHookServer, type TestHookServer } from './hook-server.ts';
import { createTestWorker, testClient } from './temporal.ts';

export type Calls = Record<string, number>;

/** The last log line of the Job a stub stopNodeUpgrade stops. */
export const STOPPED_JOB_LOG_LINE = '[node-upgrade] installing kubeadm v1.33.1';

/**
 * Stubs. `drainBlocks` / `upgradeBlocks` make the activity heartbeat until cancelled;
 * `drainFails` / `upgradeFails` fail it (non-retryable) while they return a message.
 */
export function stubs(
  opts: {
    drainBlocks?: () => boolean;
    upgradeBlocks?: () => boolean;
    drainFails?: () => string | undefined;
    upgradeFails?: string | (() => string | undefined);
    /** What stopNodeUpgrade finds: the executor had started on the node (default), or not. */
    executorStarted?: boolean;
    /** Added to what preflight returns (e.g. a Cluster annotation's drain policy). */
    preflight?: Partial<PreflightResult>;
    /** What blockingPods finds on the node (default: none). */
    blockingPods?: () => BlockingPods;
  } = {},
): MachineUpdateActivities & { calls: Calls; seen: Record<string, unknown[]>; order: string[] } {
  const calls: Calls = {};
  const seen: Record<string, unknown[]> = {};
  /** Every call by name, in the order made (Events left out). */
  const order: string[] = [];
  const count = (name: string, arg?: unknown) => {
    calls[name] = (calls[name] ?? 0) + 1;
    (seen[name] ??= []).push(arg);
    if (name !== 'recordMachineEvent') order.push(name);
  };
  const blockUntilCancelled = async (blocks: () => boolean, name: string) => {
    const ctx = Context.current();
    try {
      while (blocks()) {
        ctx.heartbeat({ remaining: 1, summary: 'pod default/web-1 blocked by PDB default/web' });
        await ctx.sleep(100);
      }
    } catch (err) {
      count(`${name}Cancelled`);
      throw err;
    }
  };
  const upgradeFailure = () => (typeof opts.upgradeFails === 'function' ? opts.upgradeFails() : opts.upgradeFails);
  return {
    calls,
    seen,
    order,
    async preflight() {
      count('preflight');
      return { nodeName: 'worker-0', clusterName: 'prod-1', ...opts.preflight };
    },
    async blockingPods(input) {
      count('blockingPods', input);
      return opts.blockingPods?.() ?? { count: 0 };
    },
    async holdRemediation(input) {
      count('holdRemediation', input);
      return { message: 'skip-remediation set' };
    },
    async releaseRemediation(input) {
      count('releaseRemediation', input);
    },
    async cordon() {
      count('cordon');
      return { wasUnschedulable: false };
    },
    async uncordon() {
      count('uncordon');
    },
    async drain(input) {
      count('drain', input);
      const failure = opts.drainFails?.();
      if (failure) throw ApplicationFailure.nonRetryable(failure, 'DrainFailed');
      if (opts.drainBlocks) await blockUntilCancelled(opts.drainBlocks, 'drain');
      return { evicted: 3, deleted: 0, forceDeleted: 0, skipped: 1 };
    },
    async upgradeNode(input) {
      count('upgradeNode', input);
      const failure = upgradeFailure();
      if (failure) throw ApplicationFailure.nonRetryable(failure, 'NodeUpgradeFailed');
      if (opts.upgradeBlocks) await blockUntilCancelled(opts.upgradeBlocks, 'upgradeNode');
      return { message: 'node agent reported Succeeded' };
    },
    async waitForNodeVersion() {
      count('waitForNodeVersion');
    },
    async markNodeFailed() {
      count('markNodeFailed');
    },
    async setNodeUpdateFailed(input) {
      count('setNodeUpdateFailed', input);
    },
    async clearNodeUpdateFailed() {
      count('clearNodeUpdateFailed');
    },
    async cleanupNodeUpgrade(input) {
      count('cleanupNodeUpgrade', input);
    },
    async stopNodeUpgrade(input) {
      count('stopNodeUpgrade', input);
      if (opts.executorStarted === false)
        return { started: false, observed: `no Job kube-system/${input.requestName}` };
      return {
        started: true,
        observed: `Job kube-system/${input.requestName}: active 1, succeeded 0, failed 0`,
        log: { pod: `${input.requestName}-x7k2p`, lines: [STOPPED_JOB_LOG_LINE] },
      };
    },
    async recordMachineEvent(input) {
      count('recordMachineEvent', input);
    },
  };
}

/** The Events a run recorded on its Machine: reason and message, in order. */
export const eventsOf = (activities: { seen: Record<string, unknown[]> }) =>
  ((activities.seen.recordMachineEvent ?? []) as MachineEventInput[]).map((e) => `${e.type} ${e.reason}: ${e.message}`);

export function updateMachineRequest(
  version: string,
  name: string,
  files: { path: string; content: string }[] = [],
  settings?: Record<string, string>,
) {
  return {
    apiVersion: HOOKS_API_VERSION,
    kind: 'UpdateMachineRequest',
    ...(settings ? { settings } : {}),
    desired: {
      machine: machine(name, 'fleet-a', version),
      infrastructureMachine: infrastructureMachine(name),
      bootstrapConfig: kubeadmConfig(name, 'fleet-a', files),
    },
  };
}

export interface Answer {
  status: string;
  message?: string;
  retryAfterSeconds: number;
}

/** Registers the per-test setup and teardown; the getters read the current test's values. */
export function machineUpdateHarness() {
  let client: Client;
  let closeClient: () => Promise<void>;
  let hooks: TestHookServer;
  let taskQueue: string;
  let running: { worker: Worker; connection: NativeConnection; done: Promise<void> } | undefined;
  let name: string;

  const startWorker = async (activities: MachineUpdateActivities) => {
    // As createActivities does: the steps record the Events they carry (through the stub).
    const { worker, connection } = await createTestWorker({ taskQueue, activities: withStepEvents(activities) });
    running = { worker, connection, done: worker.run() };
  };
  const stopWorker = async () => {
    if (!running) return;
    running.worker.shutdown();
    await running.done;
    await running.connection.close();
    running = undefined;
  };
  const call = async (body: unknown) =>
    (
      await callHook<Answer>(hooks.url, hookPath('UpdateMachine', defaultHandlerName('UpdateMachine')), body, {
        ca: hooks.ca.certPem,
        timeout: '10s',
      })
    ).body;
  const pollUntilDone = async (body: unknown, timeoutMs = 30_000) => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const a = await call(body);
      if (a.status === 'Failure' || a.retryAfterSeconds === 0 || Date.now() > deadline) return a;
      await new Promise((r) => setTimeout(r, 150));
    }
  };
  const waitForStep = async (id: string, step: string) => {
    for (let i = 0; i < 100; i++) {
      // Not found yet: a queued update's run is started when it is let in.
      const s = (await client.workflow
        .getHandle(id)
        .query('status')
        .catch(() => undefined)) as MachineUpdateStatus | undefined;
      if (s?.step === step) return s;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`workflow never reached ${step}`);
  };
  const idFor = (body: ReturnType<typeof updateMachineRequest>) =>
    machineUpdateWorkflowId({ namespace: 'fleet-a', name }, specHash(body.desired));

  beforeEach(async () => {
    ({ client, close: closeClient } = await testClient());
    taskQueue = `machines-${randomUUID()}`;
    name = `m-${randomUUID().slice(0, 8)}`;
    hooks = await startTestHookServer({
      inPlace: createInPlaceHandlers({ client, taskQueue, checks: requestChecksOff }),
    });
  });
  afterEach(async () => {
    await stopWorker();
    await hooks.close();
    await closeClient();
  });

  return {
    get client() {
      return client;
    },
    get taskQueue() {
      return taskQueue;
    },
    get name() {
      return name;
    },
    startWorker,
    stopWorker,
    call,
    pollUntilDone,
    waitForStep,
    idFor,
  };
}

/** A request for a machine of a cluster of the test's own (the slots workflow is per cluster). */
export function clusterRequest(cluster: string, machineName: string, settings: Record<string, string> = {}) {
  const body = updateMachineRequest('v1.33.1', machineName, [], settings);
  body.desired.machine.spec.clusterName = cluster;
  body.desired.machine.metadata.labels['cluster.x-k8s.io/cluster-name'] = cluster;
  return body;
}

/** The real BeforeClusterDelete over HTTPS, as CAPI calls it for `cluster` (namespace fleet-a) being deleted. */
export async function beforeClusterDeleteCaller(client: Client, taskQueue: string, cluster: string) {
  const lifecycle = await startTestHookServer({
    lifecycle: createClusterUpgradeHandlers({ client, taskQueue, checks: requestChecksOff }),
  });
  const capiCluster = capiClusterObject(cluster, 'fleet-a');
  const deleting = {
    apiVersion: HOOKS_API_VERSION,
    kind: 'BeforeClusterDeleteRequest',
    cluster: { ...capiCluster, metadata: { ...capiCluster.metadata, deletionTimestamp: '2026-11-24T10:00:00Z' } },
  };
  const call = async () =>
    (
      await callHook<Answer>(
        lifecycle.url,
        hookPath('BeforeClusterDelete', defaultHandlerName('BeforeClusterDelete')),
        deleting,
        { ca: lifecycle.ca.certPem, timeout: '10s' },
      )
    ).body;
  return { call, close: () => lifecycle.close() };
}
