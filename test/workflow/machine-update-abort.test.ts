// An abort never returns a half-upgraded node to service (it may be between
// versions): once
// the executor started, an abort by signal, by a newer desired spec or by
// BeforeClusterDelete stops it after keeping its last words and leaves the node
// cordoned and marked InPlaceUpdateFailed, as a failure after the executor does;
// before the executor (or when it never started on the node) the node is given
// back. Real dev server, real worker, real hook handlers over HTTPS; activities stubbed.
import { describe, expect, it } from '@jest/globals';
import type { Client } from '@temporalio/client';
import type { NodeUpgradeStopped } from '../../src/activities/machine-update-types.ts';
import { machineUpdateWorkflowId, type MachineUpdateStatus } from '../../src/model/machine-update.ts';
import { specHash } from '../../src/domain/in-place.ts';
import { abortSignal } from '../../src/workflows/messages.ts';
import {
  beforeClusterDeleteCaller,
  clusterRequest,
  eventsOf,
  machineUpdateHarness,
  STOPPED_JOB_LOG_LINE,
  stubs,
  updateMachineRequest,
} from '../support/machine-update-workflow.ts';
import { recordHistoryIfAsked } from '../support/record-history.ts';
import { temporalSignal } from '../support/temporal-cli.ts';
import { waitFor } from '../support/wait.ts';

/** What stopNodeUpgrade returned, as the run's history keeps it (Web UI, `temporal workflow show`). */
async function stoppedInHistory(client: Client, workflowId: string): Promise<NodeUpgradeStopped | undefined> {
  const events = (await client.workflow.getHandle(workflowId).fetchHistory()).events ?? [];
  const scheduled = events.find(
    (e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'stopNodeUpgrade',
  );
  if (!scheduled) return undefined;
  const completed = events.find(
    (e) => String(e.activityTaskCompletedEventAttributes?.scheduledEventId) === String(scheduled.eventId),
  );
  const data = completed?.activityTaskCompletedEventAttributes?.result?.payloads?.[0]?.data;
  return data ? (JSON.parse(Buffer.from(data).toString('utf8')) as NodeUpgradeStopped) : undefined;
}

describe('an abort once the node upgrade started', () => {
  const h = machineUpdateHarness();
  const keptMessage = (machine: string, reason: string) =>
    `update of machine fleet-a/${machine} to v1.33.1 aborted after the node upgrade started: ` +
    `node worker-0 stays cordoned and marked InPlaceUpdateFailed (${reason})`;

  /** The run's end after such an abort: what the node, the executor and the Machine's Events saw. */
  const expectKept = async (
    activities: ReturnType<typeof stubs>,
    workflowId: string,
    machine: string,
    reason: string,
  ) => {
    // Not given back: no uncordon; marked where remediation looks.
    expect(activities.calls.uncordon).toBeUndefined();
    expect(activities.seen.setNodeUpdateFailed).toEqual([
      expect.objectContaining({
        nodeName: 'worker-0',
        reason: `machine fleet-a/${machine}: aborted after the node upgrade started: ${reason}`,
      }),
    ]);
    // The executor was cancelled, then stopped once (its log kept first), not merely deleted.
    expect(activities.calls.upgradeNodeCancelled).toBe(1);
    const requestName = (activities.seen.upgradeNode?.[0] as { requestName: string }).requestName;
    expect(activities.seen.stopNodeUpgrade).toEqual([
      expect.objectContaining({ nodeName: 'worker-0', requestName, executor: 'job' }),
    ]);
    expect(activities.calls.cleanupNodeUpgrade).toBeUndefined();
    expect((await stoppedInHistory(h.client, workflowId))?.log?.lines).toEqual([STOPPED_JOB_LOG_LINE]);
    const result = (await h.client.workflow.getHandle(workflowId).result()) as MachineUpdateStatus;
    expect(result.phase).toBe('Aborted');
    expect(result.message).toBe(keptMessage(machine, reason));
    expect(result.steps.at(-1)).toMatchObject({ type: 'UpgradeNode', status: 'False', reason: 'Aborted' });
    expect(eventsOf(activities).at(-1)).toBe(
      `Warning MachineUpdateAborted: aborted after the node upgrade started: ${reason}; ` +
        'node worker-0 stays cordoned and marked InPlaceUpdateFailed',
    );
  };

  it('by signal: stops the Job after keeping its log, keeps the node cordoned and marked, and says so', async () => {
    const activities = stubs({ upgradeBlocks: () => true });
    await h.startWorker(activities);
    const body = updateMachineRequest('v1.33.1', h.name);
    await h.call(body);
    await h.waitForStep(h.idFor(body), 'UpgradeNode');
    await temporalSignal(h.idFor(body), 'abort', JSON.stringify({ reason: 'on-call stop' }));
    const answer = await h.pollUntilDone(body);
    expect(answer).toMatchObject({
      status: 'Failure',
      message: keptMessage(h.name, 'on-call stop'),
      retryAfterSeconds: 0,
    });
    // Final for this desired spec, and the same answer on every later call.
    expect(await h.call(body)).toEqual(answer);
    await expectKept(activities, h.idFor(body), h.name, 'on-call stop');
    await recordHistoryIfAsked(h.client, h.idFor(body), 'machine-update-aborted-after-executor');
  });

  it('by a newer desired spec: the older run keeps the node cordoned and marked; the newer run takes it over and gives it back when done', async () => {
    let block = true;
    const activities = stubs({ upgradeBlocks: () => block });
    await h.startWorker(activities);
    const older = updateMachineRequest('v1.33.1', h.name);
    await h.call(older);
    await h.waitForStep(h.idFor(older), 'UpgradeNode');
    const newer = updateMachineRequest('v1.33.1', h.name, [{ path: '/etc/motd', content: 'hi' }]);
    expect(await h.call(newer)).toMatchObject({
      status: 'Success',
      message: `updating machine fleet-a/${h.name} to v1.33.1: waiting for the previous update of this machine to stop`,
    });
    const reason = `superseded by a newer desired spec (${specHash(newer.desired)})`;
    await h.client.workflow.getHandle(h.idFor(older)).result();
    await expectKept(activities, h.idFor(older), h.name, reason);
    // The node was never given back in between: the newer update's cordon finds our own and goes on.
    block = false;
    expect(await h.pollUntilDone(newer)).toMatchObject({ status: 'Success', retryAfterSeconds: 0 });
    expect(activities.calls.clearNodeUpdateFailed).toBe(1);
    expect(activities.calls.uncordon).toBe(1);
  });

  it('by BeforeClusterDelete: keeps the node cordoned and marked, and the delete goes on once the run ended', async () => {
    const activities = stubs({ upgradeBlocks: () => true });
    await h.startWorker(activities);
    const cluster = `c-${h.name}`;
    const body = clusterRequest(cluster, h.name);
    const id = machineUpdateWorkflowId({ namespace: 'fleet-a', name: h.name }, specHash(body.desired));
    await h.call(body);
    await h.waitForStep(id, 'UpgradeNode');
    const lifecycle = await beforeClusterDeleteCaller(h.client, h.taskQueue, cluster);
    try {
      // Its first List may not see the run yet (visibility lags a little): ask until it does.
      expect(await waitFor(lifecycle.call, (a) => (a.message ?? '').includes(id))).toMatchObject({
        status: 'Success',
        retryAfterSeconds: 10,
      });
      expect(await h.pollUntilDone(body)).toMatchObject({
        status: 'Failure',
        message: keptMessage(h.name, 'cluster is being deleted'),
      });
      await expectKept(activities, id, h.name, 'cluster is being deleted');
      expect(await waitFor(lifecycle.call, (a) => a.retryAfterSeconds === 0, 30_000)).toMatchObject({
        status: 'Success',
      });
    } finally {
      await lifecycle.close();
    }
  });

  it('after a failure past the executor: the node stays cordoned and marked with the failure, and the answer says so', async () => {
    const activities = stubs({ upgradeFails: 'node upgrade Job kube-system/x failed: BackoffLimitExceeded' });
    await h.startWorker(activities);
    const body = updateMachineRequest('v1.33.1', h.name);
    expect(await h.pollUntilDone(body)).toMatchObject({ status: 'Failure' });
    // The failure kept the node cordoned and marked, and deleted the Job after reading its log.
    expect(activities.calls.setNodeUpdateFailed).toBe(1);
    expect(activities.calls.cleanupNodeUpgrade).toBe(1);
    await h.client.workflow.getHandle(h.idFor(body)).signal(abortSignal, { reason: 'giving up on it' });
    // The failure's answer stands until the run has taken the abort.
    const aborted = await waitFor(
      () => h.call(body),
      (a) => a.message !== undefined && !a.message.includes(' failed at '),
    );
    expect(aborted).toMatchObject({
      status: 'Failure',
      message: keptMessage(h.name, 'giving up on it'),
      retryAfterSeconds: 0,
    });
    const result = (await h.client.workflow.getHandle(h.idFor(body)).result()) as MachineUpdateStatus;
    expect(result.phase).toBe('Aborted');
    expect(activities.calls.uncordon).toBeUndefined();
    // The mark keeps the failure's reason: the abort adds nothing to stop.
    expect(activities.seen.setNodeUpdateFailed).toEqual([
      expect.objectContaining({
        reason: `machine fleet-a/${h.name}: node upgrade Job kube-system/x failed: BackoffLimitExceeded`,
      }),
    ]);
    expect(activities.calls.stopNodeUpgrade).toBeUndefined();
    expect(activities.calls.cleanupNodeUpgrade).toBe(1);
    await recordHistoryIfAsked(h.client, h.idFor(body), 'machine-update-aborted-after-failure');
  });

  it('when the executor never started on the node (no Job yet, or no agent took the request): gives the node back', async () => {
    const activities = stubs({ upgradeBlocks: () => true, executorStarted: false });
    await h.startWorker(activities);
    const body = updateMachineRequest('v1.33.1', h.name, [], { nodeUpgradeExecutor: 'delegate' });
    await h.call(body);
    await h.waitForStep(h.idFor(body), 'UpgradeNode');
    await h.client.workflow.getHandle(h.idFor(body)).signal(abortSignal, { reason: 'on-call stop' });
    expect(await h.pollUntilDone(body)).toMatchObject({
      status: 'Failure',
      message: `update of machine fleet-a/${h.name} to v1.33.1 aborted: on-call stop`,
    });
    expect(activities.seen.stopNodeUpgrade).toEqual([expect.objectContaining({ executor: 'delegate' })]);
    expect(activities.calls.uncordon).toBe(1);
    expect(activities.calls.setNodeUpdateFailed).toBeUndefined();
    // Stopped already: nothing left to clean up.
    expect(activities.calls.cleanupNodeUpgrade).toBeUndefined();
  });
});
