// MachineHealthCheck and in-place updates: the Machine carries
// cluster.x-k8s.io/skip-remediation from before the drain until the node is back
// Ready and uncordoned, and loses it on every way out (success, failure, abort),
// before CAPI is answered; the drain gets the skip selector, the
// Cluster's annotation winning over the setting. Real dev server, real worker,
// real UpdateMachine over HTTPS; activities stubbed.
import { describe, expect, it } from '@jest/globals';
import type { DrainOptions } from '../../src/activities/machine-update-types.ts';
import { machineUpdateHarness, stubs, updateMachineRequest } from '../support/machine-update-workflow.ts';
import { recordHistoryIfAsked } from '../support/record-history.ts';
import { temporalSignal } from '../support/temporal-cli.ts';
import { waitFor } from '../support/wait.ts';

/** The calls in order, without the stubs' cancellation notes (they land whenever the cancellation does). */
const steps = (activities: ReturnType<typeof stubs>) => activities.order.filter((n) => !n.endsWith('Cancelled'));
/** Every run's calls up to the drain: skip-remediation goes on right before it. */
const throughDrain = ['preflight', 'cordon', 'holdRemediation', 'drain'];
const drainOptions = (activities: ReturnType<typeof stubs>) =>
  (activities.seen.drain as { options: DrainOptions }[]).map((i) => i.options.skipPodSelector);

describe('skip-remediation on the Machine while it updates in place', () => {
  const h = machineUpdateHarness();

  it('is set before the drain and removed after the uncordon, before CAPI hears done; the drain skips the selected pods', async () => {
    const activities = stubs();
    await h.startWorker(activities);
    const body = updateMachineRequest('v1.33.1', h.name, [], { drainSkipPodSelector: 'tier=control-plane' });
    expect(await h.pollUntilDone(body)).toMatchObject({ status: 'Success', retryAfterSeconds: 0 });
    expect(steps(activities)).toEqual([
      ...throughDrain,
      'upgradeNode',
      'waitForNodeVersion',
      'clearNodeUpdateFailed',
      'uncordon',
      'releaseRemediation',
    ]);
    const machine = { namespace: 'fleet-a', name: h.name };
    expect(activities.seen.holdRemediation).toEqual([{ machine }]);
    expect(activities.seen.releaseRemediation).toEqual([{ machine }]);
    expect(drainOptions(activities)).toEqual(['tier=control-plane']);
    await h.client.workflow.getHandle(h.idFor(body)).result();
    await recordHistoryIfAsked(h.client, h.idFor(body), 'machine-update-remediation-held');
  });

  it("drains with the Cluster's skip selector over the setting's", async () => {
    const activities = stubs({ preflight: { drainSkipPodSelector: 'component=etcd' } });
    await h.startWorker(activities);
    const body = updateMachineRequest('v1.33.1', h.name, [], { drainSkipPodSelector: 'tier=control-plane' });
    expect(await h.pollUntilDone(body)).toMatchObject({ status: 'Success', retryAfterSeconds: 0 });
    expect(drainOptions(activities)).toEqual(['component=etcd']);
  });

  it('is removed when the update fails past the executor (so InPlaceUpdateFailed can be remediated), and set again by the retry', async () => {
    let failures = 1;
    const activities = stubs({
      upgradeFails: () => (failures-- > 0 ? 'node agent reported Failed: disk full' : undefined),
    });
    await h.startWorker(activities);
    const body = updateMachineRequest('v1.33.1', h.name);
    expect(await h.pollUntilDone(body)).toMatchObject({ status: 'Failure' });
    expect(steps(activities)).toEqual([
      ...throughDrain,
      'upgradeNode',
      'cleanupNodeUpgrade',
      'setNodeUpdateFailed',
      'releaseRemediation',
    ]);
    await temporalSignal(h.idFor(body), 'retry');
    await waitFor(
      async () =>
        (await h.client.workflow.getHandle(h.idFor(body)).describe()).memo?.machineUpdate as { phase?: string },
      (memo) => memo.phase !== 'Failed',
    );
    expect(await h.pollUntilDone(body)).toMatchObject({ status: 'Success', retryAfterSeconds: 0 });
    expect(activities.calls.holdRemediation).toBe(2);
    expect(activities.calls.releaseRemediation).toBe(2);
    expect(steps(activities).at(-1)).toBe('releaseRemediation');
    await h.client.workflow.getHandle(h.idFor(body)).result();
    await recordHistoryIfAsked(h.client, h.idFor(body), 'machine-update-remediation-failed-and-retried');
  });

  /** Starts an update, aborts it once it reached `step`, and waits for UpdateMachine's Failure. */
  const abortAt = async (activities: ReturnType<typeof stubs>, step: 'Drain' | 'UpgradeNode') => {
    await h.startWorker(activities);
    const body = updateMachineRequest('v1.33.1', h.name);
    await h.call(body);
    await h.waitForStep(h.idFor(body), step);
    await temporalSignal(h.idFor(body), 'abort', JSON.stringify({ reason: 'on-call stop' }));
    expect(await h.pollUntilDone(body)).toMatchObject({ status: 'Failure' });
    return body;
  };

  it('is removed when the drain fails (the node given back)', async () => {
    const activities = stubs({ drainFails: () => 'drain: 1 blocking: default/solo (declares no controller)' });
    await h.startWorker(activities);
    expect(await h.pollUntilDone(updateMachineRequest('v1.33.1', h.name))).toMatchObject({ status: 'Failure' });
    expect(steps(activities)).toEqual([...throughDrain, 'uncordon', 'releaseRemediation']);
  });

  it('is removed when aborted mid-drain', async () => {
    const activities = stubs({ drainBlocks: () => true });
    await abortAt(activities, 'Drain');
    expect(steps(activities)).toEqual([...throughDrain, 'uncordon', 'releaseRemediation']);
  });

  it('is removed when aborted after the node upgrade started (the node kept cordoned and marked)', async () => {
    const activities = stubs({ upgradeBlocks: () => true });
    const body = await abortAt(activities, 'UpgradeNode');
    expect(steps(activities)).toEqual([
      ...throughDrain,
      'upgradeNode',
      'stopNodeUpgrade',
      'setNodeUpdateFailed',
      'releaseRemediation',
    ]);
    await h.client.workflow.getHandle(h.idFor(body)).result();
    await recordHistoryIfAsked(h.client, h.idFor(body), 'machine-update-remediation-aborted-after-executor');
  });
});
