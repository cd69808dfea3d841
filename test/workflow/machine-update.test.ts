// In-place machine updates driven by UpdateMachine over HTTPS, on the real
// dev server with a real worker; activities stubbed.
import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { Context } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import type { NativeConnection, Worker } from '@temporalio/worker';
import { defaultHandlerName, HOOKS_API_VERSION } from '../../src/api/contract.ts';
import { hookPath } from '../../src/api/hook-route.ts';
import { createInPlaceHandlers } from '../../src/api/machine-updates.ts';
import type { MachineUpdateActivities } from '../../src/activities/machine-update-types.ts';
import { specHash } from '../../src/domain/in-place.ts';
import { machineUpdateWorkflowId, type MachineUpdateStatus } from '../../src/model/machine-update.ts';
import { abortSignal, skipDrainSignal } from '../../src/workflows/messages.ts';
import { callHook } from '../support/capi-client.ts';
import { recordHistoryIfAsked } from '../support/record-history.ts';
import { infrastructureMachine, kubeadmConfig, machine } from '../support/capi-fixtures.ts';
import { startTestHookServer, type TestHookServer } from '../support/hook-server.ts';
import { createTestWorker, testClient } from '../support/temporal.ts';

type Calls = Record<string, number>;

/** Stubs; `drainBlocks` makes drain heartbeat until cancelled. */
function stubs(
  opts: { drainBlocks?: () => boolean; upgradeFails?: string } = {},
): MachineUpdateActivities & { calls: Calls } {
  const calls: Calls = {};
  const count = (name: string) => (calls[name] = (calls[name] ?? 0) + 1);
  return {
    calls,
    async preflight() {
      count('preflight');
      return { nodeName: 'worker-0', clusterName: 'prod-1' };
    },
    async cordon() {
      count('cordon');
      return { wasUnschedulable: false };
    },
    async uncordon() {
      count('uncordon');
    },
    async drain() {
      count('drain');
      const ctx = Context.current();
      while (opts.drainBlocks?.()) {
        ctx.heartbeat({ remaining: 1, summary: 'pod default/web-1 blocked by PDB default/web' });
        await ctx.sleep(100);
      }
      return { evicted: 3, deleted: 0, forceDeleted: 0, skipped: 1 };
    },
    async upgradeNode() {
      count('upgradeNode');
      if (opts.upgradeFails) throw ApplicationFailure.nonRetryable(opts.upgradeFails, 'NodeUpgradeFailed');
      return { message: 'node agent reported Succeeded' };
    },
    async waitForNodeVersion() {
      count('waitForNodeVersion');
    },
    async markNodeFailed() {
      count('markNodeFailed');
    },
  };
}

function updateMachineRequest(version: string, name: string, files: { path: string; content: string }[] = []) {
  return {
    apiVersion: HOOKS_API_VERSION,
    kind: 'UpdateMachineRequest',
    desired: {
      machine: machine(name, 'fleet-a', version),
      infrastructureMachine: infrastructureMachine(name),
      bootstrapConfig: kubeadmConfig(name, 'fleet-a', files),
    },
  };
}

interface Answer {
  status: string;
  message?: string;
  retryAfterSeconds: number;
}

describe('machine update workflow through UpdateMachine', () => {
  let client: Client;
  let closeClient: () => Promise<void>;
  let hooks: TestHookServer;
  let taskQueue: string;
  let running: { worker: Worker; connection: NativeConnection; done: Promise<void> } | undefined;
  let name: string;

  const startWorker = async (activities: MachineUpdateActivities) => {
    const { worker, connection } = await createTestWorker({ taskQueue, activities });
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
      const s = (await client.workflow.getHandle(id).query('status')) as MachineUpdateStatus;
      if (s.step === step) return s;
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
    hooks = await startTestHookServer({ inPlace: createInPlaceHandlers({ client, taskQueue }) });
  });
  afterEach(async () => {
    await stopWorker();
    await hooks.close();
    await closeClient();
  });

  it('cordons, drains, upgrades, waits and uncordons, then answers done', async () => {
    const activities = stubs();
    await startWorker(activities);
    const body = updateMachineRequest('v1.33.1', name);
    const first = await call(body);
    expect(first).toMatchObject({
      status: 'Success',
      message: `updating machine fleet-a/${name} to v1.33.1: preflight checks`,
      retryAfterSeconds: 10,
    });
    const done = await pollUntilDone(body);
    expect(done).toMatchObject({
      status: 'Success',
      message: `machine fleet-a/${name} updated to v1.33.1`,
      retryAfterSeconds: 0,
    });
    expect(activities.calls).toEqual({
      preflight: 1,
      cordon: 1,
      drain: 1,
      upgradeNode: 1,
      waitForNodeVersion: 1,
      uncordon: 1,
    });
    const status = (await client.workflow.getHandle(idFor(body)).result()) as MachineUpdateStatus;
    await recordHistoryIfAsked(client, idFor(body), 'machine-update');
    expect(status.steps.map((s) => [s.type, s.status])).toEqual([
      ['Cordon', 'True'],
      ['Drain', 'True'],
      ['UpgradeNode', 'True'],
      ['WaitForNode', 'True'],
      ['Uncordon', 'True'],
    ]);
  });

  it('aborts mid-drain at a safe point and gives the node back', async () => {
    const activities = stubs({ drainBlocks: () => true });
    await startWorker(activities);
    const body = updateMachineRequest('v1.33.1', name);
    await call(body);
    await waitForStep(idFor(body), 'Drain');
    await client.workflow.getHandle(idFor(body)).signal(abortSignal, { reason: 'on-call stop' });
    const answer = await pollUntilDone(body);
    expect(answer).toEqual({
      apiVersion: HOOKS_API_VERSION,
      kind: 'UpdateMachineResponse',
      status: 'Failure',
      message: `update of machine fleet-a/${name} to v1.33.1 aborted: on-call stop`,
      retryAfterSeconds: 0,
    });
    expect(activities.calls.uncordon).toBe(1);
    expect(activities.calls.upgradeNode).toBeUndefined();
  });

  it('stops an older update of the same machine before starting one for a new desired spec', async () => {
    let block = true;
    const activities = stubs({ drainBlocks: () => block });
    await startWorker(activities);
    const older = updateMachineRequest('v1.33.1', name);
    await call(older);
    await waitForStep(idFor(older), 'Drain');
    const newer = updateMachineRequest('v1.33.1', name, [{ path: '/etc/motd', content: 'hi' }]);
    const waiting = await call(newer);
    expect(waiting).toMatchObject({
      status: 'Success',
      message: `updating machine fleet-a/${name} to v1.33.1: waiting for the previous update of this machine to stop`,
    });
    const oldResult = (await client.workflow.getHandle(idFor(older)).result()) as MachineUpdateStatus;
    expect(oldResult.phase).toBe('Aborted');
    expect(oldResult.reason).toMatch(/^superseded by a newer desired spec/);
    block = false;
    expect(await pollUntilDone(newer)).toMatchObject({ status: 'Success', retryAfterSeconds: 0 });
  });

  it('answers Failure with the reason, leaving the node cordoned and marked, after a non-retryable failure', async () => {
    const activities = stubs({ upgradeFails: 'node agent reported Failed: disk full' });
    await startWorker(activities);
    const body = updateMachineRequest('v1.33.1', name);
    const answer = await pollUntilDone(body);
    expect(answer).toMatchObject({
      status: 'Failure',
      message: `update of machine fleet-a/${name} to v1.33.1 failed at UpgradeNode: node agent reported Failed: disk full`,
    });
    expect(await call(body)).toEqual(answer);
    expect(activities.calls.markNodeFailed).toBe(1);
    expect(activities.calls.uncordon).toBeUndefined();
  });

  it('skips a blocked drain on the on-call skipDrain signal', async () => {
    const activities = stubs({ drainBlocks: () => true });
    await startWorker(activities);
    const body = updateMachineRequest('v1.33.1', name);
    await call(body);
    await waitForStep(idFor(body), 'Drain');
    await client.workflow.getHandle(idFor(body)).signal(skipDrainSignal);
    expect(await pollUntilDone(body)).toMatchObject({ status: 'Success', retryAfterSeconds: 0 });
    expect(activities.calls.upgradeNode).toBe(1);
  });

  it('finishes after the worker is replaced mid-drain', async () => {
    await startWorker(stubs({ drainBlocks: () => true }));
    const body = updateMachineRequest('v1.33.1', name);
    await call(body);
    await waitForStep(idFor(body), 'Drain');
    await stopWorker();
    const second = stubs();
    await startWorker(second);
    expect(await pollUntilDone(body, 90_000)).toMatchObject({ status: 'Success', retryAfterSeconds: 0 });
    expect(second.calls.drain).toBe(1);
    expect(second.calls.uncordon).toBe(1);
  }, 120_000);
});
