// Proof that the test bed is real (the integration tier trusts it to behave as a
// cluster does): PodDisruptionBudgets enforced by
// the API server's eviction endpoint and the disruption controller, evicted pods
// replaced by the ReplicaSet controller and placed by the scheduler, KWOK node
// state visible through the activities' client code, and the workload cluster
// reached through the management cluster's kubeconfig Secret.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { CoreV1Api, VersionApi, type V1Pod } from '@kubernetes/client-node';
import { ApplicationFailure } from '@temporalio/common';
import { managementKubeConfig } from '../../src/platform/kube/clients.ts';
import { stableFailure } from '../../src/activities/failures.ts';
import { KubeError, statusCode } from '../../src/platform/kube/errors.ts';
import {
  WORKLOAD_KUBECONFIG_INVALID,
  WORKLOAD_KUBECONFIG_MISSING,
  workloadKubeConfig,
} from '../../src/platform/kube/workload-clusters.ts';
import {
  cordon,
  createKubeconfigSecret,
  createNamespace,
  createNodes,
  deleteGroup,
  deployment,
  kwokNode,
  managementApi,
  mergePatch,
  nodeReadyStatus,
  podDisruptionBudget,
  setKubeletVersion,
  setNodeReady,
  strategicPatch,
  testbed,
  testGroup,
  waitFor,
  waitForRunningPods,
  workloadApi,
  createWorkloadNamespace,
} from '../../support/testbed-fixtures.ts';

const group = testGroup('tb');
const wl = workloadApi();
const mg = managementApi();
const [n1, n2] = [`${group.name}-n-1`, `${group.name}-n-2`];

async function evict(pod: V1Pod): Promise<number> {
  const name = pod.metadata?.name ?? '';
  const namespace = pod.metadata?.namespace ?? '';
  try {
    await wl.core.createNamespacedPodEviction({ name, namespace, body: { metadata: { name, namespace } } });
    return 201;
  } catch (err) {
    const code = statusCode(err);
    if (code === undefined) throw err;
    return code;
  }
}

beforeAll(async () => {
  await Promise.all([createWorkloadNamespace(wl, group.name), createNamespace(mg.core, group.name)]);
  await createNodes(wl.core, [kwokNode(group, n1), kwokNode(group, n2)]);
});

afterAll(async () => {
  await deleteGroup(wl, group);
  await mg.core.deleteNamespace({ name: group.name }).catch(() => undefined);
});

describe('test bed', () => {
  it('enforces a PodDisruptionBudget on eviction (429) until the disruption controller sees a new ready replica', async () => {
    await wl.apps.createNamespacedDeployment({ namespace: group.name, body: deployment(group, 'guarded') });
    await wl.policy.createNamespacedPodDisruptionBudget({
      namespace: group.name,
      body: podDisruptionBudget(group, 'guarded', { app: 'guarded' }, { minAvailable: 1 }),
    });
    const [pod] = await waitForRunningPods(wl.core, group.name, 'app=guarded', 1);
    await waitFor('the disruption controller to count the pod', async () => {
      const pdb = await wl.policy.readNamespacedPodDisruptionBudget({ name: 'guarded', namespace: group.name });
      return pdb.status?.currentHealthy === 1 && pdb.status.disruptionsAllowed === 0;
    });

    expect(await evict(pod!)).toBe(429);

    await wl.apps.patchNamespacedDeployment(
      { name: 'guarded', namespace: group.name, body: { spec: { replicas: 2 } } },
      mergePatch,
    );
    await waitFor('the budget to allow one disruption', async () => {
      const pdb = await wl.policy.readNamespacedPodDisruptionBudget({ name: 'guarded', namespace: group.name });
      return pdb.status?.currentHealthy === 2 && pdb.status.disruptionsAllowed === 1;
    });
    expect(await evict(pod!)).toBe(201);
    // KWOK's pod-delete stage removes the evicted pod once its delay (1s) has passed.
    await waitFor('the evicted pod to go away', async () => {
      const pods = await wl.core.listNamespacedPod({ namespace: group.name, labelSelector: 'app=guarded' });
      return !pods.items.some((p) => p.metadata?.name === pod!.metadata?.name);
    });
  });

  it('replaces an evicted ReplicaSet pod on another, uncordoned node, where KWOK runs it', async () => {
    await wl.apps.createNamespacedDeployment({ namespace: group.name, body: deployment(group, 'mover') });
    const [pod] = await waitForRunningPods(wl.core, group.name, 'app=mover', 1);
    const from = pod!.spec?.nodeName ?? '';
    expect([n1, n2]).toContain(from);
    const to = from === n1 ? n2 : n1;
    await cordon(wl.core, from);
    try {
      expect(await evict(pod!)).toBe(201);
      const [replacement] = await waitFor('the replacement to run', async () => {
        const pods = await waitForRunningPods(wl.core, group.name, 'app=mover', 1);
        return pods[0]?.metadata?.name !== pod!.metadata?.name ? pods : undefined;
      });
      expect(replacement!.spec?.nodeName).toBe(to);
      expect(replacement!.status?.phase).toBe('Running');
      expect(replacement!.metadata?.ownerReferences?.[0]?.kind).toBe('ReplicaSet');
    } finally {
      await cordon(wl.core, from, false);
    }
  });

  it('shows KWOK node kubelet versions and Ready conditions through the activities client', async () => {
    const tb = testbed();
    const management = managementKubeConfig(tb.workerKubeconfig);
    const kc = await workloadKubeConfig(management, { namespace: tb.namespace, name: tb.clusterName });
    const core = kc.makeApiClient(CoreV1Api);

    await setKubeletVersion(wl.core, n1, 'v1.32.4');
    expect((await core.readNode({ name: n1 })).status?.nodeInfo?.kubeletVersion).toBe('v1.32.4');

    // A plain Ready=False is stored by the API server, then KWOK re-initialises the node at once.
    const patched = await wl.core.patchNodeStatus(
      {
        name: n2,
        body: { status: { conditions: [{ type: 'Ready', status: 'False', reason: 'Test', message: 't' }] } },
      },
      strategicPatch,
    );
    expect(patched.status?.conditions?.find((c) => c.type === 'Ready')?.status).toBe('False');
    await waitFor('KWOK to mark the node Ready again', async () => (await nodeReadyStatus(core, n2)) === 'True');

    // Held NotReady (an admission policy refuses KWOK's update) it stays so, with the version kept.
    await setNodeReady(wl, n1, false);
    try {
      const node = await core.readNode({ name: n1 });
      expect(node.status?.conditions?.find((c) => c.type === 'Ready')?.status).toBe('False');
      expect(node.status?.nodeInfo?.kubeletVersion).toBe('v1.32.4');
    } finally {
      await setNodeReady(wl, n1, true);
    }
    expect(await nodeReadyStatus(core, n1)).toBe('True');
  });

  it('reaches the workload cluster with the kubeconfig read from the management cluster Secret', async () => {
    const tb = testbed();
    const management = managementKubeConfig(tb.workerKubeconfig);
    const kc = await workloadKubeConfig(management, { namespace: tb.namespace, name: tb.clusterName });
    expect(kc.getCurrentCluster()?.server).toBe(tb.workloadServer);
    const version = await kc.makeApiClient(VersionApi).getCode();
    expect(version.gitVersion).toBe(tb.kubeVersion);
    const nodes = await kc.makeApiClient(CoreV1Api).listNode({ labelSelector: `capi-uo.test/group=${group.name}` });
    expect(nodes.items.map((n) => n.metadata?.name).sort()).toEqual([n1, n2]);

    // Cached per cluster while the Secret's resourceVersion stays; rebuilt when it changes
    // (read again once the cached one is older than maxAge: 0 here).
    const cluster = { namespace: group.name, name: 'rotating' };
    await createKubeconfigSecret(mg.core, group.name, cluster.name);
    const first = await workloadKubeConfig(management, cluster, 0);
    expect(await workloadKubeConfig(management, cluster, 0)).toBe(first);
    await mg.core.patchNamespacedSecret(
      { name: 'rotating-kubeconfig', namespace: group.name, body: { metadata: { labels: { rotated: 'yes' } } } },
      mergePatch,
    );
    const second = await workloadKubeConfig(management, cluster, 0);
    expect(second).not.toBe(first);
    expect(second.getCurrentCluster()?.server).toBe(tb.workloadServer);
  });

  it('reads the kubeconfig Secret once for many activities asking at once: one KubeConfig, one set of connections', async () => {
    const management = managementKubeConfig(testbed().workerKubeconfig);
    const cluster = { namespace: group.name, name: 'herd' };
    await createKubeconfigSecret(mg.core, group.name, cluster.name);
    // 20 machine updates starting together, before anything is cached.
    const configs = await Promise.all(Array.from({ length: 20 }, () => workloadKubeConfig(management, cluster)));
    expect(new Set(configs).size).toBe(1);
    expect(await workloadKubeConfig(management, cluster)).toBe(configs[0]);
  });

  it('reads the kubeconfig Secret at most once per maxAge: within it, not at all', async () => {
    const management = managementKubeConfig(testbed().workerKubeconfig);
    const cluster = { namespace: group.name, name: 'cached' };
    await createKubeconfigSecret(mg.core, group.name, cluster.name);
    const first = await workloadKubeConfig(management, cluster, 60_000);
    await mg.core.deleteNamespacedSecret({ name: 'cached-kubeconfig', namespace: group.name });
    // The Secret is gone, yet within maxAge the cached config answers without a read.
    expect(await workloadKubeConfig(management, cluster, 60_000)).toBe(first);
    // Past maxAge the Secret is read again, and its absence shows.
    await expect(workloadKubeConfig(management, cluster, 0)).rejects.toMatchObject({
      type: WORKLOAD_KUBECONFIG_MISSING,
    });
  });

  it('marks a missing or unusable kubeconfig Secret non-retryable', async () => {
    const management = managementKubeConfig(testbed().workerKubeconfig);
    const missing = await workloadKubeConfig(management, { namespace: group.name, name: 'absent' }).catch(
      (err: unknown) => err,
    );
    // A plain KubeError from the platform; an activity's edge makes it a non-retryable ApplicationFailure.
    expect(missing).toBeInstanceOf(KubeError);
    expect(stableFailure(missing)).toBeInstanceOf(ApplicationFailure);
    expect(stableFailure(missing)).toMatchObject({ nonRetryable: true, type: WORKLOAD_KUBECONFIG_MISSING });
    expect((missing as Error).message).toBe(
      `Secret ${group.name}/absent-kubeconfig not found: cannot reach workload cluster ${group.name}/absent`,
    );

    await mg.core.createNamespacedSecret({
      namespace: group.name,
      body: { metadata: { name: 'broken-kubeconfig' }, stringData: { value: 'not: [a kubeconfig' } },
    });
    const broken = await workloadKubeConfig(management, { namespace: group.name, name: 'broken' }).catch(
      (err: unknown) => err,
    );
    expect(stableFailure(broken)).toMatchObject({ nonRetryable: true, type: WORKLOAD_KUBECONFIG_INVALID });
  });
});
