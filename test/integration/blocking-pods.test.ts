// Node pacing against the test bed: the blockingPods activity
// lists the pods on one node (field selector spec.nodeName, not Succeeded or
// Failed) that match the blocking pod selector, through the real API server's
// label selector; the preflight returns the Cluster's pacing annotations (they
// win over the settings) and refuses a bad one naming the Cluster and the annotation.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { CustomObjectsApi } from '@kubernetes/client-node';
import { capiCluster, capiMachine, mergePatch, standalonePod, waitFor } from '../../support/testbed-fixtures.ts';
import { machineUpdateTestbed } from '../support/machine-update-testbed.ts';

const bed = machineUpdateTestbed('bpods');
const { group, g, wl, mg, activities, cluster } = bed;
const [a, b] = [`${g}-a`, `${g}-b`];
const A = 'upgrades.capi-orchestrator.io/';
const clusterRef = { group: 'cluster.x-k8s.io', version: 'v1beta2', plural: 'clusters', namespace: g };
const pod = (name: string, nodeName: string, role: string) =>
  wl.core.createNamespacedPod({ namespace: g, body: standalonePod(group, name, { nodeName, labels: { role } }) });

beforeAll(async () => {
  const annotated = capiCluster(cluster.name, g, { topology: false });
  annotated.metadata.annotations = {
    [`${A}blocking-pod-selector`]: 'role in (batch,etl)',
    [`${A}post-update-delay`]: '90s',
  };
  await bed.setUp([a, b], [annotated, capiMachine('m-a', g, { cluster: cluster.name, nodeName: a })]);
});

afterAll(() => bed.tearDown());

describe('blockingPods', () => {
  it('counts the matching pods on the node (first by namespace/name), not those elsewhere or not matching', async () => {
    const selector = 'role in (batch,etl)';
    const check = () => activities.blockingPods({ cluster, nodeName: a, selector });
    expect(await check()).toEqual({ count: 0 });
    await Promise.all([
      pod('etl-2', a, 'etl'),
      pod('batch-1', a, 'batch'),
      pod('web-1', a, 'web'),
      pod('batch-0', b, 'batch'),
    ]);
    expect(await check()).toEqual({ count: 2, first: `${g}/batch-1` });
    expect(await activities.blockingPods({ cluster, nodeName: b, selector })).toEqual({
      count: 1,
      first: `${g}/batch-0`,
    });
    expect(await activities.blockingPods({ cluster, nodeName: a, selector: 'role=web' })).toEqual({
      count: 1,
      first: `${g}/web-1`,
    });

    // Gone from the node (deleted; KWOK finishes the deletion): the hold is released.
    await Promise.all(['etl-2', 'batch-1'].map((name) => wl.core.deleteNamespacedPod({ name, namespace: g })));
    await waitFor('the batch pods gone from node a', async () => (await check()).count === 0);
    expect(await check()).toEqual({ count: 0 });
  }, 60_000);

  it('refuses a node name or selector it would have to put into the query unchecked', async () => {
    await expect(
      activities.blockingPods({ cluster, nodeName: `${a},spec.nodeName!=x`, selector: 'role=batch' }),
    ).rejects.toMatchObject({ nonRetryable: true, type: 'InvalidNodeUpgrade' });
    await expect(activities.blockingPods({ cluster, nodeName: a, selector: 'role in batch' })).rejects.toMatchObject({
      nonRetryable: true,
      type: 'InvalidNodeUpgrade',
    });
  });
});

describe("preflight reads the Cluster's pacing annotations", () => {
  it('returns them (they win over the settings); a bad one fails naming the Cluster and the annotation', async () => {
    const machine = { namespace: g, name: 'm-a' };
    expect(await activities.preflight({ machine })).toEqual({
      nodeName: a,
      clusterName: cluster.name,
      blockingPodSelector: 'role in (batch,etl)',
      postUpdateDelayMs: 90_000,
    });
    const custom = mg.kc.makeApiClient(CustomObjectsApi);
    const annotate = (annotations: Record<string, string | null>) =>
      custom.patchNamespacedCustomObject(
        { ...clusterRef, name: cluster.name, body: { metadata: { annotations } } },
        mergePatch,
      );
    await annotate({ [`${A}blocking-pod-timeout`]: 'an hour' });
    await expect(activities.preflight({ machine })).rejects.toMatchObject({
      nonRetryable: true,
      type: 'InvalidNodeUpgrade',
      message: `Cluster ${g}/${cluster.name} annotation ${A}blocking-pod-timeout="an hour": not a duration (use e.g. 30m, 2h)`,
    });
    await annotate({ [`${A}blocking-pod-timeout`]: '2h' });
    expect(await activities.preflight({ machine })).toMatchObject({ blockingPodTimeoutMs: 7_200_000 });
  });
});
