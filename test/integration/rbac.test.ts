// The RBAC shipped in config/ is exactly what the code uses: no rule missing (a
// 403 in production) and no rule to spare (least privilege).
//
// Tour identities, ServiceAccounts of their own with the same bindings config/
// ships for the deployed ones (worker and api in the management cluster from
// config/rbac, workload in the workload cluster from config/workload), run real
// activity calls that together make every Kubernetes call the code makes:
// capacity reservation, a Cluster Event, health check, preflight, cordon,
// skip-remediation on a Machine, a
// drain past a PodDisruptionBudget, the failed-update mark, a Machine Event,
// the three node-upgrade executors (a Job that succeeds and one that fails; a
// NodeUpgradeRequest created, changed and deleted, its CRD installed; one in the
// management cluster, stopped), the api's node agent and node upgrader checks
// and its request checks' reads. Both API servers audit these identities
// (test/testbed/audit-policy.yaml): from the audit logs, the (apiGroup,
// resource, verb) each identity used must equal what its roles grant.
//
// Own identities rather than the test bed's production ones: files running
// alongside use those, which would blur what the tour used.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  AuthorizationV1Api,
  BatchV1Api,
  CoreV1Api,
  CustomObjectsApi,
  RbacAuthorizationV1Api,
  type KubeConfig,
  type V1ResourceAttributes,
} from '@kubernetes/client-node';
import { ApplicationFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';
import { parseAllDocuments } from 'yaml';
import { ensureNodeUpgradeRequestCrd } from '../../src/activities/executors/delegate.ts';
import { isConflict } from '../../src/platform/kube/errors.ts';
import { PooledKubeConfig } from '../../src/platform/kube/pooled-kube-config.ts';
import {
  createMachineUpdateActivities,
  NODE_UPGRADE_GROUP,
  NODE_UPGRADE_PLURAL,
  NODE_UPGRADE_VERSION,
  type NodeUpgradeRequest,
} from '../../src/activities/machine-update.ts';
import type { MachineUpdateActivities, NodeUpgradeInput } from '../../src/activities/machine-update-types.ts';
import { createFleetActivities } from '../../src/activities/fleet.ts';
import { createUpgradeActivities } from '../../src/activities/upgrade.ts';
import { createAlertActivities } from '../../src/activities/alerts.ts';
import type { AlertActivities } from '../../src/activities/alert-types.ts';
import { resolveAlertPolicy } from '../../src/domain/alert-policy.ts';
import { freePort } from '../../src/local/free-ports.ts';
import type { UpgradeActivities } from '../../src/activities/upgrade-types.ts';
import { createNodeAgentCheck, type NodeAgentCheck } from '../../src/platform/kube/node-agents.ts';
import { createNodeUpgraderCheck } from '../../src/platform/kube/node-upgraders.ts';
import { startStandInStatus } from '../support/stand-in-status.ts';
import { managementObjects } from '../../src/api/handlers/request-checks.ts';
import {
  createKubeadmConfigWithSecretFile,
  capiCluster,
  capiMachine,
  capiMachineDeployment,
  CLUSTER_NAME_LABEL,
  createCapiObject,
  createNamespace,
  createNodes,
  deleteGroup,
  deployment,
  kwokNode,
  managementApi,
  podDisruptionBudget,
  sleep,
  testbed,
  testChecksumsFile,
  testGroup,
  waitFor,
  waitForRunningPods,
  workloadApi,
} from '../../support/testbed-fixtures.ts';

const run = promisify(execFile);
const ROOT = new URL('../../', import.meta.url).pathname;

const group = testGroup('rbac');
const g = group.name;
const wl = workloadApi();
const mg = managementApi();
const wlCustom = wl.kc.makeApiClient(CustomObjectsApi);
const logger = new DefaultLogger('ERROR');

// ---- what config/ grants ------------------------------------------------------------------

interface PolicyRule {
  apiGroups?: string[];
  resources?: string[];
  verbs: string[];
  resourceNames?: string[];
  nonResourceURLs?: string[];
}

interface RbacObject {
  kind: string;
  metadata: { name: string; namespace?: string };
  rules?: PolicyRule[];
  roleRef?: { kind: string; name: string };
  subjects?: { kind: string; name: string; namespace?: string }[];
}

/** A binding config/ ships for a production ServiceAccount, with the rules of the role it binds. */
interface ShippedBinding {
  kind: 'ClusterRoleBinding' | 'RoleBinding';
  name: string;
  /** RoleBinding only. */
  namespace?: string;
  roleRef: { kind: string; name: string };
  rules: PolicyRule[];
}

async function kustomize(dir: string): Promise<RbacObject[]> {
  const { stdout } = await run(testbed().kubectl, ['kustomize', `${ROOT}config/${dir}`], { maxBuffer: 16 << 20 });
  return parseAllDocuments(stdout).map((d) => d.toJSON() as RbacObject);
}

/** The bindings of `config/<dir>` whose subjects include the ServiceAccount, each with its role's rules. */
async function shippedBindings(dir: string, sa: { namespace: string; name: string }): Promise<ShippedBinding[]> {
  const objects = await kustomize(dir);
  const bindings: ShippedBinding[] = [];
  for (const b of objects) {
    if ((b.kind !== 'ClusterRoleBinding' && b.kind !== 'RoleBinding') || !b.roleRef) continue;
    // A namespaced object that names no namespace is applied into the ServiceAccount's (kubectl -n, config/default).
    const namespace = b.kind === 'RoleBinding' ? (b.metadata.namespace ?? sa.namespace) : undefined;
    const boundHere = b.subjects?.some(
      (s) => s.kind === 'ServiceAccount' && s.name === sa.name && (s.namespace ?? namespace) === sa.namespace,
    );
    if (!boundHere) continue;
    const roleRef = b.roleRef;
    const role = objects.find(
      (o) =>
        o.kind === roleRef.kind &&
        o.metadata.name === roleRef.name &&
        (o.kind === 'ClusterRole' || (o.metadata.namespace ?? sa.namespace) === namespace),
    );
    if (!role)
      throw new Error(`config/${dir}: ${b.kind} ${b.metadata.name} binds ${roleRef.kind} ${roleRef.name}, not shipped`);
    bindings.push({
      kind: b.kind,
      name: b.metadata.name,
      ...(namespace ? { namespace } : {}),
      roleRef: { kind: roleRef.kind, name: roleRef.name },
      rules: role.rules ?? [],
    });
  }
  if (bindings.length === 0)
    throw new Error(`config/${dir} binds nothing to ServiceAccount ${sa.namespace}/${sa.name}`);
  return bindings;
}

/** `apiGroup resource[/subresource] verb`, the core group left out: `batch jobs create`, `pods/log get`. */
function permission(apiGroup: string, resource: string, verb: string): string {
  return [apiGroup, resource, verb].filter(Boolean).join(' ');
}

/** Every (apiGroup, resource, verb) the bindings grant, rules expanded; resourceNames narrow nothing here. */
function grantedPermissions(bindings: ShippedBinding[]): Set<string> {
  const granted = new Set<string>();
  for (const rule of bindings.flatMap((b) => b.rules)) {
    for (const apiGroup of rule.apiGroups ?? [''])
      for (const resource of rule.resources ?? [])
        for (const verb of rule.verbs) granted.add(permission(apiGroup, resource, verb));
    for (const url of rule.nonResourceURLs ?? [])
      for (const verb of rule.verbs) granted.add(`non-resource ${url} ${verb}`);
  }
  return granted;
}

// ---- identities ------------------------------------------------------------------------

type IdentityLabel = 'worker' | 'api' | 'workload';

interface TourIdentity {
  label: IdentityLabel;
  /** config/ directory that ships its roles and bindings. */
  config: 'rbac' | 'workload';
  /** The ServiceAccount config/ binds them to (the one deployed): the tour's gets the same bindings. */
  production: { namespace: string; name: string };
  /** The tour's own ServiceAccount, in the same namespace. */
  serviceAccount: string;
}

const SYSTEM_NAMESPACE = 'capi-upgrade-orchestrator-system';
const TOUR: Record<IdentityLabel, TourIdentity> = {
  worker: {
    label: 'worker',
    config: 'rbac',
    production: { namespace: SYSTEM_NAMESPACE, name: 'capi-upgrade-orchestrator-worker' },
    serviceAccount: 'rbac-tour-worker',
  },
  api: {
    label: 'api',
    config: 'rbac',
    production: { namespace: SYSTEM_NAMESPACE, name: 'capi-upgrade-orchestrator-api' },
    serviceAccount: 'rbac-tour-api',
  },
  workload: {
    label: 'workload',
    config: 'workload',
    production: { namespace: 'kube-system', name: 'capi-upgrade-orchestrator' },
    serviceAccount: 'rbac-tour-workload',
  },
};

const serviceAccountUser = (namespace: string, name: string) => `system:serviceaccount:${namespace}:${name}`;
const username = (id: TourIdentity) => serviceAccountUser(id.production.namespace, id.serviceAccount);
/** The identities the rest of the integration tier runs the code as (scripts/testbed.sh). */
const PRODUCTION_USERS = Object.values(TOUR).map((id) =>
  serviceAccountUser(id.production.namespace, id.production.name),
);
const adminOf = (id: TourIdentity): KubeConfig => (id.config === 'rbac' ? mg.kc : wl.kc);
/** Names of the tour's bindings: the shipped binding's, prefixed. */
const tourBindingName = (id: TourIdentity, b: ShippedBinding) => `${id.serviceAccount}.${b.name}`;

/** `fn` for each tour identity, concurrently, by label. */
async function perIdentity<T>(fn: (id: TourIdentity) => Promise<T>): Promise<Record<IdentityLabel, T>> {
  const [worker, api, workload] = await Promise.all([fn(TOUR.worker), fn(TOUR.api), fn(TOUR.workload)]);
  return { worker, api, workload };
}

async function createOrKeep(create: () => Promise<unknown>): Promise<boolean> {
  try {
    await create();
    return true;
  } catch (err) {
    if (isConflict(err)) return false;
    throw err;
  }
}

/** A KubeConfig for the admin's API server that authenticates with `token` only. */
function tokenKubeConfig(admin: KubeConfig, user: string, token: string): KubeConfig {
  const cluster = admin.getCurrentCluster();
  if (!cluster) throw new Error('the admin kubeconfig names no cluster');
  const kc = new PooledKubeConfig();
  kc.loadFromOptions({
    clusters: [cluster],
    users: [{ name: user, token }],
    contexts: [{ name: user, cluster: cluster.name, user }],
    currentContext: user,
  });
  return kc;
}

/** One permission of the binding's role, for a SubjectAccessReview. */
function probeOf(b: ShippedBinding): V1ResourceAttributes {
  const rule = b.rules[0];
  const [resource = '', subresource] = (rule?.resources?.[0] ?? '').split('/');
  return {
    group: rule?.apiGroups?.[0] ?? '',
    resource,
    ...(subresource ? { subresource } : {}),
    verb: rule?.verbs[0] ?? '',
    ...(rule?.resourceNames?.[0] ? { name: rule.resourceNames[0] } : {}),
    ...(b.namespace ? { namespace: b.namespace } : {}),
  };
}

/**
 * The tour's ServiceAccount with the production one's bindings (as admin), once the authorizer
 * applies them; a KubeConfig with a token of it (TokenRequest).
 */
async function createTourIdentity(id: TourIdentity, bindings: ShippedBinding[]): Promise<KubeConfig> {
  const admin = adminOf(id);
  const core = admin.makeApiClient(CoreV1Api);
  const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
  const { namespace } = id.production;
  const name = id.serviceAccount;
  const subjects = [{ kind: 'ServiceAccount', name, namespace }];
  await createOrKeep(() => core.createNamespacedServiceAccount({ namespace, body: { metadata: { name } } }));
  for (const b of bindings) {
    const roleRef = { apiGroup: 'rbac.authorization.k8s.io', ...b.roleRef };
    const metadata = { name: tourBindingName(id, b), ...(b.namespace ? { namespace: b.namespace } : {}) };
    const bindingNamespace = b.namespace;
    await createOrKeep(() =>
      bindingNamespace
        ? rbac.createNamespacedRoleBinding({ namespace: bindingNamespace, body: { metadata, roleRef, subjects } })
        : rbac.createClusterRoleBinding({ body: { metadata, roleRef, subjects } }),
    );
  }
  const token = (
    await core.createNamespacedServiceAccountToken({
      name,
      namespace,
      body: { spec: { audiences: [], expirationSeconds: 3600 } },
    })
  ).status?.token;
  if (!token) throw new Error(`no token for ServiceAccount ${namespace}/${name}`);
  // The authorizer's caches catch up with new bindings asynchronously: ask it (as admin, unaudited).
  const authz = admin.makeApiClient(AuthorizationV1Api);
  for (const b of bindings) {
    await waitFor(`RBAC to apply ${b.kind} ${tourBindingName(id, b)}`, async () => {
      const review = await authz.createSubjectAccessReview({
        body: { spec: { user: username(id), resourceAttributes: probeOf(b) } },
      });
      return review.status?.allowed === true;
    });
  }
  return tokenKubeConfig(admin, name, token);
}

async function deleteTourIdentity(id: TourIdentity, bindings: ShippedBinding[]): Promise<void> {
  const admin = adminOf(id);
  const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
  await Promise.allSettled([
    ...bindings.map((b) =>
      b.namespace
        ? rbac.deleteNamespacedRoleBinding({ name: tourBindingName(id, b), namespace: b.namespace })
        : rbac.deleteClusterRoleBinding({ name: tourBindingName(id, b) }),
    ),
    admin
      .makeApiClient(CoreV1Api)
      .deleteNamespacedServiceAccount({ name: id.serviceAccount, namespace: id.production.namespace }),
  ]);
}

// ---- what the audit logs say was used ------------------------------------------------------

interface AuditEvent {
  stage: string;
  verb: string;
  requestURI: string;
  requestReceivedTimestamp: string;
  user: { username: string };
  objectRef?: { apiGroup?: string; resource?: string; subresource?: string; namespace?: string; name?: string };
  responseStatus?: { code?: number };
}

function readAuditLog(path: string): AuditEvent[] {
  const events: AuditEvent[] = [];
  for (const line of readFileSync(path, 'utf8').split('\n')) {
    if (!line.trim()) continue;
    try {
      events.push(JSON.parse(line) as AuditEvent);
    } catch {
      // a line being written
    }
  }
  return events;
}

function auditEvents(): AuditEvent[] {
  return [...readAuditLog(testbed().managementAuditLog), ...readAuditLog(testbed().workloadAuditLog)];
}

/** The tour's events, once the logs have been quiet for a second (a line is written after its response). */
async function tourAuditEvents(since: number): Promise<AuditEvent[]> {
  const users = new Set(Object.values(TOUR).map(username));
  const read = () =>
    auditEvents().filter((e) => users.has(e.user.username) && Date.parse(e.requestReceivedTimestamp) >= since);
  const deadline = Date.now() + 20_000;
  let events = read();
  while (Date.now() < deadline) {
    await sleep(1_000);
    const again = read();
    if (again.length === events.length) break;
    events = again;
  }
  return events;
}

function usedPermission(e: AuditEvent): string {
  const ref = e.objectRef;
  if (!ref?.resource) return `non-resource ${e.requestURI} ${e.verb}`;
  return permission(ref.apiGroup ?? '', ref.subresource ? `${ref.resource}/${ref.subresource}` : ref.resource, e.verb);
}

const describeRequest = (e: AuditEvent) =>
  `${e.user.username}: ${e.verb} ${e.requestURI} -> ${e.responseStatus?.code ?? '?'}`;

const refused = (events: AuditEvent[]) => events.filter((e) => e.responseStatus?.code === 403);

function mismatches(id: TourIdentity, granted: Set<string>, used: Set<string>): string[] {
  return [
    ...[...granted].filter((p) => !used.has(p)).map((p) => `granted but never used: ${id.label} ${p}`),
    ...[...used].filter((p) => !granted.has(p)).map((p) => `used but not granted: ${id.label} ${p}`),
  ].sort();
}

// ---- the scene -----------------------------------------------------------------------------

const CLUSTER = 'tour';
const cluster = { namespace: g, name: CLUSTER };
const cp = `${g}-cp`; // control-plane node: the job executor reads kubeadm-config for it
const w = `${g}-w`; // worker node: preflight, cordon, the failed-update mark, the executors
const d = `${g}-d`; // drained node: its pod is held by a PodDisruptionBudget
const machineOf = (name: string) => ({ namespace: g, name });
const OLD = 'v1.31.14';
const NEW = 'v1.32.4';
const EXECUTOR_NAMESPACE = 'kube-system';
const KUBEADM_CONFIG = 'kubeadm-config';
const nurRef = {
  group: NODE_UPGRADE_GROUP,
  version: NODE_UPGRADE_VERSION,
  plural: NODE_UPGRADE_PLURAL,
  namespace: EXECUTOR_NAMESPACE,
};

/** What config/ binds to each production identity (the tour's get the same). */
let bindings: Record<IdentityLabel, ShippedBinding[]>;
let identities: Record<IdentityLabel, KubeConfig>;
let upgrade: UpgradeActivities;
let alerts: AlertActivities;
let machineUpdate: MachineUpdateActivities;
/** The job executor with an image whose pods fail (test/testbed/kwok-pod-fail-stage.yaml). */
let failingJob: MachineUpdateActivities;
let nodeAgents: NodeAgentCheck;
let createdKubeadmConfig = false;
let tourStartedAt = 0;

async function inActivity<T>(fn: () => Promise<T>): Promise<T> {
  return (await new MockActivityEnvironment(undefined, { logger }).run(fn)) as T;
}

/** `<cluster>-kubeconfig` as Cluster API writes it, holding the workload tour identity's credentials. */
async function createTourKubeconfigSecret(workload: KubeConfig): Promise<void> {
  await mg.core.createNamespacedSecret({
    namespace: g,
    body: {
      metadata: { name: `${CLUSTER}-kubeconfig`, namespace: g, labels: { [CLUSTER_NAME_LABEL]: CLUSTER } },
      type: 'cluster.x-k8s.io/secret',
      data: { value: Buffer.from(workload.exportConfig()).toString('base64') },
    },
  });
}

/** A KubeadmConfig with one inline file and one from a Secret (spec.files[].contentFrom). */
async function createKubeadmConfig(): Promise<void> {
  await createKubeadmConfigWithSecretFile(mg, g, 'tour-w-config', 'tour-join-token', `token-${g}`);
}

/** A Deployment's single pod on node d, under a budget that allows no disruption. */
async function createPinnedWorkload(): Promise<void> {
  await wl.apps.createNamespacedDeployment({
    namespace: g,
    body: deployment(group, 'pinned', { nodeSelector: { ...group.nodeSelector, 'kubernetes.io/hostname': d } }),
  });
  await wl.policy.createNamespacedPodDisruptionBudget({
    namespace: g,
    body: podDisruptionBudget(group, 'pinned', { app: 'pinned' }, { minAvailable: 1 }),
  });
  await waitForRunningPods(wl.core, g, 'app=pinned', 1);
  await waitFor('PDB pinned to allow no disruption', async () => {
    const pdb = await wl.policy.readNamespacedPodDisruptionBudget({ name: 'pinned', namespace: g });
    return (
      pdb.status?.observedGeneration === pdb.metadata?.generation &&
      pdb.status?.currentHealthy === 1 &&
      pdb.status.disruptionsAllowed === 0
    );
  });
}

beforeAll(async () => {
  tourStartedAt = Date.now();
  await Promise.all([createNamespace(wl.core, g), createNamespace(mg.core, g)]);
  bindings = await perIdentity((id) => shippedBindings(id.config, id.production));
  identities = await perIdentity((id) => createTourIdentity(id, bindings[id.label]));
  const { worker, api, workload } = identities;
  upgrade = createUpgradeActivities({ management: worker });
  alerts = createAlertActivities(worker);
  // The executors' namespace is left to its default, kube-system: where config/workload grants their rules.
  const checksumsFile = testChecksumsFile([NEW]);
  machineUpdate = createMachineUpdateActivities({ management: worker, pollIntervalMs: 250, job: { checksumsFile } });
  failingJob = createMachineUpdateActivities({
    management: worker,
    pollIntervalMs: 250,
    job: { image: 'testbed.invalid/fails', backoffLimit: 0, checksumsFile },
  });
  nodeAgents = createNodeAgentCheck({ management: api, namespace: EXECUTOR_NAMESPACE, cacheMs: 0 });

  createdKubeadmConfig = await createOrKeep(() =>
    wl.core.createNamespacedConfigMap({
      namespace: EXECUTOR_NAMESPACE,
      body: {
        metadata: { name: KUBEADM_CONFIG },
        data: { ClusterConfiguration: `apiVersion: kubeadm.k8s.io/v1beta4\nkubernetesVersion: ${OLD}\n` },
      },
    }),
  );
  await Promise.all([
    createTourKubeconfigSecret(workload),
    createKubeadmConfig(),
    createNodes(wl.core, [
      kwokNode(group, cp, { role: 'control-plane', kubeletVersion: OLD }),
      kwokNode(group, w, { kubeletVersion: OLD }),
      kwokNode(group, d, { kubeletVersion: OLD }),
    ]),
    createCapiObject(mg.custom, capiCluster(CLUSTER, g, { topology: false })),
    createCapiObject(mg.custom, capiMachineDeployment('tour-md', g, { cluster: CLUSTER, replicas: 1 })),
    createCapiObject(mg.custom, capiMachine('tour-cp', g, { cluster: CLUSTER, controlPlane: true, nodeName: cp })),
    createCapiObject(
      mg.custom,
      capiMachine('tour-w', g, { cluster: CLUSTER, nodeName: w, machineDeployment: 'tour-md' }),
    ),
  ]);
  await createPinnedWorkload();
}, 180_000);

afterAll(async () => {
  const batch = wl.kc.makeApiClient(BatchV1Api);
  await Promise.allSettled([
    ...[`${g}-job`, `${g}-job-fail`].map((name) =>
      batch.deleteNamespacedJob({ name, namespace: EXECUTOR_NAMESPACE, propagationPolicy: 'Background' }),
    ),
    ...[`${g}-job-files`, `${g}-nur-files`].map((name) =>
      wl.core.deleteNamespacedSecret({ name, namespace: EXECUTOR_NAMESPACE }),
    ),
    wlCustom.deleteNamespacedCustomObject({ ...nurRef, name: `${g}-nur` }),
    ...(createdKubeadmConfig
      ? [wl.core.deleteNamespacedConfigMap({ name: KUBEADM_CONFIG, namespace: EXECUTOR_NAMESPACE })]
      : []),
    ...(bindings ? Object.values(TOUR).map((id) => deleteTourIdentity(id, bindings[id.label])) : []),
  ]);
  await deleteGroup(wl, group);
  await mg.core.deleteNamespace({ name: g }).catch(() => undefined);
});

// ---- the tour --------------------------------------------------------------------------------

/** worker: clusters get/patch, machinedeployments list/get/patch. */
async function tourCapacity(): Promise<void> {
  const reserved = [{ machineDeployment: 'tour-md', originalReplicas: 1, reservedReplicas: 2 }];
  expect(await upgrade.reserveCapacity({ cluster, count: 1 })).toEqual(reserved);
  expect(await upgrade.checkReservedCapacity({ cluster })).toEqual({
    ready: false,
    pending: ['MachineDeployment tour-md: 0 of 2 machines Ready'],
  });
  expect(await upgrade.releaseCapacity({ cluster })).toEqual(reserved);
}

/** worker: clusters get, events create. */
async function tourClusterEvent(): Promise<void> {
  await upgrade.recordClusterEvent({
    cluster,
    reason: 'UpgradeStarted',
    type: 'Normal',
    message: 'rbac tour',
    key: `rbac-tour/${g}`,
  });
  const events = await mg.core.listNamespacedEvent({ namespace: g, fieldSelector: 'involvedObject.kind=Cluster' });
  expect(events.items.map((e) => [e.involvedObject.name, e.reason])).toEqual([[CLUSTER, 'UpgradeStarted']]);
}

/** worker: secrets get (the kubeconfig), machines list; workload: nodes, poddisruptionbudgets and pods list, /metrics get. */
async function tourClusterHealth(): Promise<void> {
  expect(
    await upgrade.checkClusterHealth({ cluster, scope: 'pre', criticalNamespaces: [g], blockingPdbPolicy: 'warn' }),
  ).toEqual({ healthy: true, summary: '2 of 2 nodes Ready; 1 of 1 critical pods Ready', findings: [], warnings: [] });
  // The removed-API gate: workload non-resource /metrics get.
  expect((await upgrade.checkDeprecatedApis({ cluster })).malformed).toBe(0);
}

/** worker: configmaps get, secrets get (the alert gate's CA and token; nothing listens at the URL). */
async function tourAlertGate(): Promise<void> {
  await mg.core.createNamespacedConfigMap({
    namespace: g,
    body: { metadata: { name: 'tour-alert-ca' }, data: { 'ca.crt': 'rbac tour' } },
  });
  await mg.core.createNamespacedSecret({
    namespace: g,
    body: { metadata: { name: 'tour-alert-token' }, stringData: { token: 'rbac-tour' } },
  });
  const policy = resolveAlertPolicy({
    settings: {
      alertPrometheusUrl: `http://127.0.0.1:${await freePort()}`,
      alertCa: `ConfigMap/${g}/tour-alert-ca/ca.crt`,
      alertTokenSecret: `${g}/tour-alert-token/token`,
    },
  });
  if (!policy.ok || !policy.policy) throw new Error('alert policy refused');
  expect(await alerts.checkAlerts({ cluster, policy: policy.policy })).toEqual({
    reachable: false,
    cause: 'connection refused',
  });
}

/** worker: machines get, clusters get, events create; workload: nodes get/list/patch, nodes/status patch. */
async function tourNodeActivities(): Promise<void> {
  expect(await machineUpdate.preflight({ machine: machineOf('tour-w') })).toEqual({
    nodeName: w,
    clusterName: CLUSTER,
  });
  await machineUpdate.recordMachineEvent({
    machine: machineOf('tour-w'),
    reason: 'MachineUpdateStarted',
    type: 'Normal',
    message: 'rbac tour',
    key: `rbac-tour/${g}`,
  });
  expect(await machineUpdate.cordon({ cluster, nodeName: w })).toEqual({ wasUnschedulable: false });
  await machineUpdate.uncordon({ cluster, nodeName: w });
  await inActivity(() => machineUpdate.setNodeUpdateFailed({ cluster, nodeName: w, reason: 'rbac tour' }));
  await inActivity(() => machineUpdate.clearNodeUpdateFailed({ cluster, nodeName: w }));
  const condition = (await wl.core.readNode({ name: w })).status?.conditions?.find(
    (c) => c.type === 'InPlaceUpdateFailed',
  );
  expect(condition).toMatchObject({ status: 'False', reason: 'UpdateSucceeded' });
}

/** worker: machines get/patch (skip-remediation while a node updates in place). */
async function tourRemediation(): Promise<void> {
  const machine = machineOf('tour-w');
  await machineUpdate.holdRemediation({ machine });
  const held = (await mg.custom.getNamespacedCustomObject({
    group: 'cluster.x-k8s.io',
    version: 'v1beta2',
    plural: 'machines',
    namespace: g,
    name: 'tour-w',
  })) as { metadata: { annotations?: Record<string, string> } };
  expect(held.metadata.annotations?.['cluster.x-k8s.io/skip-remediation']).toBe('');
  await machineUpdate.releaseRemediation({ machine });
}

/** workload: pods list, pods/eviction create (refused: 429), poddisruptionbudgets list, pods delete. */
async function tourDrain(): Promise<void> {
  await machineUpdate.cordon({ cluster, nodeName: d });
  const result = await inActivity(() =>
    machineUpdate.drain({
      cluster,
      nodeName: d,
      options: { deleteEmptyDirData: false, force: false, timeoutMs: 60_000, forceNow: true },
    }),
  );
  expect(result).toEqual({ evicted: 0, deleted: 1, forceDeleted: 0, skipped: 0 });
  await machineUpdate.uncordon({ cluster, nodeName: d });
}

const upgradeInput = (
  input: Pick<NodeUpgradeInput, 'executor' | 'nodeName' | 'requestName'> & Partial<NodeUpgradeInput>,
): NodeUpgradeInput => ({
  cluster,
  machine: machineOf(input.nodeName === cp ? 'tour-cp' : 'tour-w'),
  version: NEW,
  files: [],
  timeoutMs: 60_000,
  ...input,
});

/**
 * workload: configmaps get (kubeadm-config, control-plane node), jobs get/create/delete,
 * secrets create (the files), pods list and pods/log get (the failed Job's pod).
 */
async function tourJobExecutor(): Promise<void> {
  const name = `${g}-job`;
  const files = { files: undefined, bootstrapConfig: machineOf('tour-w-config') };
  expect(
    await inActivity(() =>
      machineUpdate.upgradeNode(upgradeInput({ executor: 'job', nodeName: cp, requestName: name, ...files })),
    ),
  ).toEqual({ message: `node upgrade Job ${EXECUTOR_NAMESPACE}/${name} completed on node ${cp}` });
  await inActivity(() =>
    machineUpdate.cleanupNodeUpgrade({ cluster, nodeName: cp, executor: 'job', requestName: name }),
  );

  const failing = `${g}-job-fail`;
  const failure = await inActivity(() =>
    failingJob.upgradeNode(upgradeInput({ executor: 'job', nodeName: w, requestName: failing })),
  ).then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(failure).toBeInstanceOf(ApplicationFailure);
  expect(failure).toMatchObject({ type: 'NodeUpgradeJobFailed', nonRetryable: true });
  // The log is read best effort (a refusal would only leave `unavailable`): it must be there.
  const [log] = (failure as ApplicationFailure).details as [{ pod?: string; lines: string[]; unavailable?: string }];
  expect(log.unavailable).toBeUndefined();
  expect(log.pod).toMatch(new RegExp(`^${failing}-`));
  expect(log.lines.length).toBeGreaterThan(0);
  await inActivity(() =>
    failingJob.cleanupNodeUpgrade({ cluster, nodeName: w, executor: 'job', requestName: failing }),
  );
}

/** A stand-in node agent (admin): reports Succeeded on each generation of the tour's requests. */
function startTestAgent(): { stop: () => Promise<void> } {
  return startStandInStatus(wlCustom, EXECUTOR_NAMESPACE, (req) =>
    !req.metadata.name.startsWith(`${g}-`) || req.status?.observedGeneration === (req.metadata.generation ?? 0)
      ? undefined
      : { phase: 'Succeeded', message: `node ${req.spec.nodeName} upgraded to ${req.spec.kubernetesVersion}` },
  );
}

/**
 * worker: kubeadmconfigs get, secrets get (contentFrom); workload: customresourcedefinitions
 * create/get, nodeupgraderequests get/list/create/patch/delete (list: the prune of the node's
 * earlier Succeeded requests), secrets create (the files).
 */
async function tourDelegateExecutor(): Promise<void> {
  await ensureNodeUpgradeRequestCrd(identities.workload);
  const name = `${g}-nur`;
  const agent = startTestAgent();
  try {
    const byReference = upgradeInput({
      executor: 'delegate',
      nodeName: w,
      requestName: name,
      files: undefined,
      bootstrapConfig: machineOf('tour-w-config'),
    });
    expect(await inActivity(() => machineUpdate.upgradeNode(byReference))).toEqual({
      message: `node ${w} upgraded to ${NEW}`,
    });
    const secret = await wl.core.readNamespacedSecret({ name: `${name}-files`, namespace: EXECUTOR_NAMESPACE });
    expect(Buffer.from(secret.data?.f1 ?? '', 'base64').toString('utf8')).toBe(`token-${g}`);
    // The same request with another spec: patched to a new generation.
    const changed = upgradeInput({ executor: 'delegate', nodeName: w, requestName: name, version: 'v1.32.5' });
    expect(await inActivity(() => machineUpdate.upgradeNode(changed))).toEqual({
      message: `node ${w} upgraded to v1.32.5`,
    });
  } finally {
    await agent.stop();
  }
  await inActivity(() =>
    machineUpdate.cleanupNodeUpgrade({ cluster, nodeName: w, executor: 'delegate', requestName: name }),
  );
  await expect(wlCustom.getNamespacedCustomObject({ ...nurRef, name })).rejects.toMatchObject({ code: 404 });
}

/**
 * A stand-in node upgrader (admin) in the management cluster: Running, then Succeeded a moment later
 * (the worker's watch is open by then: it is part of the tour); `-stop` requests stay Running.
 */
function startTestUpgrader(): { stop: () => Promise<void> } {
  return startStandInStatus(
    mg.custom,
    g,
    (req) => {
      const phase = req.metadata.name.endsWith('-stop') || !req.status ? 'Running' : 'Succeeded';
      return req.status?.phase === phase ? undefined : { phase };
    },
    500,
  );
}

/**
 * worker: machines get (the owner), nodeupgraderequests create/get/list/watch/delete and secrets create
 * (the files), in the management cluster.
 */
async function tourManagementExecutor(): Promise<void> {
  const upgrader = startTestUpgrader();
  try {
    const input = upgradeInput({
      executor: 'management',
      nodeName: w,
      requestName: `${g}-mnur`,
      files: undefined,
      bootstrapConfig: machineOf('tour-w-config'),
    });
    expect(await inActivity(() => machineUpdate.upgradeNode(input))).toEqual({
      message: `node upgrader reported Succeeded for NodeUpgradeRequest ${g}/${g}-mnur`,
    });
    await inActivity(() =>
      machineUpdate.cleanupNodeUpgrade({ cluster, nodeName: w, executor: 'management', requestName: `${g}-mnur` }),
    );
    // An abort mid-way: the wait is cancelled, then the request is stopped (read, deleted).
    const env = new MockActivityEnvironment(undefined, { logger });
    const waiting = env
      .run(machineUpdate.upgradeNode, upgradeInput({ executor: 'management', nodeName: w, requestName: `${g}-stop` }))
      .catch((err: unknown) => err);
    await waitFor('the upgrader to take the request', async () => {
      const req = (await mg.custom
        .getNamespacedCustomObject({ ...nurRef, namespace: g, name: `${g}-stop` })
        .catch(() => undefined)) as NodeUpgradeRequest | undefined;
      return req?.status?.phase === 'Running';
    });
    env.cancel();
    await waiting;
    expect(
      await inActivity(() =>
        machineUpdate.stopNodeUpgrade({ cluster, nodeName: w, executor: 'management', requestName: `${g}-stop` }),
      ),
    ).toEqual({ started: true, observed: `NodeUpgradeRequest ${g}/${g}-stop: node upgrader reported Running` });
  } finally {
    await upgrader.stop();
  }
}

/** api: leases get, in the upgrader namespace only (a Role). */
async function tourNodeUpgraderCheck(): Promise<void> {
  const check = createNodeUpgraderCheck({ management: identities.api, namespace: SYSTEM_NAMESPACE, cacheMs: 0 });
  expect(await check.declared('TourMachine')).toEqual({
    ok: false,
    reason: `no node upgrader for TourMachine (no fresh Lease ${SYSTEM_NAMESPACE}/node-upgrader-tourmachine)`,
  });
}

/** api: secrets get; workload: leases get (a node's own, CanUpdateMachine) and list (any, CanUpdateMachineSet). */
async function tourNodeAgentCheck(): Promise<void> {
  expect(await nodeAgents.missing(cluster, w)).toBe(
    `no node agent serves node ${w} (no fresh Lease ${EXECUTOR_NAMESPACE}/node-upgrade-agent-${w})`,
  );
  expect(await nodeAgents.missing(cluster, undefined)).toBe(
    `no node agent runs in cluster ${cluster.namespace}/${cluster.name} (no fresh Lease ${EXECUTOR_NAMESPACE}/node-upgrade-agent-<node>)`,
  );
}

/** api: clusters get, machines get (the request checks' reads; a 404 is an answer, not a refusal). */
async function tourRequestChecks(): Promise<void> {
  const objects = managementObjects(identities.api);
  expect((await objects.cluster(g, CLUSTER))?.metadata?.uid).toMatch(/./);
  expect((await objects.machine(g, 'tour-w'))?.spec?.clusterName).toBe(CLUSTER);
  expect(await objects.machine(g, 'tour-absent')).toBeUndefined();
}

/** worker: clusters list/get/patch and events create, as a fleet rollout selects and moves a Cluster. */
async function tourFleet(): Promise<void> {
  const obj = capiCluster('tour-fleet', g, { version: OLD });
  obj.metadata.labels = { ...obj.metadata.labels, 'fleet-tour': g };
  await createCapiObject(mg.custom, obj);
  const fleet = createFleetActivities({
    management: identities.worker,
    checkClusterHealth: upgrade.checkClusterHealth,
  });
  const found = await fleet.selectClusters({ selector: { labelSelector: `fleet-tour=${g}`, namespaces: [g] } });
  expect(found.map((c) => [c.name, c.version])).toEqual([['tour-fleet', OLD]]);
  expect(await fleet.setClusterVersions({ rollout: 'rbac-tour', target: NEW, clusters: found })).toEqual([
    { uid: found[0]?.uid, outcome: 'set' },
  ]);
}

describe('RBAC roles in config/', () => {
  it('are exactly what the code uses: the tour uses every granted rule, nothing else, and is never refused', async () => {
    await tourCapacity();
    await tourClusterEvent();
    await tourClusterHealth();
    await tourAlertGate();
    await tourNodeActivities();
    await tourRemediation();
    await tourDrain();
    await tourJobExecutor();
    await tourDelegateExecutor();
    await tourManagementExecutor();
    await tourNodeAgentCheck();
    await tourNodeUpgraderCheck();
    await tourRequestChecks();
    await tourFleet();

    const events = await tourAuditEvents(tourStartedAt);
    expect(refused(events).map((e) => `the roles lack: ${describeRequest(e)}`)).toEqual([]);
    const problems: string[] = [];
    for (const id of Object.values(TOUR)) {
      const used = new Set(events.filter((e) => e.user.username === username(id)).map(usedPermission));
      problems.push(...mismatches(id, grantedPermissions(bindings[id.label]), used));
    }
    expect(problems).toEqual([]);
  }, 300_000);

  it('never refused the production identities the rest of the tier runs the code as', () => {
    const production = auditEvents().filter((e) => PRODUCTION_USERS.includes(e.user.username));
    expect(refused(production).map((e) => `the roles lack: ${describeRequest(e)}`)).toEqual([]);
  });
});
