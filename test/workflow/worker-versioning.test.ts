// Worker Versioning on the real dev server: build A runs a
// cluster upgrade waiting for CAPI's next hook call (AUTO_UPGRADE) and a machine
// update in its node upgrade (PINNED); build B starts and is made current the
// way the post-rollout Job does it. The machine update finishes on A, the
// cluster upgrade's next step runs on B, and new runs start on B. Real hook
// server over HTTPS, real workers; activities stubbed (each build its own, so
// they say which build ran them).
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Client } from '@temporalio/client';
import { decodeVersioningBehavior } from '@temporalio/common';
import type { MachineUpdateInput, MachineUpdateStatus } from '../../src/model/machine-update.ts';
import {
  currentBuildId,
  pinnedRunsQuery,
  promoteWorkerVersion,
  waitForDrain,
} from '../../src/platform/temporal/worker-deployment.ts';
import { workerDeploymentOptions, type WorkerVersioning } from '../../src/platform/temporal/worker-versioning.ts';
import { stubs } from '../support/machine-update-workflow.ts';
import { startTestWorker } from '../support/temporal.ts';
import {
  beforeClusterUpgrade,
  startUpgradeHarness,
  steps,
  stubUpgradeActivities,
  type UpgradeHarness,
} from '../support/upgrade-harness.ts';
import { waitFor } from '../support/wait.ts';

/** Which build a run is on and how it moves, as the server records it. */
async function versioningOf(client: Client, workflowId: string) {
  const { raw } = await client.workflow.getHandle(workflowId).describe();
  const info = raw.workflowExecutionInfo?.versioningInfo;
  return { buildId: info?.deploymentVersion?.buildId, behavior: decodeVersioningBehavior(info?.behavior) };
}

describe('worker versioning: a new build while runs are in flight', () => {
  let h: UpgradeHarness;
  const deploymentName = `capi-uo-test-${randomUUID().slice(0, 8)}`;
  const buildA: WorkerVersioning = { deploymentName, buildId: 'build-a' };
  const buildB: WorkerVersioning = { deploymentName, buildId: 'build-b' };
  const upgradeA = stubUpgradeActivities();
  const upgradeB = stubUpgradeActivities();
  let nodeUpgradeHeld = true;
  const machineA = stubs({ upgradeBlocks: () => nodeUpgradeHeld });
  const machineB = stubs();
  const stops: (() => Promise<void>)[] = [];
  const startBuild = async (v: WorkerVersioning, activities: object) => {
    const { stop } = await startTestWorker({
      taskQueue: h.taskQueue,
      activities,
      workerDeploymentOptions: workerDeploymentOptions(v),
    });
    stops.push(stop);
  };
  const promote = (v: WorkerVersioning) =>
    promoteWorkerVersion(h.client.connection, h.client.options.namespace, v, { timeoutMs: 60_000, pollMs: 250 });
  const machineInput = (name: string): MachineUpdateInput => ({
    machine: { namespace: 'fleet-a', name },
    clusterName: 'prod-1',
    version: 'v1.33.1',
    specHash: 'versioning',
    executor: 'delegate',
    deleteEmptyDirData: false,
    forceDrainUnmanagedPods: false,
    drainTimeoutMs: 60_000,
    nodeUpgradeTimeoutMs: 10 * 60_000,
  });
  const startMachineUpdate = (name: string) =>
    h.client.workflow.start('machineUpdateWorkflow', {
      taskQueue: h.taskQueue,
      workflowId: `machine-update/versioning/${name}/${randomUUID()}`,
      args: [machineInput(name)],
    });

  beforeAll(async () => {
    h = await startUpgradeHarness();
  });
  afterAll(async () => {
    await h.client.workflow
      .getHandle(h.workflowId)
      .terminate('test over')
      .catch(() => undefined);
    for (const stop of stops.reverse()) await stop();
    await h.close();
  });

  it('finishes the pinned machine update on A, moves the waiting cluster upgrade to B, and starts new runs on B', async () => {
    await startBuild(buildA, { ...upgradeA, ...machineA });
    expect(await promote(buildA)).toBe('promoted');

    // On A: the cluster upgrade passed BeforeClusterUpgrade and waits for the control plane's turn.
    expect(await h.pollUntilDone('BeforeClusterUpgrade', beforeClusterUpgrade())).toMatchObject({
      status: 'Success',
      retryAfterSeconds: 0,
    });
    expect(await versioningOf(h.client, h.workflowId)).toEqual({ buildId: 'build-a', behavior: 'AUTO_UPGRADE' });
    const healthChecksOnA = upgradeA.calls.health.length;
    expect(healthChecksOnA).toBeGreaterThan(0);

    // On A: a machine update held in its node upgrade.
    const pinned = await startMachineUpdate('m-pinned');
    await waitFor(
      async () => machineA.calls.upgradeNode ?? 0,
      (n) => n === 1,
    );
    expect(await versioningOf(h.client, pinned.workflowId)).toEqual({ buildId: 'build-a', behavior: 'PINNED' });

    // Build B rolls out and is made current; A keeps running for what is pinned to it.
    await startBuild(buildB, { ...upgradeB, ...machineB });
    expect(await promote(buildB)).toBe('promoted');
    expect(await currentBuildId(h.client.connection, h.client.options.namespace, deploymentName)).toBe('build-b');
    expect(await promote(buildB)).toBe('already-current');

    // The cluster upgrade's next steps run on B (its code and its activities: the health probe).
    expect(
      await h.pollUntilDone('BeforeControlPlaneUpgrade', {
        fromKubernetesVersion: 'v1.30.5',
        toKubernetesVersion: 'v1.31.14',
        controlPlaneUpgrades: steps('v1.31.14', 'v1.32.13', 'v1.33.0'),
        workersUpgrades: steps('v1.33.0'),
      }),
    ).toMatchObject({ status: 'Success', retryAfterSeconds: 0 });
    expect(
      await h.pollUntilDone('AfterControlPlaneUpgrade', {
        kubernetesVersion: 'v1.31.14',
        controlPlaneUpgrades: steps('v1.32.13', 'v1.33.0'),
        workersUpgrades: steps('v1.33.0'),
      }),
    ).toMatchObject({ status: 'Success', retryAfterSeconds: 0 });
    expect(await versioningOf(h.client, h.workflowId)).toEqual({ buildId: 'build-b', behavior: 'AUTO_UPGRADE' });
    expect(upgradeB.calls.health.length).toBeGreaterThan(0);
    expect(upgradeA.calls.health.length).toBe(healthChecksOnA);

    // A stopping worker of A (a rolling update) waits for the run pinned to A; one of B (current) does not.
    expect(await waitForDrain(h.client, buildB, { timeoutMs: 60_000, pollMs: 250, settleMs: 0 })).toBe('still-current');
    await waitFor(
      async () => (await h.client.workflow.count(pinnedRunsQuery(buildA))).count,
      (n) => n === 1,
    );
    let drainedA: string | undefined;
    const drainA = waitForDrain(h.client, buildA, { timeoutMs: 60_000, pollMs: 250 }).then((o) => (drainedA = o));
    await new Promise((r) => setTimeout(r, 1_000));
    expect(drainedA).toBeUndefined();

    // The pinned machine update finishes where it started: every step after the switch on A.
    nodeUpgradeHeld = false;
    expect(await drainA).toBe('drained');
    const done = (await pinned.result()) as MachineUpdateStatus;
    expect(done.phase).toBe('Succeeded');
    expect(await versioningOf(h.client, pinned.workflowId)).toEqual({ buildId: 'build-a', behavior: 'PINNED' });
    expect(machineA.calls.waitForNodeVersion).toBe(1);
    expect(machineA.calls.uncordon).toBe(1);
    expect(machineB.calls.preflight).toBeUndefined();

    // A new machine update starts (and finishes) on B.
    const fresh = await startMachineUpdate('m-fresh');
    expect(((await fresh.result()) as MachineUpdateStatus).phase).toBe('Succeeded');
    expect(await versioningOf(h.client, fresh.workflowId)).toEqual({ buildId: 'build-b', behavior: 'PINNED' });
    expect(machineB.calls.upgradeNode).toBe(1);
    expect(machineA.calls.upgradeNode).toBe(1);
  });
});
