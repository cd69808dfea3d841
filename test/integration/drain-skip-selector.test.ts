// The drain's skip selector (setting drainSkipPodSelector, Cluster annotation
// upgrades.capi-orchestrator.io/drain-skip-pod-selector) against the test bed:
// pods shaped like CAPD's in-memory "static pods" (plain kube-system-style pods
// labelled component=…, tier=control-plane, no controller, no mirror
// annotation) block a drain until the selector names them; then they are
// neither evicted, deleted, counted as blocking nor waited for while
// terminating, and the rest of the node drains as before.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { CustomObjectsApi } from '@kubernetes/client-node';
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';
import type { DrainOptions, DrainResult } from '../../src/activities/machine-update-types.ts';
import {
  capiCluster,
  capiMachine,
  deployment,
  mergePatch,
  standalonePod,
  waitFor,
  waitForRunningPods,
} from '../../support/testbed-fixtures.ts';
import { machineUpdateTestbed } from '../support/machine-update-testbed.ts';

const bed = machineUpdateTestbed('dskip');
const { group, g, wl, mg, activities, cluster } = bed;
const s = `${g}-s`;
const logger = new DefaultLogger('ERROR');
const ANNOTATION = 'upgrades.capi-orchestrator.io/drain-skip-pod-selector';
/** The selector that skips CAPD's in-memory control-plane pods (the real-CAPI tier sets it). */
const CAPD_STATIC_PODS = 'tier=control-plane,component in (etcd,kube-apiserver,kube-controller-manager,kube-scheduler)';
const staticLabels = (component: string) => ({ component, tier: 'control-plane' });
const clusterRef = { group: 'cluster.x-k8s.io', version: 'v1beta2', plural: 'clusters', namespace: g };

async function drain(options: Partial<DrainOptions>): Promise<DrainResult> {
  const env = new MockActivityEnvironment(undefined, { logger });
  return (await env.run(activities.drain, {
    cluster,
    nodeName: s,
    options: { deleteEmptyDirData: false, force: false, timeoutMs: 5_000, ...options },
  })) as DrainResult;
}

beforeAll(async () => {
  const annotated = capiCluster(cluster.name, g, { topology: false });
  annotated.metadata.annotations = { [ANNOTATION]: CAPD_STATIC_PODS };
  await bed.setUp([s], [annotated, capiMachine('m-s', g, { cluster: cluster.name, nodeName: s })]);
});

afterAll(async () => {
  await wl.core.deleteNamespacedPod({ name: 'etcd', namespace: g, gracePeriodSeconds: 0 }).catch(() => undefined);
  await bed.tearDown();
});

describe('preflight reads the drain skip selector of the Cluster', () => {
  it('returns the annotation (it wins over the setting); a bad one fails naming the Cluster and the annotation', async () => {
    const custom = mg.kc.makeApiClient(CustomObjectsApi);
    expect(await activities.preflight({ machine: { namespace: g, name: 'm-s' } })).toEqual({
      nodeName: s,
      clusterName: cluster.name,
      drainSkipPodSelector: CAPD_STATIC_PODS,
    });
    const annotate = (value: string) =>
      custom.patchNamespacedCustomObject(
        { ...clusterRef, name: cluster.name, body: { metadata: { annotations: { [ANNOTATION]: value } } } },
        mergePatch,
      );
    try {
      await annotate('tier=control-plane,component in kube-apiserver');
      await expect(activities.preflight({ machine: { namespace: g, name: 'm-s' } })).rejects.toMatchObject({
        nonRetryable: true,
        type: 'InvalidNodeUpgrade',
        message:
          `Cluster ${g}/${cluster.name} annotation ${ANNOTATION}="tier=control-plane,component in kube-apiserver": ` +
          'not a usable label selector: expected "(" after component in, found "kube-apiserver"',
      });
      await annotate('!app');
      await expect(activities.preflight({ machine: { namespace: g, name: 'm-s' } })).rejects.toMatchObject({
        nonRetryable: true,
        message: expect.stringContaining('a skip selector needs a requirement on a label pods have'),
      });
    } finally {
      await annotate(CAPD_STATIC_PODS);
    }
  });
});

describe('drain with a skip selector', () => {
  it('leaves CAPD-like static pods alone (not evicted, deleted, blocking or waited for) and drains the rest', async () => {
    const onS = { nodeName: s };
    await Promise.all([
      wl.core.createNamespacedPod({
        namespace: g,
        body: standalonePod(group, 'kube-apiserver', { ...onS, labels: staticLabels('kube-apiserver') }),
      }),
      // KWOK keeps this one terminating for an hour once deleted.
      wl.core.createNamespacedPod({
        namespace: g,
        body: standalonePod(group, 'etcd', { ...onS, labels: staticLabels('etcd'), deleteDelay: '1h' }),
      }),
      wl.apps.createNamespacedDeployment({
        namespace: g,
        body: deployment(group, 'web', { nodeSelector: { ...group.nodeSelector, 'kubernetes.io/hostname': s } }),
      }),
    ]);
    await Promise.all([
      waitForRunningPods(wl.core, g, 'app=kube-apiserver', 1),
      waitForRunningPods(wl.core, g, 'app=etcd', 1),
      waitForRunningPods(wl.core, g, 'app=web', 1),
    ]);
    const uid = async (name: string) => (await wl.core.readNamespacedPod({ name, namespace: g })).metadata?.uid;
    const [apiserverUid, etcdUid] = [await uid('kube-apiserver'), await uid('etcd')];
    await wl.core.deleteNamespacedPod({ name: 'etcd', namespace: g });
    await waitFor('etcd terminating', async () =>
      (await wl.core.readNamespacedPod({ name: 'etcd', namespace: g })).metadata?.deletionTimestamp ? true : false,
    );
    await activities.cordon({ cluster, nodeName: s });

    // Without the selector the plain pod without a controller blocks, as kubectl drain would.
    await expect(drain({})).rejects.toMatchObject({
      nonRetryable: true,
      type: 'DrainBlocked',
      message: `cannot drain node ${s}: drain: 1 to evict, 0 skipped, 1 blocking: ${g}/kube-apiserver (declares no controller)`,
    });

    // With it: the Deployment's pod is evicted; the static pods stay, the terminating one is not waited for.
    expect(await drain({ skipPodSelector: CAPD_STATIC_PODS })).toEqual({
      evicted: 1,
      deleted: 0,
      forceDeleted: 0,
      skipped: 1,
    });
    expect(await uid('kube-apiserver')).toBe(apiserverUid);
    expect(await uid('etcd')).toBe(etcdUid);
    const webLeft = (await wl.core.listNamespacedPod({ namespace: g, labelSelector: 'app=web' })).items.filter(
      (p) => p.spec?.nodeName === s && !p.metadata?.deletionTimestamp,
    );
    expect(webLeft).toEqual([]);

    // A blank selector skips nothing; a bad one is refused before any pod is touched.
    await expect(drain({ skipPodSelector: '  ' })).rejects.toMatchObject({ type: 'DrainBlocked' });
    await expect(drain({ skipPodSelector: 'tier in (' })).rejects.toMatchObject({
      nonRetryable: true,
      type: 'InvalidNodeUpgrade',
      message: expect.stringContaining('drain skipPodSelector="tier in (": not a usable label selector'),
    });
    expect(await uid('kube-apiserver')).toBe(apiserverUid);
  }, 60_000);
});
