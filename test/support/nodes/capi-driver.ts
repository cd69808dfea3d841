// Acts on a workload cluster's nodes as Cluster API would for an in-place update, with
// the extension as the product runs it: the real worker (every activity real, the
// `job` node-upgrade executor configured as given, node upgrades awaited by the watch
// outside activity slots) and the real UpdateMachine handler over HTTPS, request
// checks on, acting on the integration tier's management test bed as the worker's
// and the api's ServiceAccounts.
//
// In the management test bed it writes what CAPI would have: a namespace of its own,
// the Cluster, its `<cluster>-kubeconfig` Secret, a KubeadmConfig and a Machine per
// node (status.nodeRef naming the node), a MachineDeployment for the workers. An
// update then goes as in CAPI v1.14 (KCP's inplace_trigger.go, the MachineSet
// controller, machine_controller_inplace_update.go):
//   1. the Machine gets `in-place-updates.internal.cluster.x-k8s.io/update-in-progress`;
//   2. the InfraMachine and the KubeadmConfig are written as desired, with that annotation
//      (a control plane's desired KubeadmConfig has a joinConfiguration, never an
//      initConfiguration: KCP removes it);
//   3. the Machine's spec is written as desired (the new version);
//   4. `UpdateMachine` is added to the Machine's `runtime.cluster.x-k8s.io/pending-hooks`;
//   5. UpdateMachine is called with the ExtensionConfig's settings and `desired` = the three
//      objects cleaned up as CAPI does (apiVersion, kind, name, namespace, labels,
//      annotations, spec; no status), again after each `retryAfterSeconds`;
//   6. after `Success` with `retryAfterSeconds: 0` the annotation goes from all three and
//      `UpdateMachine` from pending-hooks.
// No infrastructure provider runs here, so the InfraMachine exists only in the requests.
import { AsyncCompletionClient, type Client, WorkflowNotFoundError } from '@temporalio/client';
import { createActivities } from '../../../src/activities/index.ts';
import type { JobExecutorConfig } from '../../../src/activities/executors/job.ts';
import { managementKubeConfig } from '../../../src/platform/kube/clients.ts';
import { NodeUpgradeWatch } from '../../../src/activities/node-upgrade-watch.ts';
import { defaultHandlerName, HOOKS_API_VERSION } from '../../../src/api/hooks/contract.ts';
import { hookPath } from '../../../src/api/hooks/hook-route.ts';
import { createInPlaceHandlers } from '../../../src/api/handlers/in-place/machine-updates.ts';
import {
  createRequestChecks,
  managementObjects,
  PENDING_HOOKS_ANNOTATION,
  UPDATE_IN_PROGRESS_ANNOTATION,
} from '../../../src/api/handlers/request-checks.ts';
import { specHash } from '../../../src/domain/in-place.ts';
import { machineUpdateSlotsWorkflowId, machineUpdateWorkflowId } from '../../../src/model/machine-update.ts';
import { abortSignal, retrySignal } from '../../../src/workflows/messages.ts';
import { callHook } from '../../../support/capi-client.ts';
import {
  CAPI_API_VERSION,
  CAPI_GROUP,
  CAPI_VERSION,
  CLUSTER_NAME_LABEL,
  createCapiObject,
  createNamespace,
  CONTROL_PLANE_LABEL,
  managementApi,
  mergePatch,
  testbed,
  testGroup,
  type CapiObject,
  type ManagementApi,
} from '../../../support/testbed-fixtures.ts';
import { startTestHookServer, type TestHookServer } from '../hook-server.ts';
import { activityFailures } from './update-figures.ts';
import type { Answer } from '../machine-update-workflow.ts';
import { requireEnv } from '../services.ts';
import { createTestWorker, testClient, uniqueTaskQueue } from '../temporal.ts';

export type { Answer };

export interface DriverNode {
  /** The Node's name in the workload cluster (the Machine's status.nodeRef). */
  name: string;
  role: 'control-plane' | 'worker';
  /** The Machine's spec.version now (what the node runs). */
  version: string;
  /** The bootstrap config's nodeRegistration.kubeletExtraArgs. */
  kubeletExtraArgs?: Record<string, string>;
}

/** A KubeadmConfig `spec.files` entry (v1beta2). */
export interface BootstrapFile {
  path: string;
  content: string;
  permissions?: string;
  owner?: string;
  encoding?: 'base64' | 'gzip' | 'gzip+base64';
}

export interface DriverOptions {
  /** Admin kubeconfig (YAML) of the workload cluster: the `<cluster>-kubeconfig` Secret holds it. */
  workloadKubeconfig: string;
  /** The CAPI Cluster's name (its namespace is the driver's own). */
  clusterName: string;
  nodes: DriverNode[];
  /** The worker's `job` executor (NODE_UPGRADE_JOB_IMAGE, _BINARY_SOURCE, _CHECKSUMS_FILE ...). */
  job: JobExecutorConfig;
  /** The ExtensionConfig's settings, over `{ nodeUpgradeExecutor: 'job' }`. */
  settings?: Record<string, string>;
  /** The management namespace; default a fresh one (`capid-<hex>`). */
  namespace?: string;
  /** The longest wait between calls (CAPI waits `retryAfterSeconds`); default 2 s. */
  maxRetryAfterMs?: number;
  /** updateMachine gives up (throws) after this long; default 15 minutes. */
  updateTimeoutMs?: number;
  /** The InfraMachine the requests carry; default a DockerMachine. */
  infrastructure?: { apiVersion: string; kind: string; spec?: (node: DriverNode) => Record<string, unknown> };
}

export interface UpdateOptions {
  /** The desired KubeadmConfig's spec.files; default: the files it has now. */
  files?: BootstrapFile[];
  /**
   * How many `Failure` answers that say they are retried to call through, as CAPI does (it calls
   * again after a backoff; the driver sends the `retry` signal instead of waiting it out); default 0.
   */
  retriedFailures?: number;
}

/** A Failure the extension retries: a later UpdateMachine, or the `retry` signal at once, starts the step over. */
export const isRetriedFailure = (a: Answer) =>
  a.status === 'Failure' && a.message?.includes('retried when UpdateMachine is called again') === true;

export interface CapiDriver {
  /** The management namespace of the Cluster, its Machines and KubeadmConfigs. */
  namespace: string;
  clusterName: string;
  /** Machine name by node name. */
  machines: Record<string, string>;
  taskQueue: string;
  /** The Temporal client the hook server uses (queries, history). */
  client: Client;
  /** Runs one in-place update as CAPI does, until `retryAfterSeconds: 0` or `Failure`; every answer, in order. */
  updateMachine(node: string, version: string, opts?: UpdateOptions): Promise<Answer[]>;
  /** Marks the update as CAPI does (once per desired spec) and calls UpdateMachine once. */
  sendOnce(node: string, version: string, opts?: UpdateOptions): Promise<Answer>;
  /** The machine-update workflow of this update (`machine-update/<ns>/<machine>/<spec hash>`). */
  workflowId(node: string, version: string, opts?: UpdateOptions): Promise<string>;
  /** The `abort` signal docs/in-place-updates.md names. */
  abort(node: string, version: string, reason?: string, opts?: UpdateOptions): Promise<void>;
  /** Stops the worker and the hook server, ends this driver's workflows still running, deletes the namespace. */
  stop(): Promise<void>;
}

type Obj = CapiObject & { metadata: CapiObject['metadata'] & { uid?: string } };

const BOOTSTRAP_GROUP = 'bootstrap.cluster.x-k8s.io';
const INFRA_GROUP = 'infrastructure.cluster.x-k8s.io';
const DEPLOYMENT_NAME_LABEL = 'cluster.x-k8s.io/deployment-name';
const DEFAULT_SETTINGS = { nodeUpgradeExecutor: 'job' };

const suffix = () => Math.random().toString(36).slice(2, 7).padEnd(5, 'x');
const extraArgs = (args: Record<string, string> = {}) => Object.entries(args).map(([name, value]) => ({ name, value }));

function nodeRegistration(node: DriverNode) {
  const args = extraArgs(node.kubeletExtraArgs);
  return { name: node.name, ...(args.length > 0 ? { kubeletExtraArgs: args } : {}) };
}

/** What the bootstrap provider made the node from: the first control plane inits, every other node joins. */
function initialKubeadmConfigSpec(node: DriverNode, first: boolean) {
  if (node.role === 'control-plane' && first)
    return { initConfiguration: { nodeRegistration: nodeRegistration(node) } };
  return {
    joinConfiguration: {
      ...(node.role === 'control-plane' ? { controlPlane: {} } : {}),
      nodeRegistration: nodeRegistration(node),
    },
  };
}

/** CAPI's cleanupMachine / cleanupUnstructured: what a hook request carries of an object. */
function cleanedUp(o: Obj) {
  const { name, namespace, labels, annotations } = o.metadata;
  return {
    apiVersion: o.apiVersion,
    kind: o.kind,
    metadata: { name, namespace, ...(labels ? { labels } : {}), ...(annotations ? { annotations } : {}) },
    spec: o.spec,
  };
}

function capiRef(kind: string, namespace: string, group = CAPI_GROUP, version = CAPI_VERSION) {
  return { group, version, namespace, plural: `${kind.toLowerCase()}s` };
}

export async function startCapiDriver(o: DriverOptions): Promise<CapiDriver> {
  const mg: ManagementApi = managementApi();
  const namespace = o.namespace ?? testGroup('capid').name;
  const cluster = o.clusterName;
  const settings = { ...DEFAULT_SETTINGS, ...o.settings };
  const maxRetryAfterMs = o.maxRetryAfterMs ?? 2_000;
  const updateTimeoutMs = o.updateTimeoutMs ?? 15 * 60_000;
  const infra = o.infrastructure ?? { apiVersion: `${INFRA_GROUP}/v1beta2`, kind: 'DockerMachine' };
  const controlPlanes = o.nodes.filter((n) => n.role === 'control-plane');
  const workers = o.nodes.filter((n) => n.role === 'worker');
  const deploymentName = `${cluster}-md-0`;
  const machines: Record<string, string> = {};
  for (const n of o.nodes)
    machines[n.name] = `${cluster}-${n.role === 'control-plane' ? 'control-plane' : 'md-0'}-${suffix()}`;
  const nodeOf = (name: string): DriverNode => {
    const n = o.nodes.find((x) => x.name === name);
    if (!n) throw new Error(`the driver has no node ${name} (it has ${o.nodes.map((x) => x.name).join(', ')})`);
    return n;
  };
  /** What the infrastructure provider has (and KCP / the MachineSet controller desire): unchanged by a version. */
  const infraMachine = (n: DriverNode, annotations?: Record<string, string>): Obj => ({
    apiVersion: infra.apiVersion,
    kind: infra.kind,
    metadata: {
      name: machines[n.name]!,
      namespace,
      labels: {
        [CLUSTER_NAME_LABEL]: cluster,
        ...(n.role === 'control-plane' ? { [CONTROL_PLANE_LABEL]: '' } : {}),
      },
      ...(annotations ? { annotations } : {}),
    },
    spec: infra.spec?.(n) ?? {},
  });
  const kcRef = capiRef('KubeadmConfig', namespace, BOOTSTRAP_GROUP);
  const readKubeadmConfig = async (n: DriverNode) =>
    (await mg.custom.getNamespacedCustomObject({ ...kcRef, name: machines[n.name]! })) as Obj;
  const readMachine = async (n: DriverNode) =>
    (await mg.custom.getNamespacedCustomObject({
      ...capiRef('Machine', namespace),
      name: machines[n.name]!,
    })) as Obj;
  const patchMachine = (n: DriverNode, body: unknown) =>
    mg.custom.patchNamespacedCustomObject(
      { ...capiRef('Machine', namespace), name: machines[n.name]!, body },
      mergePatch,
    ) as Promise<Obj>;
  const patchKubeadmConfig = (n: DriverNode, body: unknown) =>
    mg.custom.patchNamespacedCustomObject({ ...kcRef, name: machines[n.name]!, body }, mergePatch) as Promise<Obj>;

  // ---- the management objects -------------------------------------------------------------
  await createNamespace(mg.core, namespace);
  /** Everything CAPI (and its providers) would have written before an update. */
  const writeManagementObjects = async () => {
    await mg.core.createNamespacedSecret({
      namespace,
      body: {
        metadata: { name: `${cluster}-kubeconfig`, namespace, labels: { [CLUSTER_NAME_LABEL]: cluster } },
        type: 'cluster.x-k8s.io/secret',
        data: { value: Buffer.from(o.workloadKubeconfig).toString('base64') },
      },
    });
    await createCapiObject(mg.custom, {
      apiVersion: CAPI_API_VERSION,
      kind: 'Cluster',
      metadata: { name: cluster, namespace, labels: { [CLUSTER_NAME_LABEL]: cluster } },
      spec: {
        topology: {
          classRef: { name: 'in-place' },
          version: controlPlanes[0]?.version ?? o.nodes[0]?.version,
          controlPlane: { replicas: controlPlanes.length },
          ...(workers.length > 0
            ? { workers: { machineDeployments: [{ class: 'default-worker', name: 'md-0', replicas: workers.length }] } }
            : {}),
        },
      },
    });
    if (workers.length > 0) {
      const selector = { [CLUSTER_NAME_LABEL]: cluster, [DEPLOYMENT_NAME_LABEL]: deploymentName };
      // In place only with maxSurge 0 / maxUnavailable ≥ 1 (docs/in-place-updates.md, Setup).
      await createCapiObject(mg.custom, {
        apiVersion: CAPI_API_VERSION,
        kind: 'MachineDeployment',
        metadata: { name: deploymentName, namespace, labels: { [CLUSTER_NAME_LABEL]: cluster } },
        spec: {
          clusterName: cluster,
          replicas: workers.length,
          selector: { matchLabels: selector },
          rollout: { strategy: { type: 'RollingUpdate', rollingUpdate: { maxSurge: 0, maxUnavailable: 1 } } },
          template: {
            metadata: { labels: selector },
            spec: {
              clusterName: cluster,
              version: workers[0]!.version,
              bootstrap: {
                configRef: { apiGroup: BOOTSTRAP_GROUP, kind: 'KubeadmConfigTemplate', name: deploymentName },
              },
              infrastructureRef: { apiGroup: INFRA_GROUP, kind: `${infra.kind}Template`, name: deploymentName },
            },
          },
        },
      });
    }
    for (const n of o.nodes) {
      const name = machines[n.name]!;
      const labels = {
        [CLUSTER_NAME_LABEL]: cluster,
        ...(n.role === 'control-plane' ? { [CONTROL_PLANE_LABEL]: '' } : { [DEPLOYMENT_NAME_LABEL]: deploymentName }),
      };
      await mg.custom.createNamespacedCustomObject({
        ...kcRef,
        body: {
          apiVersion: `${BOOTSTRAP_GROUP}/v1beta2`,
          kind: 'KubeadmConfig',
          metadata: { name, namespace, labels },
          spec: initialKubeadmConfigSpec(n, n === controlPlanes[0]),
        },
      });
      await createCapiObject(mg.custom, {
        apiVersion: CAPI_API_VERSION,
        kind: 'Machine',
        metadata: { name, namespace, labels },
        spec: {
          clusterName: cluster,
          version: n.version,
          bootstrap: { configRef: { apiGroup: BOOTSTRAP_GROUP, kind: 'KubeadmConfig', name }, dataSecretName: name },
          infrastructureRef: { apiGroup: INFRA_GROUP, kind: infra.kind, name },
        },
        status: {
          nodeRef: { name: n.name },
          initialization: { infrastructureProvisioned: true, bootstrapDataSecretCreated: true },
          phase: 'Running',
        },
      });
    }
  };
  try {
    await writeManagementObjects();
  } catch (err) {
    await mg.core.deleteNamespace({ name: namespace }).catch(() => undefined);
    throw err;
  }

  // ---- the extension: the real worker and the real UpdateMachine handler --------------------
  const taskQueue = uniqueTaskQueue('capi-driver');
  const { client, close: closeClient } = await testClient();
  const upgradeWatch = new NodeUpgradeWatch(
    new AsyncCompletionClient({ connection: client.connection, namespace: requireEnv('TEMPORAL_NAMESPACE') }),
    { pollMs: 500 },
  );
  const { worker, connection } = await createTestWorker({
    taskQueue,
    activities: createActivities({
      management: managementKubeConfig(testbed().workerKubeconfig),
      nodeUpgradeJob: o.job,
      upgradeWatch,
    }),
  });
  const running = worker.run();
  /** The worker, the Temporal connections, the management namespace. */
  const release = async () => {
    upgradeWatch.close();
    worker.shutdown();
    await running;
    await connection.close();
    await closeClient();
    await mg.core.deleteNamespace({ name: namespace }).catch(() => undefined);
  };
  let hooks: TestHookServer;
  try {
    hooks = await startTestHookServer({
      inPlace: createInPlaceHandlers({
        client,
        taskQueue,
        checks: createRequestChecks(managementObjects(managementKubeConfig(testbed().apiKubeconfig))),
      }),
    });
  } catch (err) {
    await release();
    throw err;
  }

  // ---- an update, as CAPI makes it ----------------------------------------------------------
  /** The desired KubeadmConfig spec for `version`: a control plane joins (KCP drops initConfiguration). */
  const desiredKubeadmConfigSpec = async (n: DriverNode, opts: UpdateOptions) => {
    const current = await readKubeadmConfig(n);
    const files = opts.files ?? (current.spec.files as BootstrapFile[] | undefined);
    return {
      joinConfiguration: {
        ...(n.role === 'control-plane' ? { controlPlane: {} } : {}),
        nodeRegistration: nodeRegistration(n),
      },
      ...(files && files.length > 0 ? { files } : {}),
    };
  };
  /** The request's desired objects once CAPI marked the update (steps 1–4 above, each once). */
  const mark = async (n: DriverNode, version: string, opts: UpdateOptions) => {
    let machine = await readMachine(n);
    const annotations = machine.metadata.annotations ?? {};
    if (!(UPDATE_IN_PROGRESS_ANNOTATION in annotations))
      machine = await patchMachine(n, { metadata: { annotations: { [UPDATE_IN_PROGRESS_ANNOTATION]: '' } } });
    const infrastructureMachine = infraMachine(n, { [UPDATE_IN_PROGRESS_ANNOTATION]: '' });
    let kc = await readKubeadmConfig(n);
    const kcSpec = await desiredKubeadmConfigSpec(n, opts);
    const written =
      UPDATE_IN_PROGRESS_ANNOTATION in (kc.metadata.annotations ?? {}) &&
      kc.spec.initConfiguration === undefined &&
      JSON.stringify(kc.spec.files ?? []) === JSON.stringify(kcSpec.files ?? []);
    if (!written)
      kc = await patchKubeadmConfig(n, {
        metadata: { annotations: { [UPDATE_IN_PROGRESS_ANNOTATION]: '' } },
        spec: { initConfiguration: null, files: kcSpec.files ?? null, joinConfiguration: kcSpec.joinConfiguration },
      });
    if (machine.spec.version !== version) machine = await patchMachine(n, { spec: { version } });
    const pending = (machine.metadata.annotations?.[PENDING_HOOKS_ANNOTATION] ?? '')
      .split(',')
      .map((h) => h.trim())
      .filter(Boolean);
    if (!pending.includes('UpdateMachine'))
      machine = await patchMachine(n, {
        metadata: { annotations: { [PENDING_HOOKS_ANNOTATION]: [...pending, 'UpdateMachine'].join(',') } },
      });
    return {
      machine: cleanedUp(machine),
      infrastructureMachine: cleanedUp(infrastructureMachine),
      bootstrapConfig: cleanedUp(kc),
    };
  };
  /** Step 6: CAPI's completeInPlaceUpdate. */
  const complete = async (n: DriverNode) => {
    const machine = await readMachine(n);
    const pending = (machine.metadata.annotations?.[PENDING_HOOKS_ANNOTATION] ?? '')
      .split(',')
      .map((h) => h.trim())
      .filter((h) => h && h !== 'UpdateMachine');
    await patchMachine(n, {
      metadata: {
        annotations: {
          [UPDATE_IN_PROGRESS_ANNOTATION]: null,
          [PENDING_HOOKS_ANNOTATION]: pending.length > 0 ? pending.join(',') : null,
        },
      },
    });
    await patchKubeadmConfig(n, { metadata: { annotations: { [UPDATE_IN_PROGRESS_ANNOTATION]: null } } });
  };
  const call = async (body: unknown): Promise<Answer> => {
    const res = await callHook<Answer>(
      hooks.url,
      hookPath('UpdateMachine', defaultHandlerName('UpdateMachine')),
      body,
      {
        ca: hooks.ca.certPem,
        timeout: '10s',
      },
    );
    if (res.statusCode !== 200 || !res.body)
      throw new Error(`UpdateMachine answered HTTP ${res.statusCode}: ${res.text}`);
    return res.body;
  };
  const request = (desired: Awaited<ReturnType<typeof mark>>) => ({
    apiVersion: HOOKS_API_VERSION,
    kind: 'UpdateMachineRequest',
    settings,
    desired,
  });
  let stopped = false;
  /** The workflow of the last request sent, by `<node> <version>`. */
  const sent = new Map<string, string>();
  const send = async (n: DriverNode, version: string, opts: UpdateOptions) => {
    const desired = await mark(n, version, opts);
    sent.set(
      `${n.name} ${version}`,
      machineUpdateWorkflowId({ namespace, name: desired.machine.metadata.name }, specHash(desired)),
    );
    return await call(request(desired));
  };
  const workflowId = async (node: string, version: string, opts: UpdateOptions = {}) => {
    const n = nodeOf(node);
    const known = opts.files === undefined ? sent.get(`${n.name} ${version}`) : undefined;
    if (known) return known;
    // Not sent yet: the spec CAPI would send (as stored, bar server-side defaults).
    const machine = await readMachine(n);
    const bootstrapConfig = { spec: await desiredKubeadmConfigSpec(n, opts) };
    return machineUpdateWorkflowId(
      { namespace, name: machines[n.name]! },
      specHash({ machine: { ...cleanedUp(machine), spec: { ...machine.spec, version } }, bootstrapConfig }),
    );
  };

  return {
    namespace,
    clusterName: cluster,
    machines,
    taskQueue,
    client,
    sendOnce: (node, version, opts = {}) => send(nodeOf(node), version, opts),
    workflowId,
    async updateMachine(node, version, opts = {}) {
      const n = nodeOf(node);
      const deadline = Date.now() + updateTimeoutMs;
      const answers: Answer[] = [];
      let retries = opts.retriedFailures ?? 0;
      for (;;) {
        if (stopped)
          throw new Error(`UpdateMachine ${namespace}/${machines[node]} → ${version}: the driver was stopped`);
        // CAPI reconciles the Machine anew before each call: the objects as stored now.
        const answer = await send(n, version, opts);
        answers.push(answer);
        if (answer.status === 'Failure') {
          // The executor's last words (the failed Job's pod log) are in the run's history, not in the answer.
          const failures = await activityFailures(client, await workflowId(node, version, opts), 'upgradeNode').catch(
            (err: unknown) => [{ message: `history not readable: ${String(err)}`, details: [] }],
          );
          if (failures.length > 0) console.warn(`upgradeNode's failures: ${JSON.stringify(failures, null, 1)}`);
          if (retries <= 0 || !isRetriedFailure(answer)) return answers;
          retries--;
          // Said where the run's output shows it: a retried failure is a fact about the node, not noise.
          console.warn(`UpdateMachine ${n.name} → ${version} answered a retried Failure: ${answer.message ?? ''}`);
          await client.workflow.getHandle(await workflowId(node, version, opts)).signal(retrySignal);
          continue;
        }
        if (answer.retryAfterSeconds === 0) {
          await complete(n);
          return answers;
        }
        if (Date.now() > deadline)
          throw new Error(
            `UpdateMachine ${namespace}/${machines[node]} → ${version} not done within ${updateTimeoutMs} ms: ${answer.message ?? ''}`,
          );
        await new Promise((r) => setTimeout(r, Math.min(answer.retryAfterSeconds * 1000, maxRetryAfterMs)));
      }
    },
    async abort(node, version, reason = 'aborted by the CAPI driver', opts = {}) {
      await client.workflow.getHandle(await workflowId(node, version, opts)).signal(abortSignal, { reason });
    },
    async stop() {
      stopped = true;
      await hooks.close();
      // A run CAPI would still be polling (a test that failed midway): ended, so no worker is owed work.
      for (const id of [...new Set(sent.values()), machineUpdateSlotsWorkflowId({ namespace, name: cluster })]) {
        const handle = client.workflow.getHandle(id);
        const status = await handle.describe().then(
          (d) => d.status.name,
          (err: unknown) => {
            if (err instanceof WorkflowNotFoundError) return 'NOT_FOUND';
            throw err;
          },
        );
        if (status === 'RUNNING') await handle.terminate('CAPI driver stopped');
      }
      await release();
    },
  };
}
