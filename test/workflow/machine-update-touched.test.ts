// Which failures give the node back. A node an attempt's executor touched stays
// cordoned and marked InPlaceUpdateFailed through every later attempt until one
// sees it on the new version and Ready: a retry that fails (or is aborted) before
// its own executor must not return a half-upgraded node to service. A node upgrade
// refused before anything was created for it (NodeUpgradeRefused: no pinned
// checksums, bootstrap files over their limits) left the node as it was: it is
// given back, like a failure before the executor. Real dev server, real worker,
// real UpdateMachine over HTTPS; activities stubbed.
import { describe, expect, it } from '@jest/globals';
import { ApplicationFailure } from '@temporalio/common';
import { NODE_UPGRADE_REFUSED, type MachineUpdateStatus } from '../../src/model/machine-update.ts';
import { abortSignal } from '../../src/workflows/messages.ts';
import { machineUpdateHarness, stubs, updateMachineRequest } from '../support/machine-update-workflow.ts';
import { recordHistoryIfAsked } from '../support/record-history.ts';
import { temporalSignal } from '../support/temporal-cli.ts';
import { waitFor } from '../support/wait.ts';

describe('a node touched by an earlier attempt, and a refused node upgrade', () => {
  const h = machineUpdateHarness();

  /** Sends `retry` and waits until the run has left Failed. */
  const retry = async (workflowId: string) => {
    await temporalSignal(workflowId, 'retry');
    await waitFor(
      async () => (await h.client.workflow.getHandle(workflowId).describe()).memo?.machineUpdate as { phase?: string },
      (memo) => memo.phase !== 'Failed',
    );
  };

  it('keeps the node cordoned and marked when the retry fails before its executor, until an attempt succeeds', async () => {
    let upgradeFailures = 1;
    let drainFailures = 0;
    const activities = stubs({
      upgradeFails: () => (upgradeFailures-- > 0 ? 'node agent reported Failed: disk full' : undefined),
      drainFails: () => (drainFailures-- > 0 ? 'drain: 1 blocking: default/solo (declares no controller)' : undefined),
    });
    await h.startWorker(activities);
    const body = updateMachineRequest('v1.33.1', h.name);
    expect(await h.pollUntilDone(body)).toMatchObject({ status: 'Failure' });
    expect(activities.calls.setNodeUpdateFailed).toBe(1);

    // Attempt 2 fails at its drain, before its executor: the node is still the one attempt 1 touched.
    drainFailures = 1;
    await retry(h.idFor(body));
    const failed = await h.pollUntilDone(body);
    expect(failed.message).toMatch(/failed at Drain: drain: 1 blocking/);
    expect(activities.calls.drain).toBe(2);
    expect(activities.calls.uncordon).toBeUndefined();
    // Marked once, with the reason of the attempt that touched it.
    expect(activities.seen.setNodeUpdateFailed).toEqual([
      expect.objectContaining({ reason: `machine fleet-a/${h.name}: node agent reported Failed: disk full` }),
    ]);

    // Attempt 3 upgrades it and sees it Ready on v1.33.1: now it is given back.
    await retry(h.idFor(body));
    expect(await h.pollUntilDone(body)).toMatchObject({ status: 'Success', retryAfterSeconds: 0 });
    expect(activities.calls.clearNodeUpdateFailed).toBe(1);
    expect(activities.calls.uncordon).toBe(1);
    await h.client.workflow.getHandle(h.idFor(body)).result();
    await recordHistoryIfAsked(h.client, h.idFor(body), 'machine-update-touched-retry-failed');
  });

  it('keeps the node cordoned and marked when a retry that never reached its executor is aborted', async () => {
    let upgradeFailures = 1;
    let drainBlocks = false;
    const activities = stubs({
      upgradeFails: () =>
        upgradeFailures-- > 0 ? 'node upgrade Job kube-system/x failed: BackoffLimitExceeded' : undefined,
      drainBlocks: () => drainBlocks,
    });
    await h.startWorker(activities);
    const body = updateMachineRequest('v1.33.1', h.name);
    expect(await h.pollUntilDone(body)).toMatchObject({ status: 'Failure' });
    drainBlocks = true;
    await retry(h.idFor(body));
    await h.waitForStep(h.idFor(body), 'Drain');
    await h.client.workflow.getHandle(h.idFor(body)).signal(abortSignal, { reason: 'on-call stop' });
    const result = (await h.client.workflow.getHandle(h.idFor(body)).result()) as MachineUpdateStatus;
    expect(result.phase).toBe('Aborted');
    expect(await h.call(body)).toMatchObject({
      status: 'Failure',
      message:
        `update of machine fleet-a/${h.name} to v1.33.1 aborted after the node upgrade started: ` +
        'node worker-0 stays cordoned and marked InPlaceUpdateFailed (on-call stop)',
    });
    expect(activities.calls.uncordon).toBeUndefined();
    expect(activities.calls.setNodeUpdateFailed).toBe(1);
    await recordHistoryIfAsked(h.client, h.idFor(body), 'machine-update-touched-retry-aborted');
  });

  it('gives the node back when the node upgrade was refused before anything was created for it', async () => {
    const activities = stubs();
    const refusal = 'no pinned checksums for v1.33.1 in NODE_UPGRADE_CHECKSUMS_FILE /etc/x (docs/node-upgrade-job.md)';
    activities.upgradeNode = async (input) => {
      activities.calls.upgradeNode = (activities.calls.upgradeNode ?? 0) + 1;
      (activities.seen.upgradeNode ??= []).push(input);
      throw ApplicationFailure.nonRetryable(refusal, NODE_UPGRADE_REFUSED);
    };
    await h.startWorker(activities);
    const body = updateMachineRequest('v1.33.1', h.name);
    const failed = await h.pollUntilDone(body);
    expect(failed).toMatchObject({ status: 'Failure' });
    expect(failed.message).toContain(`failed at UpgradeNode: ${refusal}`);
    expect(activities.calls.uncordon).toBe(1);
    expect(activities.calls.setNodeUpdateFailed).toBeUndefined();
  });
});
