// In-place machine updates driven by UpdateMachine over HTTPS, on the real
// dev server with a real worker; activities stubbed.
import { randomUUID } from 'node:crypto';
import { beforeEach, describe, expect, it } from '@jest/globals';
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { HOOKS_API_VERSION } from '../../src/api/hooks/contract.ts';
import { specHash } from '../../src/domain/in-place.ts';
import {
  machineUpdateSlotsWorkflowId,
  machineUpdateWorkflowId,
  type MachineUpdateSlotsStatus,
  type MachineUpdateStatus,
} from '../../src/model/machine-update.ts';
import type { MachineEventInput } from '../../src/activities/machine-update-types.ts';
import {
  abortSignal,
  acquireSlotSignal,
  forceDrainSignal,
  machineUpdateSlotsQuery,
  skipDrainSignal,
  slotsAbortSignal,
} from '../../src/workflows/messages.ts';
import { machineUpdateWorkflow } from '../../src/workflows/machine-update/workflow.ts';
import { machineUpdateSlotsWorkflow } from '../../src/workflows/machine-update/slots-workflow.ts';
import {
  beforeClusterDeleteCaller,
  clusterRequest,
  eventsOf,
  machineUpdateHarness,
  stubs,
  updateMachineRequest,
} from '../support/machine-update-workflow.ts';
import { recordHistoryIfAsked } from '../support/record-history.ts';
import { temporalCli, temporalSignal } from '../support/temporal-cli.ts';
import { waitFor } from '../support/wait.ts';

describe('machine update workflow through UpdateMachine', () => {
  const harness = machineUpdateHarness();
  const { startWorker, stopWorker, call, pollUntilDone, waitForStep, idFor } = harness;
  let client: Client;
  let taskQueue: string;
  let name: string;
  beforeEach(() => {
    ({ client, taskQueue, name } = harness);
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
    // The answer is "done" once the node is given back; the run ends after its last Event.
    const status = (await client.workflow.getHandle(idFor(body)).result()) as MachineUpdateStatus;
    expect(activities.calls).toEqual({
      preflight: 1,
      cordon: 1,
      holdRemediation: 1,
      drain: 1,
      upgradeNode: 1,
      waitForNodeVersion: 1,
      clearNodeUpdateFailed: 1,
      uncordon: 1,
      releaseRemediation: 1,
      recordMachineEvent: 4,
    });
    // `kubectl describe machine` tells the story; each Event named once (retries add none).
    expect(eventsOf(activities)).toEqual([
      'Normal MachineUpdateStarted: updating node worker-0 in place to v1.33.1 (job executor)',
      'Normal NodeDrained: node worker-0 drained',
      'Normal NodeUpgraded: node worker-0 reports v1.33.1 and is Ready',
      'Normal MachineUpdateSucceeded: updated in place to v1.33.1',
    ]);
    const keys = (activities.seen.recordMachineEvent as MachineEventInput[]).map((e) => e.key);
    expect(new Set(keys).size).toBe(4);
    expect(activities.seen.recordMachineEvent?.[0]).toMatchObject({ machine: { namespace: 'fleet-a', name } });
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
    // Before the executor: nothing to stop, nothing to flag.
    expect(activities.calls.stopNodeUpgrade).toBeUndefined();
    expect(activities.calls.setNodeUpdateFailed).toBeUndefined();
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

  it('after a failure past the executor keeps the node cordoned and flagged for remediation, then retries when CAPI calls after the backoff', async () => {
    let failures = 1;
    const activities = stubs({
      upgradeFails: () => (failures-- > 0 ? 'node agent reported Failed: disk full' : undefined),
    });
    await startWorker(activities);
    const body = updateMachineRequest('v1.33.1', name, [], { machineUpdateRetryBackoff: '2s' });
    const failed = await pollUntilDone(body);
    const message =
      `update of machine fleet-a/${name} to v1.33.1 failed at UpgradeNode: node agent reported Failed: disk full; ` +
      'retried when UpdateMachine is called again after a backoff, or at once on the "retry" signal';
    expect(failed).toMatchObject({ status: 'Failure', message, retryAfterSeconds: 0 });
    // Deterministic while nothing changes; the run stays open (no stored Failure forever).
    expect(await call(body)).toEqual(failed);
    expect((await client.workflow.getHandle(idFor(body)).describe()).status.name).toBe('RUNNING');
    expect(activities.calls.setNodeUpdateFailed).toBe(1);
    expect(activities.seen.setNodeUpdateFailed?.[0]).toMatchObject({ nodeName: 'worker-0' });
    expect(activities.calls.uncordon).toBeUndefined();
    expect(activities.calls.cleanupNodeUpgrade).toBe(1);
    // Recorded right after the Failure is answered.
    expect(
      await waitFor(
        async () => eventsOf(activities).at(-1),
        (last) => last?.includes('MachineUpdateFailed') ?? false,
      ),
    ).toBe('Warning MachineUpdateFailed: update to v1.33.1 failed: node agent reported Failed: disk full');

    await new Promise((r) => setTimeout(r, 2_500));
    const retrying = await call(body);
    expect(retrying).toMatchObject({
      status: 'Success',
      message: `update of machine fleet-a/${name} to v1.33.1 failed at UpgradeNode: node agent reported Failed: disk full; retrying`,
      retryAfterSeconds: 10,
    });
    expect(await pollUntilDone(body)).toMatchObject({ status: 'Success', retryAfterSeconds: 0 });
    expect(activities.calls.preflight).toBe(2);
    expect(activities.calls.clearNodeUpdateFailed).toBe(1);
    expect(activities.calls.uncordon).toBe(1);
    // The retry uses a new executor request: the failed one may still be there.
    const names = (activities.seen.upgradeNode as { requestName: string }[]).map((i) => i.requestName);
    expect(new Set(names).size).toBe(2);
    await client.workflow.getHandle(idFor(body)).result();
    await recordHistoryIfAsked(client, idFor(body), 'machine-update-failed-and-retried');
  });

  it('after a failure before the executor gives the node back, and starts over at once on the retry signal', async () => {
    let failures = 1;
    const activities = stubs({
      drainFails: () => (failures-- > 0 ? 'drain: 1 blocking: default/solo (declares no controller)' : undefined),
    });
    await startWorker(activities);
    const body = updateMachineRequest('v1.33.1', name);
    const failed = await pollUntilDone(body);
    expect(failed).toMatchObject({ status: 'Failure' });
    expect(failed.message).toMatch(/failed at Drain: drain: 1 blocking/);
    // The node was not touched: uncordoned, not flagged, nothing to clean up.
    expect(activities.calls.uncordon).toBe(1);
    expect(activities.calls.setNodeUpdateFailed).toBeUndefined();
    expect(activities.calls.cleanupNodeUpgrade).toBeUndefined();
    await temporalSignal(idFor(body), 'retry');
    await waitFor(
      async () => (await client.workflow.getHandle(idFor(body)).describe()).memo?.machineUpdate as { phase?: string },
      (memo) => memo.phase !== 'Failed',
    );
    expect(await pollUntilDone(body)).toMatchObject({ status: 'Success', retryAfterSeconds: 0 });
    expect(activities.calls.drain).toBe(2);
    expect(activities.calls.uncordon).toBe(2);
  });

  it('starts a new run when the last one was terminated, instead of answering its Failure forever', async () => {
    let failures = 1;
    const activities = stubs({ upgradeFails: () => (failures-- > 0 ? 'disk full' : undefined) });
    await startWorker(activities);
    const body = updateMachineRequest('v1.33.1', name);
    expect(await pollUntilDone(body)).toMatchObject({ status: 'Failure' });
    await temporalCli(['workflow', 'terminate', '--workflow-id', idFor(body), '--reason', 'on-call cleanup']);
    expect(await call(body)).toMatchObject({ status: 'Success', retryAfterSeconds: 10 });
    expect(await pollUntilDone(body)).toMatchObject({ status: 'Success', retryAfterSeconds: 0 });
    expect(activities.calls.preflight).toBe(2);
  });

  it('gives the node back when no agent took the request: the node was not touched', async () => {
    const activities = stubs({ upgradeFails: 'no node agent took NodeUpgradeRequest kube-system/x within 5m0s' });
    // The stub fails with NodeUpgradeFailed; this one says the agent is missing.
    activities.upgradeNode = async (input) => {
      (activities.seen.upgradeNode ??= []).push(input);
      throw ApplicationFailure.nonRetryable(
        'no node agent took NodeUpgradeRequest kube-system/x within 5m0s',
        'NodeAgentMissing',
      );
    };
    await startWorker(activities);
    const body = updateMachineRequest('v1.33.1', name, [], { nodeUpgradeExecutor: 'delegate' });
    const failed = await pollUntilDone(body);
    expect(failed.status).toBe('Failure');
    expect(failed.message).toMatch(/failed at UpgradeNode: no node agent took/);
    expect(activities.calls.uncordon).toBe(1);
    expect(activities.calls.setNodeUpdateFailed).toBeUndefined();
    expect(activities.seen.cleanupNodeUpgrade).toEqual([expect.objectContaining({ executor: 'delegate' })]);
  });

  it('passes the bootstrap config by reference: no file content in the workflow history', async () => {
    const activities = stubs();
    await startWorker(activities);
    const marker = `secret-${randomUUID()}`;
    const body = updateMachineRequest('v1.33.1', name, [{ path: '/etc/kubernetes/token', content: marker }]);
    expect(await pollUntilDone(body)).toMatchObject({ status: 'Success', retryAfterSeconds: 0 });
    expect(activities.seen.upgradeNode?.[0]).toMatchObject({ bootstrapConfig: { namespace: 'fleet-a', name } });
    const history = await client.workflow.getHandle(idFor(body)).fetchHistory();
    expect(JSON.stringify(history)).not.toContain(marker);
    expect(
      JSON.stringify(await temporalCli(['workflow', 'show', '--workflow-id', idFor(body), '-o', 'json'])),
    ).not.toContain(marker);
  });

  it('management executor: hands the upgrade the infrastructure machine and bootstrap config CAPI sent', async () => {
    const activities = stubs();
    await startWorker(activities);
    const body = updateMachineRequest('v1.33.1', name, [], { nodeUpgradeExecutor: 'management' });
    expect(await pollUntilDone(body)).toMatchObject({ status: 'Success', retryAfterSeconds: 0 });
    expect(activities.seen.upgradeNode?.[0]).toMatchObject({
      executor: 'management',
      objectRefs: {
        infrastructureMachine: { apiVersion: 'infrastructure.cluster.x-k8s.io/v1beta2', kind: 'DockerMachine', name },
        bootstrapConfig: { apiVersion: 'bootstrap.cluster.x-k8s.io/v1beta2', kind: 'KubeadmConfig', name },
      },
    });
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

  it('keeps the drain clock when on-call forceDrain restarts the drain', async () => {
    // The first drain blocks until the forceDrain signal cancels it; the restarted one does not. (A
    // flag flipped by the test would let the first finish on its own on a slow machine.)
    const seen: { drain?: unknown[] } = {};
    const activities = stubs({ drainBlocks: () => (seen.drain?.length ?? 0) < 2 });
    Object.defineProperty(seen, 'drain', { get: () => activities.seen.drain });
    await startWorker(activities);
    const body = updateMachineRequest('v1.33.1', name);
    await call(body);
    await waitForStep(idFor(body), 'Drain');
    // The step reads Drain a moment before the drain activity starts: force only a drain under way.
    await waitFor(
      async () => (activities.seen.drain as unknown[] | undefined)?.length ?? 0,
      (n) => n >= 1,
    );
    await client.workflow.getHandle(idFor(body)).signal(forceDrainSignal);
    expect(await pollUntilDone(body)).toMatchObject({ status: 'Success', retryAfterSeconds: 0 });
    const runs = (activities.seen.drain as { options: { startedAtMs?: number; forceNow?: boolean } }[]).map(
      (d) => d.options,
    );
    expect(runs.length).toBeGreaterThanOrEqual(2);
    expect(runs.at(-1)?.forceNow).toBe(true);
    expect(typeof runs[0]?.startedAtMs).toBe('number');
    expect(new Set(runs.map((o) => o.startedAtMs)).size).toBe(1);
  });

  const idOf = (body: ReturnType<typeof updateMachineRequest>) =>
    machineUpdateWorkflowId({ namespace: 'fleet-a', name: body.desired.machine.metadata.name }, specHash(body.desired));
  /** A worker whose node upgrades block until `unblock()`, and a cluster of the test's own allowing one at a time. */
  const oneAtATime = async () => {
    let block = true;
    const activities = stubs({ upgradeBlocks: () => block });
    await startWorker(activities);
    const cluster = `c-${randomUUID().slice(0, 8)}`;
    const request = (machine: string) =>
      clusterRequest(cluster, `${name}-${machine}`, { maxConcurrentMachineUpdates: '1' });
    return { activities, cluster, request, unblock: () => (block = false) };
  };

  it('never lets more than maxConcurrentMachineUpdates machines of a cluster past the queue, and finishes them all', async () => {
    const activities = stubs();
    // In flight = cordoned and not yet uncordoned; the upgrade takes a while so the waves overlap.
    let inFlight = 0;
    let maxInFlight = 0;
    const cordon = activities.cordon;
    activities.cordon = async (input) => {
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      return await cordon(input);
    };
    const upgradeNode = activities.upgradeNode;
    // The first ten hold their slots until the line has been looked at.
    let lineSeen = false;
    activities.upgradeNode = async (input) => {
      while (!lineSeen) await new Promise((r) => setTimeout(r, 50));
      await new Promise((r) => setTimeout(r, 300));
      return await upgradeNode(input);
    };
    const uncordon = activities.uncordon;
    activities.uncordon = async (input) => {
      inFlight--;
      await uncordon(input);
    };
    await startWorker(activities);
    const cluster = `c-${randomUUID().slice(0, 8)}`;
    const bodies = Array.from({ length: 40 }, (_, i) =>
      clusterRequest(cluster, `${name}-${i}`, { maxConcurrentMachineUpdates: '10' }),
    );
    // 40 UpdateMachine calls at once, as CAPI would send for 40 machines.
    const first = await Promise.all(bodies.map((b) => call(b)));
    expect(first.every((a) => a.status === 'Success')).toBe(true);
    const slotsHandle = client.workflow.getHandle(
      machineUpdateSlotsWorkflowId({ namespace: 'fleet-a', name: cluster }),
    );
    // The first run to ask starts the slots workflow: until then it is not found.
    const queued = await waitFor(
      async () => (await slotsHandle.query(machineUpdateSlotsQuery).catch(() => undefined)) as MachineUpdateSlotsStatus,
      (slots) => (slots?.waiting.length ?? 0) === 30,
    );
    expect(queued.limit).toBe(10);
    expect(queued.holders).toHaveLength(10);
    const waitingOne = await call(bodies.find((b) => queued.waiting.includes(idOf(b)))!);
    expect(waitingOne.message).toMatch(
      new RegExp(`waiting: 10 machine\\(s\\) of cluster ${cluster} are updating \\(maxConcurrentMachineUpdates\\)$`),
    );
    lineSeen = true;
    const done = await Promise.all(bodies.map((b) => pollUntilDone(b, 120_000)));
    expect(done.filter((a) => a.status === 'Success' && a.retryAfterSeconds === 0)).toHaveLength(40);
    expect(maxInFlight).toBeGreaterThan(1);
    expect(maxInFlight).toBeLessThanOrEqual(10);
    expect(activities.calls.cordon).toBe(40);
  }, 180_000);

  it('starts queued updates only when let in, frees the slot of a run that ended without giving it back, and aborts one while queued', async () => {
    const { activities, cluster, request, unblock } = await oneAtATime();
    const slotsId = machineUpdateSlotsWorkflowId({ namespace: 'fleet-a', name: cluster });
    // Started ahead with a short liveness check (production: 2 minutes).
    await client.workflow.start(machineUpdateSlotsWorkflow, {
      workflowId: slotsId,
      taskQueue,
      args: [
        {
          cluster: { namespace: 'fleet-a', name: cluster },
          limit: 1,
          holders: [],
          waiting: [],
          livenessCheckMs: 1_000,
        },
      ],
    });
    const [a, b, c] = [request('a'), request('b'), request('c')];
    const slots = client.workflow.getHandle(slotsId);
    const slotsState = () => slots.query(machineUpdateSlotsQuery) as Promise<MachineUpdateSlotsStatus>;
    await call(a);
    await waitForStep(idOf(a), 'UpgradeNode');
    // Queued behind a: in the slots workflow's line, no run of their own yet.
    const queuedMessage = new RegExp(
      `waiting: 1 machine\\(s\\) of cluster ${cluster} are updating \\(maxConcurrentMachineUpdates\\)$`,
    );
    expect(await call(b)).toMatchObject({ status: 'Success', message: expect.stringMatching(queuedMessage) });
    expect(await call(c)).toMatchObject({ status: 'Success', message: expect.stringMatching(queuedMessage) });
    expect(await slotsState()).toEqual({ limit: 1, holders: [idOf(a)], waiting: [idOf(b), idOf(c)] });
    await expect(client.workflow.getHandle(idOf(b)).describe()).rejects.toBeInstanceOf(WorkflowNotFoundError);
    // Asked again on each poll: still once in line.
    expect(await call(b)).toMatchObject({ status: 'Success', message: expect.stringMatching(queuedMessage) });
    expect((await slotsState()).waiting).toEqual([idOf(b), idOf(c)]);
    // Aborted while queued (`abort` to the slots workflow, naming the update): it answers the abort.
    await slots.signal(slotsAbortSignal, { workflowId: idOf(c), reason: 'not now' });
    expect(await pollUntilDone(c)).toMatchObject({
      status: 'Failure',
      message: expect.stringMatching(/aborted: not now$/),
    });
    expect(activities.calls.cordon).toBe(1);
    expect(await waitFor(slotsState, (st) => st.waiting.length === 1)).toEqual({
      limit: 1,
      holders: [idOf(a)],
      waiting: [idOf(b)],
    });
    // The holder is terminated (it never says goodbye): the liveness check lets b in.
    unblock();
    await client.workflow.getHandle(idOf(a)).terminate('on-call cleanup');
    expect(await pollUntilDone(b)).toMatchObject({ status: 'Success', retryAfterSeconds: 0 });
    await client.workflow.getHandle(idOf(b)).result();
    await recordHistoryIfAsked(client, idOf(b), 'machine-update-started-when-let-in');
    await recordHistoryIfAsked(client, idOf(c), 'machine-update-aborted-while-queued');
    await recordHistoryIfAsked(client, slotsId, 'machine-update-slots');
    // c never ran a step; b ran once.
    expect(activities.calls.cordon).toBe(2);
  }, 60_000);

  it('lets a run that asks for itself (started before queued starts, or retrying) share the line with queued updates', async () => {
    const { activities, cluster, request, unblock } = await oneAtATime();
    const [a, b] = [request('a'), request('b')];
    await call(a);
    await waitForStep(idOf(a), 'UpgradeNode');
    // A run started directly, as the api started every update before: it asks the slots workflow itself.
    const direct = `machine-update/fleet-a/${name}-direct/${randomUUID().slice(0, 8)}`;
    await client.workflow.start(machineUpdateWorkflow, {
      workflowId: direct,
      taskQueue,
      args: [
        {
          machine: { namespace: 'fleet-a', name: `${name}-direct` },
          clusterName: cluster,
          version: 'v1.33.1',
          specHash: 'direct',
          executor: 'job',
          deleteEmptyDirData: true,
          forceDrainUnmanagedPods: false,
          drainTimeoutMs: 60_000,
          nodeUpgradeTimeoutMs: 60_000,
          maxConcurrentMachineUpdates: 1,
        },
      ],
    });
    await waitForStep(direct, 'Queued');
    await call(b);
    const slots = client.workflow.getHandle(machineUpdateSlotsWorkflowId({ namespace: 'fleet-a', name: cluster }));
    expect(await slots.query(machineUpdateSlotsQuery)).toMatchObject({
      holders: [idOf(a)],
      waiting: [direct, idOf(b)],
    });
    unblock();
    expect(await pollUntilDone(a)).toMatchObject({ status: 'Success', retryAfterSeconds: 0 });
    expect(await client.workflow.getHandle(direct).result()).toMatchObject({ phase: 'Succeeded' });
    expect(await pollUntilDone(b)).toMatchObject({ status: 'Success', retryAfterSeconds: 0 });
    expect(activities.calls.cordon).toBe(3);
  }, 60_000);

  it('aborts every queued update when the cluster is deleted, and the slots workflow ends', async () => {
    const { activities, cluster, request, unblock } = await oneAtATime();
    const bodies = [request('a'), request('b'), request('c')];
    await call(bodies[0]!);
    await waitForStep(idOf(bodies[0]!), 'UpgradeNode');
    await Promise.all(bodies.slice(1).map((b) => call(b)));
    // The real BeforeClusterDelete, as CAPI calls it for a Cluster being deleted.
    const lifecycle = await beforeClusterDeleteCaller(client, taskQueue, cluster);
    const deleteCall = lifecycle.call;
    // Its first List may not see the slots workflow yet (visibility lags a little): ask until it does.
    const first = await waitFor(deleteCall, (answer) =>
      (answer.message ?? '').includes(machineUpdateSlotsWorkflowId({ namespace: 'fleet-a', name: cluster })),
    );
    expect(first).toMatchObject({ status: 'Success', retryAfterSeconds: 10 });
    // The first was past its node upgrade: its node is kept (machine-update-abort.test.ts); the queued ones never ran.
    expect(await pollUntilDone(bodies[0]!)).toMatchObject({
      status: 'Failure',
      message: expect.stringMatching(/aborted after the node upgrade started: .*\(cluster is being deleted\)$/),
    });
    for (const body of bodies.slice(1)) {
      expect(await pollUntilDone(body)).toMatchObject({
        status: 'Failure',
        message: expect.stringMatching(/aborted: cluster is being deleted$/),
      });
    }
    try {
      expect(await waitFor(deleteCall, (answer) => answer.retryAfterSeconds === 0, 30_000)).toMatchObject({
        status: 'Success',
      });
    } finally {
      await lifecycle.close();
    }
    // Only the first was ever started past the queue; its node stays cordoned and marked.
    expect(activities.calls.cordon).toBe(1);
    expect(activities.calls.uncordon).toBeUndefined();
    expect(activities.calls.setNodeUpdateFailed).toBe(1);
    unblock();
  }, 60_000);

  it('keeps the slots workflow history short by continuing as new, carrying its state', async () => {
    await startWorker(stubs());
    const cluster = `c-${randomUUID().slice(0, 8)}`;
    const handle = await client.workflow.start(machineUpdateSlotsWorkflow, {
      workflowId: machineUpdateSlotsWorkflowId({ namespace: 'fleet-a', name: cluster }),
      taskQueue,
      args: [{ cluster: { namespace: 'fleet-a', name: cluster }, limit: 1, holders: [], waiting: [] }],
    });
    // Runs that no longer exist: each is let in, can't be told, and is dropped (≈4–9 events each, signals arriving together share a workflow task).
    for (let batch = 0; batch < 20; batch++) {
      await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          handle.signal(acquireSlotSignal, { workflowId: `gone-${batch}-${i}`, runId: randomUUID(), limit: 1 }),
        ),
      );
    }
    // 200 signals through one workflow: on a loaded machine that takes longer than waitFor's default.
    const described = await waitFor(
      () => client.workflow.getHandle(handle.workflowId).describe(),
      (d) => d.runId !== handle.firstExecutionRunId,
      90_000,
    );
    expect(described.runId).not.toBe(handle.firstExecutionRunId);
    expect(described.status.name).toBe('RUNNING');
    const first = await client.workflow.getHandle(handle.workflowId, handle.firstExecutionRunId).describe();
    expect(first.status.name).toBe('CONTINUED_AS_NEW');
    expect(first.historyLength).toBeLessThan(2_000);
    // The new run still works: a real machine update gets in and finishes.
    const body = clusterRequest(cluster, name, { maxConcurrentMachineUpdates: '1' });
    expect(await pollUntilDone(body)).toMatchObject({ status: 'Success', retryAfterSeconds: 0 });
  }, 180_000);

  it('waits for a NotReady node within preflightTimeout, saying so, then goes on', async () => {
    const activities = stubs();
    let notReady = 2;
    activities.preflight = async () => {
      activities.calls.preflight = (activities.calls.preflight ?? 0) + 1;
      if (notReady-- > 0)
        throw ApplicationFailure.retryable(
          'node worker-0 of Machine fleet-a/x is not Ready (Ready=False: KubeletNotReady)',
          'NodeNotReady',
        );
      return { nodeName: 'worker-0', clusterName: 'prod-1' };
    };
    await startWorker(activities);
    const body = updateMachineRequest('v1.33.1', name, [], { preflightTimeout: '30s' });
    await call(body);
    const waiting = await waitFor(
      () => call(body),
      (a) => /waiting/.test(a.message ?? ''),
    );
    expect(waiting).toMatchObject({
      status: 'Success',
      message: `updating machine fleet-a/${name} to v1.33.1: preflight checks: waiting: node worker-0 of Machine fleet-a/x is not Ready (Ready=False: KubeletNotReady)`,
      retryAfterSeconds: 10,
    });
    expect(await pollUntilDone(body)).toMatchObject({ status: 'Success', retryAfterSeconds: 0 });
    expect(activities.calls.preflight).toBe(3);
    await client.workflow.getHandle(idFor(body)).result();
    await recordHistoryIfAsked(client, idFor(body), 'machine-update-preflight-wait');
  });

  it('fails naming the node when it stays NotReady past preflightTimeout, without touching it', async () => {
    const activities = stubs();
    activities.preflight = async () => {
      throw ApplicationFailure.retryable(
        'node worker-0 of Machine fleet-a/x is not Ready (Ready=Unknown: NodeStatusUnknown)',
        'NodeNotReady',
      );
    };
    await startWorker(activities);
    const body = updateMachineRequest('v1.33.1', name, [], { preflightTimeout: '3s' });
    expect(await pollUntilDone(body)).toMatchObject({
      status: 'Failure',
      message: expect.stringContaining(
        `failed at Preflight: node worker-0 of Machine fleet-a/x is not Ready (Ready=Unknown: NodeStatusUnknown) (waited 3s, preflightTimeout)`,
      ),
    });
    expect(activities.calls.cordon).toBeUndefined();
    expect(activities.calls.setNodeUpdateFailed).toBeUndefined();
  });

  it('waits like NotReady while the node reports DiskPressure, then fails past preflightTimeout without a cordon', async () => {
    const activities = stubs();
    const pressure = `node worker-0 of Machine fleet-a/x reports DiskPressure: its kubelet rejects new pods (free the node's disk or processes)`;
    activities.preflight = async () => {
      activities.calls.preflight = (activities.calls.preflight ?? 0) + 1;
      throw ApplicationFailure.retryable(pressure, 'NodeUnderPressure');
    };
    await startWorker(activities);
    const body = updateMachineRequest('v1.33.1', name, [], { preflightTimeout: '3s' });
    expect(await pollUntilDone(body)).toMatchObject({
      status: 'Failure',
      message: expect.stringContaining(`failed at Preflight: ${pressure} (waited 3s, preflightTimeout)`),
    });
    // Waited out by the workflow, one preflight call per pause, not by the activity's own retries.
    expect(activities.calls.preflight).toBeGreaterThan(1);
    expect(activities.calls.cordon).toBeUndefined();
    expect(activities.calls.upgradeNode).toBeUndefined();
  });

  it('ends as aborted when its Machine is being deleted mid-drain: gives the node back, flags nothing', async () => {
    const activities = stubs();
    activities.drain = async (input) => {
      (activities.seen.drain ??= []).push(input);
      throw ApplicationFailure.nonRetryable(`Machine fleet-a/${name} is being deleted`, 'MachineDeleted');
    };
    await startWorker(activities);
    const body = updateMachineRequest('v1.33.1', name);
    expect(await pollUntilDone(body)).toMatchObject({
      status: 'Failure',
      message: `update of machine fleet-a/${name} to v1.33.1 aborted: Machine fleet-a/${name} is being deleted`,
    });
    expect(activities.seen.drain?.[0]).toMatchObject({ machine: { namespace: 'fleet-a', name } });
    expect(activities.calls.uncordon).toBe(1);
    expect(activities.calls.setNodeUpdateFailed).toBeUndefined();
    const result = (await client.workflow.getHandle(idFor(body)).result()) as MachineUpdateStatus;
    expect(result.phase).toBe('Aborted');
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
