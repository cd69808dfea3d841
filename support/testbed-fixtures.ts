// Fixtures for the integration tier: the test bed the global setup started
// (scripts/testbed.sh, described by $TESTBED_STATE), API clients for both of its
// clusters, and builders for KWOK nodes, workloads and Cluster API objects.
//
// Isolation: every test file makes a TestGroup. Namespaces (workload and
// management) are named after it; its nodes carry its label and a NoSchedule
// taint, and the pods built here select and tolerate exactly that, so files
// running in parallel never share nodes or pods.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createHash, randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  AdmissionregistrationV1Api,
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  PatchStrategy,
  PolicyV1Api,
  RbacAuthorizationV1Api,
  setHeaderOptions,
  type V1DaemonSet,
  type V1Deployment,
  type V1Node,
  type V1Pod,
  type V1PodDisruptionBudget,
  type V1PodSpec,
  type V1Toleration,
} from '@kubernetes/client-node';
import {
  CAPI_API_VERSION,
  CAPI_BOOTSTRAP,
  CAPI_GROUP,
  CAPI_VERSION,
  CLUSTER_NAME_LABEL,
  CONTROL_PLANE_LABEL,
  DEPLOYMENT_NAME_LABEL,
  TOPOLOGY_DEPLOYMENT_NAME_LABEL,
} from '../src/platform/kube/capi-api.ts';
import { isConflict } from '../src/platform/kube/errors.ts';

// ---- the test bed ----------------------------------------------------------------

/** scripts/testbed.sh's testbed.json. */
export interface Testbed {
  /** Admin: what tests use to set the scene. */
  managementKubeconfig: string;
  workloadKubeconfig: string;
  /**
   * What the code under test uses: tokens of the ServiceAccounts bound to exactly the
   * roles in config/rbac (worker, api) and config/workload (the workload cluster).
   */
  workerKubeconfig: string;
  apiKubeconfig: string;
  workloadScopedKubeconfig: string;
  /** The API servers' audit logs (requests of those ServiceAccounts only). */
  managementAuditLog: string;
  workloadAuditLog: string;
  /** Cluster API name of the workload cluster ("workload"). */
  clusterName: string;
  /** Namespace of its kubeconfig Secret in the management cluster ("default"). */
  namespace: string;
  kubeconfigSecretName: string;
  managementServer: string;
  workloadServer: string;
  kubectl: string;
  kubeVersion: string;
  capiVersion: string;
  podDeleteDelayAnnotation: string;
}

let cached: Testbed | undefined;

export function testbed(): Testbed {
  if (cached) return cached;
  const state = process.env.TESTBED_STATE;
  if (!state) {
    throw new Error(
      'TESTBED_STATE is not set: run the integration tier through `make test-integration` (the global setup starts the test bed)',
    );
  }
  cached = JSON.parse(readFileSync(state, 'utf8')) as Testbed;
  return cached;
}

export function managementKubeConfigFile(): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(testbed().managementKubeconfig);
  return kc;
}

/**
 * A kubeconfig (YAML) as Cluster API writes it: `server` with the workload test bed's CA data and
 * the given user fields (e.g. `{ token }`), for `<cluster>-kubeconfig` Secrets a test builds itself.
 */
export function workloadKubeconfigYaml(server: string, user: Record<string, unknown>): string {
  const admin = workloadKubeConfigFile().getCurrentCluster();
  const caData = admin?.caData ?? (admin?.caFile ? readFileSync(admin.caFile).toString('base64') : undefined);
  if (!caData) throw new Error('the workload test bed kubeconfig names no CA');
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'w', cluster: { server, 'certificate-authority-data': caData } }],
    users: [{ name: 'u', user }],
    contexts: [{ name: 'c', context: { cluster: 'w', user: 'u' } }],
    'current-context': 'c',
  });
}

export function workloadKubeConfigFile(): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(testbed().workloadKubeconfig);
  return kc;
}

export interface WorkloadApi {
  kc: KubeConfig;
  core: CoreV1Api;
  apps: AppsV1Api;
  policy: PolicyV1Api;
  admission: AdmissionregistrationV1Api;
}

/** Clients for the workload cluster (from testbed.json's admin kubeconfig, or the KubeConfig given). */
export function workloadApi(kc: KubeConfig = workloadKubeConfigFile()): WorkloadApi {
  return {
    kc,
    core: kc.makeApiClient(CoreV1Api),
    apps: kc.makeApiClient(AppsV1Api),
    policy: kc.makeApiClient(PolicyV1Api),
    admission: kc.makeApiClient(AdmissionregistrationV1Api),
  };
}

export interface ManagementApi {
  kc: KubeConfig;
  core: CoreV1Api;
  custom: CustomObjectsApi;
}

export function managementApi(kc: KubeConfig = managementKubeConfigFile()): ManagementApi {
  return { kc, core: kc.makeApiClient(CoreV1Api), custom: kc.makeApiClient(CustomObjectsApi) };
}

export const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
export const strategicPatch = setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch);
export const jsonPatch = setHeaderOptions('Content-Type', PatchStrategy.JsonPatch);

// ---- isolation ---------------------------------------------------------------------

export const GROUP_LABEL = 'capi-uo.test/group';

export interface TestGroup {
  /** DNS-1123 label, unique per run: the namespace name in both clusters and the node name prefix. */
  name: string;
  nodeSelector: Record<string, string>;
  tolerations: V1Toleration[];
}

export function testGroup(prefix: string): TestGroup {
  const name = `${prefix}-${randomBytes(3).toString('hex')}`;
  return {
    name,
    nodeSelector: { [GROUP_LABEL]: name },
    tolerations: [{ key: GROUP_LABEL, operator: 'Equal', value: name, effect: 'NoSchedule' }],
  };
}

export async function createNamespace(core: CoreV1Api, name: string): Promise<void> {
  try {
    await core.createNamespace({ body: { metadata: { name, labels: { [GROUP_LABEL]: name } } } });
  } catch (err) {
    if (!isConflict(err)) throw err;
  }
}

/** The workload identity's namespaced rules (config/workload), bound where a test's executors work. */
export const WORKLOAD_NAMESPACED_ROLE = 'capi-upgrade-orchestrator-workload-namespaced';

/**
 * A test's namespace in the workload cluster, where the extension's workload identity gets
 * exactly what it gets in kube-system in production (the executors' objects, Leases).
 */
export async function createWorkloadNamespace(api: WorkloadApi, name: string): Promise<void> {
  await createNamespace(api.core, name);
  try {
    await api.kc.makeApiClient(RbacAuthorizationV1Api).createNamespacedRoleBinding({
      namespace: name,
      body: {
        metadata: { name: WORKLOAD_NAMESPACED_ROLE, namespace: name },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: WORKLOAD_NAMESPACED_ROLE },
        subjects: [{ kind: 'ServiceAccount', name: 'capi-upgrade-orchestrator', namespace: 'kube-system' }],
      },
    });
  } catch (err) {
    if (!isConflict(err)) throw err;
  }
}

/** Best-effort cleanup of a group in the workload cluster: its namespace and its nodes (not awaited to the end). */
export async function deleteGroup(api: WorkloadApi, group: TestGroup): Promise<void> {
  await Promise.allSettled([
    api.core.deleteNamespace({ name: group.name }),
    api.core.deleteCollectionNode({ labelSelector: `${GROUP_LABEL}=${group.name}` }),
  ]);
}

// ---- waiting -----------------------------------------------------------------------

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `probe` until it returns something other than undefined/false; fails naming `what` after `timeoutMs`. */
export async function waitFor<T>(
  what: string,
  probe: () => Promise<T | undefined | false>,
  { timeoutMs = 20_000, intervalMs = 200 }: { timeoutMs?: number; intervalMs?: number } = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined && value !== false) return value;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) {
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${what}${last instanceof Error ? ` (last error: ${last.message})` : ''}`,
      );
    }
    await sleep(intervalMs);
  }
}

// ---- KWOK nodes -----------------------------------------------------------------------

export const CONTROL_PLANE_ROLE_LABEL = 'node-role.kubernetes.io/control-plane';

export interface NodeOptions {
  role?: 'control-plane' | 'worker';
  kubeletVersion?: string;
  labels?: Record<string, string>;
}

/** A Node KWOK manages (it manages every node of the workload cluster) in the group, tainted for the group's pods. */
export function kwokNode(group: TestGroup, name: string, opts: NodeOptions = {}): V1Node {
  const role = opts.role ?? 'worker';
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: {
      name,
      labels: {
        type: 'kwok',
        'kubernetes.io/hostname': name,
        'kubernetes.io/os': 'linux',
        [GROUP_LABEL]: group.name,
        ...(role === 'control-plane' ? { [CONTROL_PLANE_ROLE_LABEL]: '' } : {}),
        ...opts.labels,
      },
      annotations: { 'kwok.x-k8s.io/node': 'fake' },
    },
    spec: { taints: [{ key: GROUP_LABEL, value: group.name, effect: 'NoSchedule' }] },
    status: {
      nodeInfo: {
        kubeletVersion: opts.kubeletVersion ?? 'v1.31.14',
        architecture: 'amd64',
        operatingSystem: 'linux',
        bootID: '',
        containerRuntimeVersion: 'kwok',
        kernelVersion: 'kwok',
        kubeProxyVersion: 'kwok',
        machineID: '',
        osImage: 'kwok',
        systemUUID: '',
      },
    },
  };
}

/** Creates the nodes and waits until KWOK reports each Ready. */
export async function createNodes(core: CoreV1Api, nodes: V1Node[]): Promise<void> {
  await Promise.all(nodes.map((body) => core.createNode({ body })));
  await Promise.all(
    nodes.map((n) =>
      waitFor(
        `node ${n.metadata?.name} Ready`,
        async () => (await nodeReadyStatus(core, n.metadata?.name ?? '')) === 'True',
      ),
    ),
  );
}

export async function nodeReadyStatus(core: CoreV1Api, name: string): Promise<string | undefined> {
  const node = await core.readNode({ name });
  return node.status?.conditions?.find((c) => c.type === 'Ready')?.status;
}

export async function setKubeletVersion(core: CoreV1Api, name: string, kubeletVersion: string): Promise<V1Node> {
  return await core.patchNodeStatus({ name, body: { status: { nodeInfo: { kubeletVersion } } } }, strategicPatch);
}

export async function cordon(core: CoreV1Api, name: string, unschedulable = true): Promise<void> {
  await core.patchNode({ name, body: { spec: { unschedulable } } }, mergePatch);
}

/**
 * KWOK re-initialises any node whose Ready condition is not True at once. To hold a node
 * NotReady, a ValidatingAdmissionPolicy refuses status updates that make Ready True on nodes
 * carrying this label; removing the label lets KWOK mark the node Ready again.
 */
export const HOLD_NOT_READY_LABEL = 'capi-uo.test/hold-not-ready';
const HOLD_POLICY = 'capi-uo-test-hold-not-ready';

export async function ensureHoldNotReadyPolicy(admission: AdmissionregistrationV1Api): Promise<void> {
  const create = async (fn: () => Promise<unknown>) => {
    try {
      await fn();
    } catch (err) {
      if (!isConflict(err)) throw err;
    }
  };
  await create(() =>
    admission.createValidatingAdmissionPolicy({
      body: {
        metadata: { name: HOLD_POLICY },
        spec: {
          failurePolicy: 'Fail',
          matchConstraints: {
            resourceRules: [
              { apiGroups: [''], apiVersions: ['v1'], operations: ['UPDATE'], resources: ['nodes/status'] },
            ],
          },
          validations: [
            {
              expression:
                `!has(object.metadata.labels) || !('${HOLD_NOT_READY_LABEL}' in object.metadata.labels) || ` +
                `!has(object.status.conditions) || !object.status.conditions.exists(c, c.type == 'Ready' && c.status == 'True')`,
              message: 'the node is held NotReady by a test',
            },
          ],
        },
      },
    }),
  );
  await create(() =>
    admission.createValidatingAdmissionPolicyBinding({
      body: { metadata: { name: HOLD_POLICY }, spec: { policyName: HOLD_POLICY, validationActions: ['Deny'] } },
    }),
  );
}

/** Sets the node's Ready condition; `false` holds it there (see {@link HOLD_NOT_READY_LABEL}) until set `true`. */
export async function setNodeReady(api: WorkloadApi, name: string, ready: boolean): Promise<void> {
  const { core } = api;
  if (ready) {
    await core.patchNode({ name, body: { metadata: { labels: { [HOLD_NOT_READY_LABEL]: null } } } }, mergePatch);
    await waitFor(`node ${name} Ready again`, async () => (await nodeReadyStatus(core, name)) === 'True');
    return;
  }
  await ensureHoldNotReadyPolicy(api.admission);
  await core.patchNode({ name, body: { metadata: { labels: { [HOLD_NOT_READY_LABEL]: 'true' } } } }, mergePatch);
  // A new policy takes a moment to be enforced: patch until NotReady sticks.
  await waitFor(
    `node ${name} held NotReady`,
    async () => {
      await core.patchNodeStatus(
        {
          name,
          body: {
            status: {
              conditions: [
                { type: 'Ready', status: 'False', reason: 'KubeletNotReady', message: 'held NotReady by a test' },
              ],
            },
          },
        },
        strategicPatch,
      );
      await sleep(400);
      return (await nodeReadyStatus(core, name)) === 'False';
    },
    { timeoutMs: 15_000, intervalMs: 0 },
  );
}

// ---- workloads -------------------------------------------------------------------------

export interface PodOptions {
  /** Extra pod labels. */
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  /** How long KWOK keeps a deleted/evicted pod (its pod-delete stage); default "1s". */
  deleteDelay?: string;
  nodeName?: string;
  emptyDir?: boolean;
  /** Overrides the group's node selector (e.g. one that matches nothing, to keep a pod Pending). */
  nodeSelector?: Record<string, string>;
}

function podAnnotations(opts: PodOptions): Record<string, string> {
  return { [testbed().podDeleteDelayAnnotation]: opts.deleteDelay ?? '1s', ...opts.annotations };
}

function podSpec(group: TestGroup, opts: PodOptions): V1PodSpec {
  return {
    containers: [{ name: 'app', image: 'registry.example/fake:1' }],
    nodeSelector: opts.nodeSelector ?? group.nodeSelector,
    tolerations: group.tolerations,
    terminationGracePeriodSeconds: 1,
    ...(opts.nodeName ? { nodeName: opts.nodeName } : {}),
    ...(opts.emptyDir
      ? {
          volumes: [{ name: 'scratch', emptyDir: {} }],
          containers: [
            {
              name: 'app',
              image: 'registry.example/fake:1',
              volumeMounts: [{ name: 'scratch', mountPath: '/scratch' }],
            },
          ],
        }
      : {}),
  };
}

export function deployment(
  group: TestGroup,
  name: string,
  opts: PodOptions & { replicas?: number; namespace?: string } = {},
): V1Deployment {
  const labels = { app: name, ...opts.labels };
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name, namespace: opts.namespace ?? group.name, labels: { app: name } },
    spec: {
      replicas: opts.replicas ?? 1,
      selector: { matchLabels: { app: name } },
      template: { metadata: { labels, annotations: podAnnotations(opts) }, spec: podSpec(group, opts) },
    },
  };
}

export function podDisruptionBudget(
  group: TestGroup,
  name: string,
  matchLabels: Record<string, string>,
  budget: { minAvailable: number } | { maxUnavailable: number },
  namespace = group.name,
): V1PodDisruptionBudget {
  return {
    apiVersion: 'policy/v1',
    kind: 'PodDisruptionBudget',
    metadata: { name, namespace },
    spec: { selector: { matchLabels }, ...budget },
  };
}

export function daemonSet(group: TestGroup, name: string, opts: PodOptions & { namespace?: string } = {}): V1DaemonSet {
  return {
    apiVersion: 'apps/v1',
    kind: 'DaemonSet',
    metadata: { name, namespace: opts.namespace ?? group.name, labels: { app: name } },
    spec: {
      selector: { matchLabels: { app: name } },
      template: {
        metadata: { labels: { app: name, ...opts.labels }, annotations: podAnnotations(opts) },
        spec: podSpec(group, opts),
      },
    },
  };
}

/** A pod no controller owns (a drain must be forced to remove it). */
export function standalonePod(group: TestGroup, name: string, opts: PodOptions & { namespace?: string } = {}): V1Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      namespace: opts.namespace ?? group.name,
      labels: { app: name, ...opts.labels },
      annotations: podAnnotations(opts),
    },
    spec: podSpec(group, opts),
  };
}

/** A pod with an emptyDir volume (a drain must be told to delete local data). */
export function podWithEmptyDir(group: TestGroup, name: string, opts: PodOptions & { namespace?: string } = {}): V1Pod {
  return standalonePod(group, name, { ...opts, emptyDir: true });
}

export const MIRROR_POD_ANNOTATION = 'kubernetes.io/config.mirror';

/** A mirror pod, as a kubelet publishes a static pod: bound to `nodeName`, annotated, never evicted by drains. */
export function mirrorPod(
  group: TestGroup,
  name: string,
  nodeName: string,
  opts: PodOptions & { namespace?: string } = {},
): V1Pod {
  const pod = standalonePod(group, name, { ...opts, nodeName });
  pod.metadata = {
    ...pod.metadata,
    annotations: { ...pod.metadata?.annotations, [MIRROR_POD_ANNOTATION]: `mirror-${name}` },
  };
  return pod;
}

export function isRunningAndReady(pod: V1Pod): boolean {
  return (
    pod.status?.phase === 'Running' &&
    (pod.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false) &&
    !pod.metadata?.deletionTimestamp
  );
}

/** Waits until `count` pods match the selector in the namespace, all Running and Ready; returns them. */
export async function waitForRunningPods(
  core: CoreV1Api,
  namespace: string,
  labelSelector: string,
  count: number,
  timeoutMs = 20_000,
): Promise<V1Pod[]> {
  return await waitFor(
    `${count} running pods ${labelSelector} in ${namespace}`,
    async () => {
      const pods = (await core.listNamespacedPod({ namespace, labelSelector })).items.filter(
        (p) => !p.metadata?.deletionTimestamp,
      );
      return pods.length === count && pods.every(isRunningAndReady) ? pods : undefined;
    },
    { timeoutMs },
  );
}

// ---- Cluster API objects (management cluster) ------------------------------------------

// Cluster API's names, as the extension itself uses them.
export {
  CAPI_API_VERSION,
  CAPI_GROUP,
  CAPI_VERSION,
  CLUSTER_NAME_LABEL,
  CONTROL_PLANE_LABEL,
  TOPOLOGY_DEPLOYMENT_NAME_LABEL,
};
export const TOPOLOGY_OWNED_LABEL = 'topology.cluster.x-k8s.io/owned';

export interface TopologyMachineDeployment {
  name: string;
  class?: string;
  replicas?: number;
}

export interface CapiObject {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    resourceVersion?: string;
  };
  spec: Record<string, unknown>;
  status?: Record<string, unknown>;
}

/** A v1beta2 Cluster: a managed topology (the fields the CRD requires), or with `topology: false` plain refs. */
export function capiCluster(
  name: string,
  namespace: string,
  opts: { version?: string; topology?: boolean; machineDeployments?: TopologyMachineDeployment[] } = {},
): CapiObject {
  const topology = opts.topology ?? true;
  return {
    apiVersion: CAPI_API_VERSION,
    kind: 'Cluster',
    metadata: { name, namespace, labels: { [CLUSTER_NAME_LABEL]: name } },
    spec: topology
      ? {
          topology: {
            classRef: { name: 'quick-start' },
            version: opts.version ?? 'v1.31.14',
            controlPlane: { replicas: 3 },
            // The CRD wants at least one entry when the list is given.
            ...(opts.machineDeployments?.length
              ? {
                  workers: {
                    machineDeployments: opts.machineDeployments.map((md) => ({
                      class: md.class ?? 'default-worker',
                      name: md.name,
                      ...(md.replicas === undefined ? {} : { replicas: md.replicas }),
                    })),
                  },
                }
              : {}),
          },
        }
      : {
          controlPlaneRef: { apiGroup: 'controlplane.cluster.x-k8s.io', kind: 'KubeadmControlPlane', name },
          infrastructureRef: { apiGroup: 'infrastructure.cluster.x-k8s.io', kind: 'DockerCluster', name },
        },
  };
}

const machineSpec = (cluster: string, name: string, version?: string) => ({
  clusterName: cluster,
  ...(version ? { version } : {}),
  bootstrap: { dataSecretName: `${name}-bootstrap` },
  infrastructureRef: { apiGroup: 'infrastructure.cluster.x-k8s.io', kind: 'DockerMachine', name },
});

/** A MachineDeployment of `cluster`; `topologyName` makes it one the topology controller owns. */
export function capiMachineDeployment(
  name: string,
  namespace: string,
  opts: { cluster: string; replicas?: number; topologyName?: string; version?: string },
): CapiObject {
  const selector = { [CLUSTER_NAME_LABEL]: opts.cluster, [DEPLOYMENT_NAME_LABEL]: name };
  return {
    apiVersion: CAPI_API_VERSION,
    kind: 'MachineDeployment',
    metadata: {
      name,
      namespace,
      labels: {
        [CLUSTER_NAME_LABEL]: opts.cluster,
        ...(opts.topologyName
          ? { [TOPOLOGY_DEPLOYMENT_NAME_LABEL]: opts.topologyName, [TOPOLOGY_OWNED_LABEL]: '' }
          : {}),
      },
    },
    spec: {
      clusterName: opts.cluster,
      ...(opts.replicas === undefined ? {} : { replicas: opts.replicas }),
      selector: { matchLabels: selector },
      template: { metadata: { labels: selector }, spec: machineSpec(opts.cluster, name, opts.version) },
    },
  };
}

/** A Machine of `cluster`; `nodeName` becomes status.nodeRef (written by {@link createCapiObject}). */
export function capiMachine(
  name: string,
  namespace: string,
  opts: { cluster: string; controlPlane?: boolean; version?: string; nodeName?: string; machineDeployment?: string },
): CapiObject {
  return {
    apiVersion: CAPI_API_VERSION,
    kind: 'Machine',
    metadata: {
      name,
      namespace,
      labels: {
        [CLUSTER_NAME_LABEL]: opts.cluster,
        ...(opts.controlPlane ? { [CONTROL_PLANE_LABEL]: '' } : {}),
        ...(opts.machineDeployment ? { 'cluster.x-k8s.io/deployment-name': opts.machineDeployment } : {}),
      },
    },
    spec: machineSpec(opts.cluster, name, opts.version),
    ...(opts.nodeName ? { status: { nodeRef: { name: opts.nodeName } } } : {}),
  };
}

function plural(kind: string): string {
  return `${kind.toLowerCase()}s`;
}

/** Creates a Cluster API object; its `status`, a subresource, is patched in afterwards. */
export async function createCapiObject(custom: CustomObjectsApi, obj: CapiObject): Promise<CapiObject> {
  const { status, ...body } = obj;
  const ref = {
    group: CAPI_GROUP,
    version: CAPI_VERSION,
    namespace: obj.metadata.namespace,
    plural: plural(obj.kind),
  };
  let created = (await custom.createNamespacedCustomObject({ ...ref, body })) as CapiObject;
  if (status) {
    created = (await custom.patchNamespacedCustomObjectStatus(
      { ...ref, name: obj.metadata.name, body: { status } },
      mergePatch,
    )) as CapiObject;
  }
  return created;
}

export async function getCapiObject(
  custom: CustomObjectsApi,
  kind: string,
  namespace: string,
  name: string,
): Promise<CapiObject> {
  return (await custom.getNamespacedCustomObject({
    group: CAPI_GROUP,
    version: CAPI_VERSION,
    namespace,
    plural: plural(kind),
    name,
  })) as CapiObject;
}

export async function patchCapiObject(
  custom: CustomObjectsApi,
  kind: string,
  namespace: string,
  name: string,
  body: unknown,
): Promise<CapiObject> {
  return (await custom.patchNamespacedCustomObject(
    { group: CAPI_GROUP, version: CAPI_VERSION, namespace, plural: plural(kind), name, body },
    mergePatch,
  )) as CapiObject;
}

/**
 * The `<cluster>-kubeconfig` Secret Cluster API writes, in `namespace`, pointing at the test
 * bed's workload cluster: a Cluster of the test's own namespace reaches the same workload cluster,
 * as the least-privilege workload identity (config/workload), never as admin.
 */
export async function createKubeconfigSecret(core: CoreV1Api, namespace: string, cluster: string): Promise<void> {
  await core.createNamespacedSecret({
    namespace,
    body: {
      metadata: { name: `${cluster}-kubeconfig`, namespace, labels: { [CLUSTER_NAME_LABEL]: cluster } },
      type: 'cluster.x-k8s.io/secret',
      data: { value: readFileSync(testbed().workloadScopedKubeconfig).toString('base64') },
    },
  });
}

/**
 * A KubeadmConfig with an inline file (/etc/kubernetes/extra.conf, `a=1`, mode 0600) and one
 * from a Secret (/etc/kubernetes/token from `<secretName>`'s key `token`, whose value is `token`).
 */
export async function createKubeadmConfigWithSecretFile(
  mg: ManagementApi,
  namespace: string,
  name: string,
  secretName: string,
  token: string,
): Promise<void> {
  await mg.core.createNamespacedSecret({
    namespace,
    body: { metadata: { name: secretName }, stringData: { token } },
  });
  await createKubeadmConfig(mg, namespace, name, [
    { path: '/etc/kubernetes/extra.conf', content: 'a=1', permissions: '0600' },
    { path: '/etc/kubernetes/token', contentFrom: { secret: { name: secretName, key: 'token' } } },
  ]);
}

/** A KubeadmConfig (v1beta2) with these `spec.files`. */
export async function createKubeadmConfig(
  mg: ManagementApi,
  namespace: string,
  name: string,
  files: Record<string, unknown>[],
): Promise<void> {
  await mg.custom.createNamespacedCustomObject({
    ...CAPI_BOOTSTRAP,
    plural: 'kubeadmconfigs',
    namespace,
    body: {
      apiVersion: `${CAPI_BOOTSTRAP.group}/${CAPI_BOOTSTRAP.version}`,
      kind: 'KubeadmConfig',
      metadata: { name, namespace },
      spec: { files },
    },
  });
}

/** The made-up digest {@link testChecksumsFile} pins for `binary` (the test bed's Job pods download nothing). */
export function testDigest(version: string, binary: string): string {
  return createHash('sha256').update(`test bed ${version} ${binary}`).digest('hex');
}

/**
 * A NODE_UPGRADE_CHECKSUMS_FILE pinning {@link testDigest}s for `versions` on amd64 (KWOK nodes
 * report amd64): what the `job` executor needs before it creates a Job.
 */
export function testChecksumsFile(versions: readonly string[]): string {
  const file = join(mkdtempSync(join(tmpdir(), 'node-checksums-')), 'checksums');
  const lines = versions.flatMap((v) =>
    ['kubeadm', 'kubelet', 'kubectl'].map((b) => `${v}/amd64/${b}: ${testDigest(v, b)}`),
  );
  writeFileSync(file, `${lines.join('\n')}\n`);
  return file;
}

/** The Events `kubectl describe` shows for a Cluster API object: by kind, name and uid. */
export async function eventsOf(mg: ManagementApi, kind: 'Cluster' | 'Machine', namespace: string, name: string) {
  const object = (await mg.custom.getNamespacedCustomObject({
    group: CAPI_GROUP,
    version: CAPI_VERSION,
    plural: plural(kind),
    namespace,
    name,
  })) as { metadata: { uid: string } };
  return (
    await mg.core.listNamespacedEvent({
      namespace,
      fieldSelector: `involvedObject.kind=${kind},involvedObject.name=${name},involvedObject.uid=${object.metadata.uid}`,
    })
  ).items;
}
