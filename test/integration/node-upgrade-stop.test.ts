// stopNodeUpgrade against the test bed (real API server, KWOK nodes running the
// Job's pod): an abort after the executor started keeps what the executor said
// last (the Job's newest pod log, which goes with the Job; the agent's status),
// then stops it (the Job and its pods deleted; the NodeUpgradeRequest deleted,
// which the agent contract reads as "stop"), and says whether it had started on
// the node at all.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { BatchV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';
import { NODE_UPGRADE_GROUP, NODE_UPGRADE_PLURAL, NODE_UPGRADE_VERSION } from '../../src/activities/machine-update.ts';
import { delegateExecution } from '../../src/activities/executors/delegate.ts';
import type { ResolvedNodeUpgrade } from '../../src/activities/executors/bootstrap-files.ts';
import { jobExecution } from '../../src/activities/executors/job.ts';
import type { NodeUpgradeInput, NodeUpgradeStopped } from '../../src/activities/machine-update-types.ts';
import { mergePatch, testChecksumsFile, waitFor } from '../../support/testbed-fixtures.ts';
import { machineUpdateTestbed } from '../support/machine-update-testbed.ts';

const bed = machineUpdateTestbed('stop');
const { g, wl, activities, cluster } = bed;
const batch = wl.kc.makeApiClient(BatchV1Api);
const custom = wl.kc.makeApiClient(CustomObjectsApi);
const nurRef = { group: NODE_UPGRADE_GROUP, version: NODE_UPGRADE_VERSION, plural: NODE_UPGRADE_PLURAL, namespace: g };
const nodeName = `${g}-n`;

const VERSION = 'v1.32.4';
/** The job executor's pinned checksums for VERSION (docs/node-upgrade-job.md). */
const jobConfig = { checksumsFile: testChecksumsFile([VERSION]) };
/** What an executor is given: the input with its bootstrap files read (none here). */
const input = (requestName: string, executor: NodeUpgradeInput['executor']): ResolvedNodeUpgrade => ({
  cluster,
  machine: { namespace: g, name: 'm' },
  nodeName,
  version: VERSION,
  files: [],
  executor,
  requestName,
  timeoutMs: 60_000,
});
// The environment's logger would print every expected failure as a warning.
const logger = new DefaultLogger('ERROR');
/** Runs stopNodeUpgrade as the activity's `attempt` (a retry may find gone what its first attempt deleted). */
const stop = async (requestName: string, executor: NodeUpgradeInput['executor'], attempt = 1) =>
  (await new MockActivityEnvironment({ attempt }, { logger }).run(() =>
    activities.stopNodeUpgrade({ cluster, nodeName, executor, requestName }),
  )) as NodeUpgradeStopped;

beforeAll(() => bed.setUp([nodeName]));

afterAll(() => bed.tearDown());

describe('stopNodeUpgrade (job)', () => {
  it('keeps the last lines of the newest pod log, then deletes the Job and its pods', async () => {
    const name = `${g}-job`;
    await jobExecution(wl.kc, g, jobConfig, input(name, 'job')).ensure();
    // The Job's pod ran on the node (the test bed serves test/testbed/upgrade-job-pod-log.txt as its log).
    await waitFor(`a pod of Job ${name} ran`, async () => {
      const pods = await wl.core.listNamespacedPod({
        namespace: g,
        labelSelector: `batch.kubernetes.io/job-name=${name}`,
      });
      return pods.items.some((p) => p.status?.phase !== 'Pending');
    });
    const stopped = await stop(name, 'job');
    expect(stopped).toMatchObject({
      started: true,
      observed: expect.stringMatching(new RegExp(`^Job ${g}/${name}: `)),
    });
    expect(stopped.log?.unavailable).toBeUndefined();
    expect(stopped.log?.pod).toMatch(new RegExp(`^${name}-`));
    expect(stopped.log?.lines).toContain('[node-upgrade] validating inputs');
    await waitFor(`Job ${name} and its pods deleted`, async () => {
      const jobs = (await batch.listNamespacedJob({ namespace: g })).items.map((j) => j.metadata?.name);
      const pods = await wl.core.listNamespacedPod({
        namespace: g,
        labelSelector: `batch.kubernetes.io/job-name=${name}`,
      });
      return !jobs.includes(name) && pods.items.length === 0;
    });
    // A retried stop finds it gone, and cannot tell "deleted by my first attempt" from "never made": started.
    expect(await stop(name, 'job', 2)).toEqual({
      started: true,
      observed: `no Job ${g}/${name} (an earlier attempt of this stop may have deleted it)`,
    });
  });

  it('says the executor never started when its first look finds no Job', async () => {
    expect(await stop(`${g}-none`, 'job')).toEqual({ started: false, observed: `no Job ${g}/${g}-none` });
  });
});

describe('stopNodeUpgrade (delegate)', () => {
  it('keeps the agent status and deletes the request; a request no agent took means the node was not touched', async () => {
    const taken = `${g}-taken`;
    const untaken = `${g}-untaken`;
    await delegateExecution(wl.kc, g, input(taken, 'delegate')).ensure();
    await delegateExecution(wl.kc, g, input(untaken, 'delegate')).ensure();
    await custom.patchNamespacedCustomObjectStatus(
      {
        ...nurRef,
        name: taken,
        body: { status: { phase: 'Running', message: 'kubeadm upgrade node', observedGeneration: 1 } },
      },
      mergePatch,
    );
    expect(await stop(taken, 'delegate')).toEqual({
      started: true,
      observed: `NodeUpgradeRequest ${g}/${taken}: agent reported Running: kubeadm upgrade node`,
    });
    expect(await stop(untaken, 'delegate')).toEqual({
      started: false,
      observed: `NodeUpgradeRequest ${g}/${untaken}: no agent took it`,
    });
    for (const name of [taken, untaken]) {
      await expect(custom.getNamespacedCustomObject({ ...nurRef, name })).rejects.toMatchObject({ code: 404 });
    }
    expect(await stop(taken, 'delegate')).toEqual({ started: false, observed: `no NodeUpgradeRequest ${g}/${taken}` });
    expect(await stop(taken, 'delegate', 2)).toMatchObject({ started: true });
  });
});
