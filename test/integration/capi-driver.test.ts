// The CAPI driver of the real-node tier (test/support/nodes/capi-driver.ts) against the
// test bed's KWOK workload cluster: UpdateMachine in CAPI's shape and order, the real
// handler with request checks on, the real worker with the `job` executor. What KWOK
// cannot do is the kubelet's part: its fake kubelet completes the Job's pod but never
// reports a new version, so the test sets the node's kubeletVersion once the Job
// completed, as the upgraded kubelet would.
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { BatchV1Api, type V1Job } from '@kubernetes/client-node';
import { isConflict } from '../../src/platform/kube/errors.ts';
import { NODE_NAME_LABEL } from '../../src/activities/machine-update.ts';
import { PENDING_HOOKS_ANNOTATION, UPDATE_IN_PROGRESS_ANNOTATION } from '../../src/api/handlers/request-checks.ts';
import {
  createNodes,
  deleteGroup,
  getCapiObject,
  kwokNode,
  managementApi,
  setKubeletVersion,
  testbed,
  testChecksumsFile,
  testDigest,
  testGroup,
  waitFor,
  workloadApi,
} from '../../support/testbed-fixtures.ts';
import { startCapiDriver, type Answer, type CapiDriver } from '../support/nodes/capi-driver.ts';

const group = testGroup('capid');
const g = group.name;
const wl = workloadApi();
const mg = managementApi();
const batch = wl.kc.makeApiClient(BatchV1Api);
const OLD = 'v1.31.14';
const NEW = 'v1.32.4';
const cp = `${g}-cp`;
const w = `${g}-w`;
const EXECUTOR_NAMESPACE = 'kube-system';
const KUBEADM_CONFIG = 'kubeadm-config';
const IMAGE = 'registry.example/node-upgrade@sha256:' + 'a'.repeat(64);
const BINARY_SOURCE = 'https://binaries.example/release';

let driver: CapiDriver;
let createdKubeadmConfig = false;

/** The executor's Job for `node` once it completed (KWOK's fake kubelet runs its pod to Succeeded). */
async function completedJob(node: string): Promise<V1Job> {
  return await waitFor(
    `the upgrade Job of node ${node} to complete`,
    async () => {
      const [job] = (
        await batch.listNamespacedJob({ namespace: EXECUTOR_NAMESPACE, labelSelector: `${NODE_NAME_LABEL}=${node}` })
      ).items;
      return job?.status?.conditions?.some((c) => c.type === 'Complete' && c.status === 'True') ? job : undefined;
    },
    { timeoutMs: 90_000, intervalMs: 250 },
  );
}

/** Runs the update; once the Job completed, the kubelet "restarts" on the new version. Its Job and the answers. */
async function update(node: string): Promise<{ job: V1Job; answers: Answer[] }> {
  const answers = driver.updateMachine(node, NEW);
  answers.catch(() => undefined); // awaited below
  const job = await completedJob(node);
  await setKubeletVersion(wl.core, node, NEW);
  return { job, answers: await answers };
}

function expectJob(job: V1Job, node: string, mode: 'apply' | 'node', files = false) {
  const pod = job.spec?.template.spec;
  expect(pod).toMatchObject({ nodeName: node, hostPID: true, hostNetwork: true, restartPolicy: 'Never' });
  const container = pod?.containers[0];
  expect(container?.image).toBe(IMAGE);
  expect(container?.securityContext?.privileged).toBe(true);
  expect(container?.env).toEqual([
    { name: 'KUBERNETES_VERSION', value: NEW },
    { name: 'UPGRADE_MODE', value: mode },
    { name: 'NODE_NAME', value: node },
    { name: 'HOST_ROOT', value: '/host' },
    ...(files ? [{ name: 'FILES_DIR', value: '/files' }] : []),
    { name: 'BINARY_SOURCE', value: BINARY_SOURCE },
    { name: 'ARCH', value: 'amd64' },
    { name: 'KUBEADM_SHA256', value: testDigest(NEW, 'kubeadm') },
    { name: 'KUBELET_SHA256', value: testDigest(NEW, 'kubelet') },
    { name: 'KUBECTL_SHA256', value: testDigest(NEW, 'kubectl') },
  ]);
}

/** CAPI's answers: Success while it runs (retry after 10 s), then Success with 0 naming the machine and version. */
function expectDone(answers: Answer[], machine: string) {
  expect(answers.length).toBeGreaterThan(1);
  for (const a of answers.slice(0, -1)) expect(a).toMatchObject({ status: 'Success', retryAfterSeconds: 10 });
  expect(answers.at(-1)).toMatchObject({
    status: 'Success',
    message: `machine ${driver.namespace}/${machine} updated to ${NEW}`,
    retryAfterSeconds: 0,
  });
}

beforeAll(async () => {
  // The job executor reads the cluster's kubeadm version here (apply on the first control plane of a minor).
  // Shared with rbac.test.ts, which keeps the same version: made if absent, removed only if made here.
  try {
    await wl.core.createNamespacedConfigMap({
      namespace: EXECUTOR_NAMESPACE,
      body: {
        metadata: { name: KUBEADM_CONFIG },
        data: { ClusterConfiguration: `apiVersion: kubeadm.k8s.io/v1beta4\nkubernetesVersion: ${OLD}\n` },
      },
    });
    createdKubeadmConfig = true;
  } catch (err) {
    if (!isConflict(err)) throw err;
  }
  await createNodes(wl.core, [
    kwokNode(group, cp, { role: 'control-plane', kubeletVersion: OLD }),
    kwokNode(group, w, { kubeletVersion: OLD }),
  ]);
  driver = await startCapiDriver({
    workloadKubeconfig: readFileSync(testbed().workloadKubeconfig, 'utf8'),
    clusterName: 'wl',
    nodes: [
      { name: cp, role: 'control-plane', version: OLD, kubeletExtraArgs: { 'node-labels': 'tier=cp' } },
      { name: w, role: 'worker', version: OLD },
    ],
    job: { image: IMAGE, binarySource: BINARY_SOURCE, checksumsFile: testChecksumsFile([NEW]) },
  });
}, 60_000);

afterAll(async () => {
  await driver?.stop();
  // The Jobs a success keeps (a day) in the shared workload cluster; their files Secrets go with them.
  for (const node of [cp, w])
    await batch
      .deleteCollectionNamespacedJob({
        namespace: EXECUTOR_NAMESPACE,
        labelSelector: `${NODE_NAME_LABEL}=${node}`,
        propagationPolicy: 'Background',
      })
      .catch(() => undefined);
  if (createdKubeadmConfig)
    await wl.core
      .deleteNamespacedConfigMap({ name: KUBEADM_CONFIG, namespace: EXECUTOR_NAMESPACE })
      .catch(() => undefined);
  await deleteGroup(wl, group);
});

describe('the CAPI driver on KWOK nodes', () => {
  it('writes the Cluster, its kubeconfig Secret, and a KubeadmConfig and Machine per node as CAPI has them', async () => {
    const cluster = await getCapiObject(mg.custom, 'Cluster', driver.namespace, 'wl');
    expect(cluster.spec).toMatchObject({ topology: { version: OLD, controlPlane: { replicas: 1 } } });
    const secret = await mg.core.readNamespacedSecret({ name: 'wl-kubeconfig', namespace: driver.namespace });
    expect(secret.type).toBe('cluster.x-k8s.io/secret');
    expect(secret.metadata?.labels).toEqual({ 'cluster.x-k8s.io/cluster-name': 'wl' });
    const machine = await getCapiObject(mg.custom, 'Machine', driver.namespace, driver.machines[cp]!);
    expect(machine.metadata.labels).toHaveProperty(['cluster.x-k8s.io/control-plane']);
    expect(machine.spec).toMatchObject({ clusterName: 'wl', version: OLD });
    expect(machine.status).toMatchObject({ nodeRef: { name: cp } });
    const worker = await getCapiObject(mg.custom, 'Machine', driver.namespace, driver.machines[w]!);
    expect(worker.metadata.labels).toMatchObject({ 'cluster.x-k8s.io/deployment-name': 'wl-md-0' });
  });

  it('updates the control plane in place: a Job in apply mode, then done as CAPI sees it', async () => {
    const machine = driver.machines[cp]!;
    const files = [{ path: '/etc/kubernetes/extra.conf', content: 'a=1', permissions: '0600', owner: 'root:root' }];
    const answers = driver.updateMachine(cp, NEW, { files });
    answers.catch(() => undefined); // awaited below; a failed expectation before that must not leave it unhandled
    const job = await completedJob(cp);
    expectJob(job, cp, 'apply', true);
    // The files travel in a Secret owned by the Job (read from the KubeadmConfig CAPI wrote), never in its spec.
    expect(job.spec?.template.spec?.containers[0]?.env).not.toContainEqual(expect.objectContaining({ value: 'a=1' }));
    expect(job.spec?.template.spec?.volumes).toContainEqual(
      expect.objectContaining({
        name: 'files',
        secret: expect.objectContaining({ secretName: `${job.metadata?.name}-files` }),
      }),
    );
    // Until the kubelet reports the version, CAPI keeps hearing "in progress" and the markers stay.
    const marked = await getCapiObject(mg.custom, 'Machine', driver.namespace, machine);
    expect(marked.metadata.annotations).toMatchObject({
      [UPDATE_IN_PROGRESS_ANNOTATION]: '',
      [PENDING_HOOKS_ANNOTATION]: 'UpdateMachine',
    });
    expect(marked.spec).toMatchObject({ version: NEW });
    // KCP's desired KubeadmConfig: joins (no initConfiguration), with the new files, marked too.
    const config = (await mg.custom.getNamespacedCustomObject({
      group: 'bootstrap.cluster.x-k8s.io',
      version: 'v1beta2',
      plural: 'kubeadmconfigs',
      namespace: driver.namespace,
      name: machine,
    })) as { metadata: { annotations?: Record<string, string> }; spec: Record<string, unknown> };
    expect(config.metadata.annotations).toEqual({ [UPDATE_IN_PROGRESS_ANNOTATION]: '' });
    expect(config.spec).toEqual({
      files,
      joinConfiguration: {
        controlPlane: {},
        nodeRegistration: { name: cp, kubeletExtraArgs: [{ name: 'node-labels', value: 'tier=cp' }] },
      },
    });
    await setKubeletVersion(wl.core, cp, NEW);
    const done = await answers;
    expectDone(done, machine);
    // CAPI's completeInPlaceUpdate took the markers off.
    const after = await getCapiObject(mg.custom, 'Machine', driver.namespace, machine);
    expect(after.metadata.annotations ?? {}).not.toHaveProperty([UPDATE_IN_PROGRESS_ANNOTATION]);
    expect(after.metadata.annotations ?? {}).not.toHaveProperty([PENDING_HOOKS_ANNOTATION]);
    const id = await driver.workflowId(cp, NEW, { files });
    expect((await driver.client.workflow.getHandle(id).describe()).status.name).toBe('COMPLETED');
    // A success keeps the Job (its pods' logs) until its TTL.
    expect(job.spec?.ttlSecondsAfterFinished).toBe(86_400);
    // The node is given back.
    expect((await wl.core.readNode({ name: cp })).spec?.unschedulable ?? false).toBe(false);
  });

  it('updates the worker in place: a Job in node mode', async () => {
    const { job, answers } = await update(w);
    expectJob(job, w, 'node');
    expectDone(answers, driver.machines[w]!);
  });
});
