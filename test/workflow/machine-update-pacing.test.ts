// Node pacing in the machine update: a blocking pod selector
// holds a node's update before its cordon while matching pods run on the node
// (released when they are gone, a Failure naming the selector and the pods once
// blockingPodTimeout passed), and postUpdateDelay keeps a finished update (its
// node uncordoned) from reporting done and freeing its place for a while, so
// the next machine waits. Real dev server, real worker, real UpdateMachine over
// HTTPS; activities stubbed.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import type { BlockingPods } from '../../src/domain/node-pacing.ts';
import { specHash } from '../../src/domain/in-place.ts';
import { machineUpdateWorkflowId, type MachineUpdateStatus } from '../../src/model/machine-update.ts';
import {
  clusterRequest,
  eventsOf,
  machineUpdateHarness,
  stubs,
  updateMachineRequest,
} from '../support/machine-update-workflow.ts';
import { recordHistoryIfAsked } from '../support/record-history.ts';
import { temporalSignal } from '../support/temporal-cli.ts';
import { waitFor } from '../support/wait.ts';

const SELECTOR_ANNOTATION = 'upgrades.capi-orchestrator.io/blocking-pod-selector';
/** The calls in order, each run of blockingPods checks as one, without the stubs' cancellation notes. */
const steps = (activities: ReturnType<typeof stubs>) =>
  activities.order.filter((n, i, all) => !n.endsWith('Cancelled') && !(n === 'blockingPods' && all[i - 1] === n));
const afterHold = [
  'cordon',
  'holdRemediation',
  'drain',
  'upgradeNode',
  'waitForNodeVersion',
  'clearNodeUpdateFailed',
  'uncordon',
  'releaseRemediation',
];
const conditions = (s: MachineUpdateStatus) => s.steps.map((c) => [c.type, c.status, c.reason]);

describe('node pacing', () => {
  const h = machineUpdateHarness();
  const status = async (id: string) => (await h.client.workflow.getHandle(id).query('status')) as MachineUpdateStatus;
  const updating = (detail: string) => `updating machine fleet-a/${h.name} to v1.33.1: ${detail}`;

  it('holds before the cordon while blocking pods run on the node, says so, and goes on once they are gone', async () => {
    let pods: BlockingPods = { count: 2, first: 'jobs/etl-1' };
    const activities = stubs({ blockingPods: () => pods });
    await h.startWorker(activities);
    const body = updateMachineRequest('v1.33.1', h.name, [], {
      blockingPodSelector: 'app in (batch,etl)',
      blockingPodTimeout: '2m',
      postUpdateDelay: '1s',
    });
    const id = h.idFor(body);
    await h.call(body);
    const held = await h.waitForStep(id, 'BlockingPods');
    const selector = '"app in (batch,etl)" (setting blockingPodSelector)';
    expect(held.blockingPods).toEqual({ selector, count: 2, first: 'jobs/etl-1' });
    const heldMessage = updating(
      `held: 2 pod(s) matching blocking pod selector ${selector} run on node worker-0, first jobs/etl-1; ` +
        'waiting up to 2m (blockingPodTimeout)',
    );
    expect(
      await waitFor(
        () => h.call(body),
        (a) => a.message === heldMessage,
      ),
    ).toMatchObject({
      status: 'Success',
      message: heldMessage,
      retryAfterSeconds: 10,
    });
    expect(activities.calls.cordon).toBeUndefined();
    // One pod left: the message follows what the check sees.
    pods = { count: 1, first: 'jobs/etl-2' };
    await waitFor(
      () => h.call(body),
      (a) => a.message?.includes('1 pod(s) matching blocking pod selector') === true,
    );
    pods = { count: 0 };
    expect(await h.pollUntilDone(body)).toMatchObject({
      status: 'Success',
      message: `machine fleet-a/${h.name} updated to v1.33.1`,
      retryAfterSeconds: 0,
    });
    expect(steps(activities)).toEqual(['preflight', 'blockingPods', ...afterHold]);
    expect((activities.seen.blockingPods as unknown[])[0]).toEqual({
      cluster: { namespace: 'fleet-a', name: 'prod-1' },
      nodeName: 'worker-0',
      selector: 'app in (batch,etl)',
    });
    const done = await status(id);
    expect(done.blockingPods).toBeUndefined();
    expect(done.delayUntil).toBeUndefined();
    expect(conditions(done)).toEqual([
      ['BlockingPods', 'True', 'InProgress'],
      ['Cordon', 'True', 'InProgress'],
      ['Drain', 'True', 'InProgress'],
      ['UpgradeNode', 'True', 'InProgress'],
      ['WaitForNode', 'True', 'InProgress'],
      ['Uncordon', 'True', 'InProgress'],
      ['PostUpdateDelay', 'True', 'InProgress'],
    ]);
    expect(eventsOf(activities)).toEqual(
      expect.arrayContaining([
        `Normal NodeUpdateHeld: update of node worker-0 held: 2 pod(s) matching blocking pod selector ${selector} run on node worker-0, first jobs/etl-1`,
        'Normal NodeUpdatePaused: node worker-0 updated; waiting 1s before the next machine (postUpdateDelay)',
      ]),
    );
    await h.client.workflow.getHandle(id).result();
    await recordHistoryIfAsked(h.client, id, 'machine-update-paced');
  });

  it("fails after blockingPodTimeout naming the Cluster's selector and the pods, the node untouched; a retry goes on", async () => {
    let pods: BlockingPods = { count: 1, first: 'jobs/etl-1' };
    // The Cluster's annotations (read by the preflight) win over the settings.
    const activities = stubs({
      blockingPods: () => pods,
      preflight: { blockingPodSelector: 'app=etl', blockingPodTimeoutMs: 2_000 },
    });
    await h.startWorker(activities);
    const body = updateMachineRequest('v1.33.1', h.name, [], { blockingPodSelector: 'app=batch' });
    const failed = await h.pollUntilDone(body);
    expect(failed).toMatchObject({
      status: 'Failure',
      message:
        `update of machine fleet-a/${h.name} to v1.33.1 failed at BlockingPods: 1 pod(s) matching blocking pod selector ` +
        `"app=etl" (annotation ${SELECTOR_ANNOTATION}) run on node worker-0, first jobs/etl-1: still there after 2s ` +
        '(blockingPodTimeout); retried when UpdateMachine is called again after a backoff, or at once on the "retry" signal',
      retryAfterSeconds: 0,
    });
    // The same answer on every poll; nothing was cordoned, so nothing is given back.
    expect(await h.call(body)).toEqual(failed);
    expect(steps(activities)).toEqual(['preflight', 'blockingPods']);
    expect(eventsOf(activities).at(-1)).toMatch(/^Warning MachineUpdateFailed: update to v1\.33\.1 failed: 1 pod\(s\)/);
    // The way out: the pods are gone and the update is retried.
    pods = { count: 0 };
    await temporalSignal(h.idFor(body), 'retry');
    await waitFor(
      async () =>
        (await h.client.workflow.getHandle(h.idFor(body)).describe()).memo?.machineUpdate as { phase?: string },
      (memo) => memo.phase !== 'Failed',
    );
    expect(await h.pollUntilDone(body)).toMatchObject({ status: 'Success', retryAfterSeconds: 0 });
    expect(steps(activities)).toEqual(['preflight', 'blockingPods', 'preflight', 'blockingPods', ...afterHold]);
  });

  it('ends as aborted when aborted while held (nothing to give back)', async () => {
    const activities = stubs({ blockingPods: () => ({ count: 3, first: 'a/b' }) });
    await h.startWorker(activities);
    const body = updateMachineRequest('v1.33.1', h.name, [], { blockingPodSelector: 'app=batch' });
    await h.call(body);
    await h.waitForStep(h.idFor(body), 'BlockingPods');
    await temporalSignal(h.idFor(body), 'abort', JSON.stringify({ reason: 'on-call stop' }));
    expect(await h.pollUntilDone(body)).toMatchObject({
      status: 'Failure',
      message: `update of machine fleet-a/${h.name} to v1.33.1 aborted: on-call stop`,
      retryAfterSeconds: 0,
    });
    expect(steps(activities)).toEqual(['preflight', 'blockingPods']);
  });

  it('postUpdateDelay: the update reports done and frees its place only after the delay, so the next machine waits; an abort ends the delay', async () => {
    const activities = stubs();
    await h.startWorker(activities);
    const cluster = `c-${randomUUID().slice(0, 8)}`;
    const settings = { maxConcurrentMachineUpdates: '1', postUpdateDelay: '1h' };
    const a = clusterRequest(cluster, h.name, settings);
    const b = clusterRequest(cluster, `${h.name}-b`, settings);
    const idOf = (body: typeof a) =>
      machineUpdateWorkflowId(
        { namespace: 'fleet-a', name: body.desired.machine.metadata.name },
        specHash(body.desired),
      );
    await h.call(a);
    const delaying = await h.waitForStep(idOf(a), 'PostUpdateDelay');
    expect(typeof delaying.delayUntil).toBe('string');
    expect(steps(activities)).toEqual(['preflight', ...afterHold]);
    const delayMessage = updating('node worker-0 updated; waiting 1h before the next machine (postUpdateDelay)');
    expect(
      await waitFor(
        () => h.call(a),
        (x) => x.message === delayMessage,
      ),
    ).toMatchObject({
      status: 'Success',
      message: delayMessage,
      retryAfterSeconds: 10,
    });
    // a still holds the cluster's one place: b waits in line.
    expect(await h.call(b)).toMatchObject({
      status: 'Success',
      message: expect.stringMatching(
        /waiting: 1 machine\(s\) of cluster .* are updating \(maxConcurrentMachineUpdates\)$/,
      ),
    });
    expect(activities.calls.preflight).toBe(1);
    // An abort ends the delay; the node is updated and back in service, so a answers Success and b goes on.
    await temporalSignal(idOf(a), 'abort', JSON.stringify({ reason: 'enough waiting' }));
    expect(await h.pollUntilDone(a)).toMatchObject({
      status: 'Success',
      message: `machine fleet-a/${h.name} updated to v1.33.1`,
      retryAfterSeconds: 0,
    });
    await h.waitForStep(idOf(b), 'PostUpdateDelay');
    expect(activities.calls.preflight).toBe(2);
    await h.client.workflow.getHandle(idOf(b)).cancel();
    expect(await h.pollUntilDone(b)).toMatchObject({ status: 'Success', retryAfterSeconds: 0 });
  });

  it('answers a bad pacing setting with a Failure naming it, and starts nothing', async () => {
    const activities = stubs();
    await h.startWorker(activities);
    const body = updateMachineRequest('v1.33.1', h.name, [], { postUpdateDelay: 'a while' });
    const answer = await h.call(body);
    expect(answer).toMatchObject({
      status: 'Failure',
      message: 'setting postUpdateDelay="a while": not a duration (use e.g. 30m, 2h)',
      retryAfterSeconds: 0,
    });
    expect(await h.call(body)).toEqual(answer);
    expect(activities.order).toEqual([]);
  });
});
