// Every hook call that would start or signal a workflow is checked against the
// management cluster first (a caller with a certificate still cannot start work
// for a Cluster or Machine that is not there or not in that state). Real parts throughout: HTTPS
// hook calls shaped like CAPI's, the real Temporal dev server (what was started
// or signalled is read from it), the test bed's API server holding the Cluster
// and Machine objects, read with the api's own ServiceAccount (config/rbac).
//
// BeforeClusterDelete for a Cluster that is not being deleted used to abort
// a held upgrade for good; now it is refused, and the same call
// once the Cluster has a deletionTimestamp aborts it as before.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { managementKubeConfig } from '../../src/platform/kube/clients.ts';
import { PooledKubeConfig } from '../../src/platform/kube/pooled-kube-config.ts';
import { createClusterUpgradeHandlers } from '../../src/api/handlers/lifecycle/cluster-upgrades.ts';
import { defaultHandlerName, HOOKS_API_VERSION, type HookName } from '../../src/api/hooks/contract.ts';
import { hookPath } from '../../src/api/hooks/hook-route.ts';
import { createInPlaceHandlers } from '../../src/api/handlers/in-place/machine-updates.ts';
import { hookRequestChecks, temporalRequestDuration } from '../../src/ops/metrics.ts';
import {
  CHECK_UNAVAILABLE_MESSAGE,
  createRequestChecks,
  managementObjects,
  PENDING_HOOKS_ANNOTATION,
  UPDATE_IN_PROGRESS_ANNOTATION,
  type ManagementObjects,
} from '../../src/api/handlers/request-checks.ts';
import { specHash } from '../../src/domain/in-place.ts';
import { clusterUpgradeWorkflowId } from '../../src/model/cluster-upgrade.ts';
import { machineUpdateSlotsWorkflowId, machineUpdateWorkflowId } from '../../src/model/machine-update.ts';
import { callHook } from '../../support/capi-client.ts';
import * as capi from '../../support/capi-fixtures.ts';
import {
  CAPI_API_VERSION,
  CAPI_GROUP,
  CAPI_VERSION,
  capiCluster,
  createCapiObject,
  createKubeconfigSecret,
  createNamespace,
  managementApi,
  patchCapiObject,
  testbed,
  testGroup,
  type CapiObject,
} from '../../support/testbed-fixtures.ts';
import { startTestHookServer, type TestHookServer } from '../support/hook-server.ts';
import { testClient, uniqueTaskQueue } from '../support/temporal.ts';
import { startTestbedWorker, type TestbedWorker } from '../support/testbed-worker.ts';
import { waitFor } from '../support/wait.ts';

const group = testGroup('checks');
const ns = group.name;
const mg = managementApi();
const FROM = 'v1.32.13';
const TARGET = 'v1.33.0';
const FAR = new Date(Date.now() + 24 * 3_600_000).toISOString();
const KEEP = 'test.capi-orchestrator.io/keep';
const EventType = temporal.api.enums.v1.EventType;

type Answer = { status: string; message?: string; retryAfterSeconds?: number };

/** The management cluster's objects as the api reads them (its own ServiceAccount), each read counted. */
function countedObjects(inner: ManagementObjects): ManagementObjects & { reads: number } {
  const counted = {
    reads: 0,
    cluster: (namespace: string, name: string) => (counted.reads++, inner.cluster(namespace, name)),
    machine: (namespace: string, name: string) => (counted.reads++, inner.machine(namespace, name)),
  };
  return counted;
}

/** The process's request-check counts and Temporal call counts, by label. */
async function metricValues() {
  // Copies: prom-client hands out its live entries.
  const checks = structuredClone(await hookRequestChecks.get());
  const temporal = structuredClone(await temporalRequestDuration.get());
  return {
    checks: (hook: string, result: string) =>
      checks.values.find((v) => v.labels.hook === hook && v.labels.result === result)?.value ?? 0,
    temporal: (result: string) =>
      temporal.values.find((v) => v.metricName?.endsWith('_count') && v.labels.result === result)?.value ?? 0,
  };
}

/** A management API server that refuses connections. */
function unreachableManagement(): PooledKubeConfig {
  const kc = new PooledKubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'gone', server: 'https://127.0.0.1:1', skipTLSVerify: true }],
    users: [{ name: 'u', token: 'not-a-token' }],
    contexts: [{ name: 'c', cluster: 'gone', user: 'u' }],
    currentContext: 'c',
  });
  return kc;
}

async function createCluster(name: string, opts: { annotations?: Record<string, string>; keep?: boolean } = {}) {
  const obj = capiCluster(name, ns, { version: TARGET });
  obj.metadata.annotations = opts.annotations ?? {};
  if (opts.keep) (obj.metadata as { finalizers?: string[] }).finalizers = [KEEP];
  const created = (await createCapiObject(mg.custom, obj)) as CapiObject & { metadata: { uid: string } };
  return created.metadata.uid;
}

/** A Machine as CAPI v1.14 leaves it while it calls UpdateMachine (markers per `inPlace`). */
async function createMachine(
  name: string,
  cluster: string,
  opts: { version: string; inPlace: boolean; pendingHooks?: string },
) {
  const obj: CapiObject = {
    apiVersion: CAPI_API_VERSION,
    kind: 'Machine',
    metadata: {
      name,
      namespace: ns,
      labels: { 'cluster.x-k8s.io/cluster-name': cluster },
      annotations: opts.inPlace
        ? { [UPDATE_IN_PROGRESS_ANNOTATION]: '', [PENDING_HOOKS_ANNOTATION]: opts.pendingHooks ?? 'UpdateMachine' }
        : {},
    },
    spec: {
      clusterName: cluster,
      version: opts.version,
      bootstrap: { configRef: { apiGroup: 'bootstrap.cluster.x-k8s.io', kind: 'KubeadmConfig', name } },
      infrastructureRef: { apiGroup: 'infrastructure.cluster.x-k8s.io', kind: 'DockerMachine', name },
    },
  };
  await createCapiObject(mg.custom, obj);
}

/** An UpdateMachine request for Machine `name` of `cluster`, desiring `version`. */
function updateMachineRequest(name: string, cluster: string, version: string, configName = name) {
  const machine = capi.machine(name, ns, version);
  machine.metadata.labels['cluster.x-k8s.io/cluster-name'] = cluster;
  machine.spec.clusterName = cluster;
  machine.spec.bootstrap.configRef.name = configName;
  return {
    apiVersion: HOOKS_API_VERSION,
    kind: 'UpdateMachineRequest',
    desired: {
      machine,
      infrastructureMachine: capi.infrastructureMachine(name, ns),
      bootstrapConfig: capi.kubeadmConfig(configName, ns),
    },
  };
}

describe('request checks against the management cluster', () => {
  let client: Client;
  let closeClient: () => Promise<void>;
  let hooks: TestHookServer;
  let unreachable: TestHookServer;
  let unserved: TestHookServer;
  let worker: TestbedWorker | undefined;
  let objects: ReturnType<typeof countedObjects>;
  const taskQueue = uniqueTaskQueue('checks');
  // No worker polls this one: an accepted UpdateMachine only has to start its run.
  const machineQueue = uniqueTaskQueue('checks-machines');

  const call = async (server: TestHookServer, hook: HookName, body: Record<string, unknown>): Promise<Answer> => {
    const res = await callHook<Answer>(server.url, hookPath(hook, defaultHandlerName(hook)), body, {
      ca: server.ca.certPem,
      timeout: '10s',
    });
    expect(res.statusCode).toBe(200);
    return res.body;
  };
  /** A lifecycle request for Cluster `name` as CAPI sends it: `uid`, topology version `topology`. */
  const lifecycle = (
    hook: HookName,
    name: string,
    uid: string,
    fields: Record<string, unknown> = {},
    opts: { topology?: string; annotations?: Record<string, string> } = {},
  ) => {
    const c = capi.cluster(name, ns, opts.topology ?? TARGET);
    c.metadata.uid = uid;
    c.metadata.annotations = { ...c.metadata.annotations, ...opts.annotations };
    return { apiVersion: HOOKS_API_VERSION, kind: `${hook}Request`, cluster: c, ...fields };
  };
  const bcu = (to = TARGET) => ({
    fromKubernetesVersion: FROM,
    toKubernetesVersion: to,
    controlPlaneUpgrades: [{ version: to }],
  });
  const held = { [`upgrades.capi-orchestrator.io/upgrade-at`]: FAR };
  /** A Cluster whose upgrade waits for its upgrade-at time: started, answered "waiting". */
  const startHeldUpgrade = async (name: string, opts: { keep?: boolean } = {}) => {
    const uid = await createCluster(name, { annotations: held, ...opts });
    await createKubeconfigSecret(mg.core, ns, name);
    const workflowId = clusterUpgradeWorkflowId({ namespace: ns, name, uid });
    const waiting = await waitFor(
      () =>
        call(hooks, 'BeforeClusterUpgrade', lifecycle('BeforeClusterUpgrade', name, uid, bcu(), { annotations: held })),
      (a) => a.message?.includes('upgradeAt') ?? false,
    );
    return { uid, workflowId, waiting };
  };

  const exists = async (workflowId: string) =>
    client.workflow
      .getHandle(workflowId)
      .describe()
      .then(
        () => true,
        (err: unknown) => {
          if (err instanceof WorkflowNotFoundError) return false;
          throw err;
        },
      );
  const signals = async (workflowId: string) =>
    ((await client.workflow.getHandle(workflowId).fetchHistory()).events ?? [])
      .filter((e) => e.eventType === EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED)
      .map((e) => e.workflowExecutionSignaledEventAttributes?.signalName);

  beforeAll(async () => {
    await createNamespace(mg.core, ns);
    ({ client, close: closeClient } = await testClient());
    objects = countedObjects(managementObjects(managementKubeConfig(testbed().apiKubeconfig)));
    const checks = createRequestChecks(objects);
    hooks = await startTestHookServer({
      lifecycle: createClusterUpgradeHandlers({ client, taskQueue, checks }),
      inPlace: createInPlaceHandlers({ client, taskQueue: machineQueue, checks }),
      captureLog: true,
    });
    const down = createRequestChecks(managementObjects(unreachableManagement()));
    unreachable = await startTestHookServer({
      lifecycle: createClusterUpgradeHandlers({ client, taskQueue, checks: down }),
      inPlace: createInPlaceHandlers({ client, taskQueue: machineQueue, checks: down }),
    });
    // A management cluster that does not serve Cluster API's v1beta2 (an older CAPI, CRDs missing).
    const unknown = createRequestChecks(
      managementObjects(managementKubeConfig(testbed().apiKubeconfig), { version: 'v1beta9' }),
    );
    unserved = await startTestHookServer({
      lifecycle: createClusterUpgradeHandlers({ client, taskQueue, checks: unknown }),
    });
    worker = await startTestbedWorker(taskQueue);
  });
  afterAll(async () => {
    await worker?.stop();
    await hooks?.close();
    await unreachable?.close();
    await unserved?.close();
    await closeClient?.();
    // Let the kept Clusters go, then the namespace.
    const list = (await mg.custom.listNamespacedCustomObject({
      group: CAPI_GROUP,
      version: CAPI_VERSION,
      namespace: ns,
      plural: 'clusters',
    })) as { items: CapiObject[] };
    await Promise.allSettled(
      list.items.map((c) =>
        patchCapiObject(mg.custom, 'Cluster', ns, c.metadata.name, { metadata: { finalizers: null } }),
      ),
    );
    await mg.core.deleteNamespace({ name: ns }).catch(() => undefined);
  });

  describe('BeforeClusterDelete', () => {
    it('refuses a Cluster that is not being deleted and leaves its held upgrade alone; once it is, aborts it as before', async () => {
      const name = 'held';
      const { uid, workflowId, waiting } = await startHeldUpgrade(name, { keep: true });
      expect(waiting).toMatchObject({ status: 'Success' });

      const refused = await call(hooks, 'BeforeClusterDelete', lifecycle('BeforeClusterDelete', name, uid));
      expect(refused).toEqual({
        apiVersion: HOOKS_API_VERSION,
        kind: 'BeforeClusterDeleteResponse',
        status: 'Failure',
        message: `refused: Cluster ${ns}/${name} is not being deleted (no deletionTimestamp)`,
        retryAfterSeconds: 0,
      });
      // Same state, same words.
      expect(await call(hooks, 'BeforeClusterDelete', lifecycle('BeforeClusterDelete', name, uid))).toEqual(refused);
      // Not aborted: no signal reached the run, which still waits for its time.
      expect(await signals(workflowId)).toEqual([]);
      expect((await client.workflow.getHandle(workflowId).describe()).status.name).toBe('RUNNING');
      expect(
        await call(
          hooks,
          'BeforeClusterUpgrade',
          lifecycle('BeforeClusterUpgrade', name, uid, bcu(), { annotations: held }),
        ),
      ).toEqual(waiting);

      // Now deleted for real (the finalizer keeps the object, with its deletionTimestamp).
      await mg.custom.deleteNamespacedCustomObject({
        group: CAPI_GROUP,
        version: CAPI_VERSION,
        namespace: ns,
        plural: 'clusters',
        name,
      });
      const done = await waitFor(
        () => call(hooks, 'BeforeClusterDelete', lifecycle('BeforeClusterDelete', name, uid)),
        (a) => a.status === 'Success' && a.retryAfterSeconds === 0,
        30_000,
      );
      expect(done).toMatchObject({ status: 'Success', retryAfterSeconds: 0 });
      // Aborted (the test polls faster than CAPI's 10 s: a call inside the visibility lag of the memo
      // that says an abort is on its way signals again, which the run ignores).
      const sent = await signals(workflowId);
      expect(sent.length).toBeGreaterThanOrEqual(1);
      expect(new Set(sent)).toEqual(new Set(['abort']));
      expect(await client.workflow.getHandle(workflowId).result()).toMatchObject({
        phase: 'Aborted',
        reason: 'cluster is being deleted',
      });
    });

    it('lets a Cluster that is gone (404) through', async () => {
      const answer = await call(
        hooks,
        'BeforeClusterDelete',
        lifecycle('BeforeClusterDelete', 'never-created', 'uid-gone'),
      );
      expect(answer).toMatchObject({ status: 'Success', retryAfterSeconds: 0 });
    });

    it('holds when the management cluster does not serve Clusters at all: a missing kind is not a Cluster gone', async () => {
      const name = 'unserved';
      const { uid, workflowId } = await startHeldUpgrade(name);
      const answer = await call(unserved, 'BeforeClusterDelete', lifecycle('BeforeClusterDelete', name, uid));
      expect(answer).toMatchObject({ status: 'Success', message: CHECK_UNAVAILABLE_MESSAGE });
      expect(answer.retryAfterSeconds).toBeGreaterThan(0);
      expect(await signals(workflowId)).toEqual([]);
    });
  });

  describe('BeforeClusterUpgrade and the upgrade gates', () => {
    it("refuses a uid that is not the Cluster's, a target that is not its topology version, and a Cluster that does not exist: nothing starts", async () => {
      const name = 'gates';
      const uid = await createCluster(name, { annotations: held });
      const other = '00000000-0000-4000-8000-00000000beef';
      const cases: [Record<string, unknown>, string, string][] = [
        [
          lifecycle('BeforeClusterUpgrade', name, other, bcu(), { annotations: held }),
          `refused: Cluster ${ns}/${name} has uid ${uid}, not the request's ${other}`,
          clusterUpgradeWorkflowId({ namespace: ns, name, uid: other }),
        ],
        [
          lifecycle('BeforeClusterUpgrade', name, uid, bcu('v1.34.1'), { topology: 'v1.34.1', annotations: held }),
          `refused: Cluster ${ns}/${name} spec.topology.version is ${TARGET}, not the request's target v1.34.1`,
          clusterUpgradeWorkflowId({ namespace: ns, name, uid }),
        ],
        [
          lifecycle('BeforeClusterUpgrade', 'absent', uid, bcu()),
          `refused: Cluster ${ns}/absent does not exist`,
          clusterUpgradeWorkflowId({ namespace: ns, name: 'absent', uid }),
        ],
      ];
      for (const [body, message, workflowId] of cases) {
        expect(await call(hooks, 'BeforeClusterUpgrade', body)).toMatchObject({
          status: 'Failure',
          message,
          retryAfterSeconds: 0,
        });
        expect(await exists(workflowId)).toBe(false);
      }
      // A gate of an intermediate step carries the Cluster (its topology version is the target), not the step's version.
      const gate = await call(
        hooks,
        'BeforeControlPlaneUpgrade',
        lifecycle('BeforeControlPlaneUpgrade', name, other, {
          fromKubernetesVersion: FROM,
          toKubernetesVersion: 'v1.33.0',
        }),
      );
      expect(gate).toMatchObject({
        status: 'Failure',
        message: `refused: Cluster ${ns}/${name} has uid ${uid}, not the request's ${other}`,
      });
      expect(await exists(clusterUpgradeWorkflowId({ namespace: ns, name, uid: other }))).toBe(false);
      const after = await call(
        hooks,
        'AfterClusterUpgrade',
        lifecycle('AfterClusterUpgrade', name, uid, { kubernetesVersion: 'v1.34.1' }, { topology: 'v1.34.1' }),
      );
      expect(after).toMatchObject({
        status: 'Failure',
        message: `refused: Cluster ${ns}/${name} spec.topology.version is ${TARGET}, not the request's target v1.34.1`,
      });
      expect(await exists(clusterUpgradeWorkflowId({ namespace: ns, name, uid }))).toBe(false);
    });

    it('starts the upgrade of a request that matches, and answers its repeat polls without reading the Cluster again', async () => {
      const name = 'accepted';
      const uid = await createCluster(name, { annotations: held });
      const body = lifecycle('BeforeClusterUpgrade', name, uid, bcu(), { annotations: held });
      const readsBefore = objects.reads;
      const first = await waitFor(
        () => call(hooks, 'BeforeClusterUpgrade', body),
        (a) => a.message?.includes('upgradeAt') ?? false,
      );
      expect(first).toMatchObject({ status: 'Success' });
      expect(await exists(clusterUpgradeWorkflowId({ namespace: ns, name, uid }))).toBe(true);
      expect(objects.reads).toBeGreaterThan(readsBefore);
      // The first answer already names what it waits for, so the next call may come before the api's
      // view has the run and check the request once more; from the one after, none reads.
      await waitFor(
        async () => {
          const before = objects.reads;
          await call(hooks, 'BeforeClusterUpgrade', body);
          return objects.reads - before;
        },
        (readsByCall) => readsByCall === 0,
      );
      const reads = objects.reads;
      for (let i = 0; i < 5; i++) expect(await call(hooks, 'BeforeClusterUpgrade', body)).toEqual(first);
      expect(objects.reads).toBe(reads);
    });

    it('holds (retry, nothing started) while the management cluster cannot be read, and counts it as a check, not a Temporal error', async () => {
      const name = 'unreadable';
      const uid = await createCluster(name);
      const before = await metricValues();
      const answer = await call(
        unreachable,
        'BeforeClusterUpgrade',
        lifecycle('BeforeClusterUpgrade', name, uid, bcu()),
      );
      expect(answer).toMatchObject({ status: 'Success', message: CHECK_UNAVAILABLE_MESSAGE });
      expect(answer.retryAfterSeconds).toBeGreaterThan(0);
      expect(await exists(clusterUpgradeWorkflowId({ namespace: ns, name, uid }))).toBe(false);
      const after = await metricValues();
      expect(
        after.checks('BeforeClusterUpgrade', 'unavailable') - before.checks('BeforeClusterUpgrade', 'unavailable'),
      ).toBe(1);
      expect(after.temporal('error')).toBe(before.temporal('error'));
    });
  });

  describe('UpdateMachine', () => {
    const CLUSTER = 'machines';
    beforeAll(async () => {
      await createCluster(CLUSTER);
      await Promise.all([
        createMachine('m-ok', CLUSTER, { version: TARGET, inPlace: true }),
        createMachine('m-old', CLUSTER, { version: 'v1.32.13', inPlace: true }),
        createMachine('m-idle', CLUSTER, { version: TARGET, inPlace: false }),
        createMachine('m-other', 'another-cluster', { version: TARGET, inPlace: true }),
        // Marked as updating, but CAPI has not (or no longer) asked for UpdateMachine on it.
        createMachine('m-unhooked', CLUSTER, { version: TARGET, inPlace: true, pendingHooks: 'SomeOtherHook' }),
      ]);
    });
    const workflowIdOf = (req: ReturnType<typeof updateMachineRequest>) =>
      machineUpdateWorkflowId({ namespace: ns, name: req.desired.machine.metadata.name }, specHash(req.desired));

    it.each([
      [
        'a desired version the Machine does not have',
        updateMachineRequest('m-old', CLUSTER, 'v1.99.0'),
        `refused: Machine ${ns}/m-old spec.version is v1.32.13, not the desired v1.99.0`,
      ],
      [
        'a Machine of another Cluster',
        updateMachineRequest('m-other', CLUSTER, TARGET),
        `refused: Machine ${ns}/m-other belongs to Cluster ${ns}/another-cluster, not ${ns}/${CLUSTER}`,
      ],
      [
        'a Machine CAPI is not updating in place',
        updateMachineRequest('m-idle', CLUSTER, TARGET),
        `refused: Machine ${ns}/m-idle is not being updated in place (no ${UPDATE_IN_PROGRESS_ANNOTATION} annotation)`,
      ],
      [
        'a Machine marked as updating whose pending hooks do not name UpdateMachine',
        updateMachineRequest('m-unhooked', CLUSTER, TARGET),
        `refused: Machine ${ns}/m-unhooked is not being updated in place (UpdateMachine is not in its ${PENDING_HOOKS_ANNOTATION} annotation)`,
      ],
      [
        'a Machine that does not exist',
        updateMachineRequest('m-absent', CLUSTER, TARGET),
        `refused: Machine ${ns}/m-absent does not exist`,
      ],
      [
        'another bootstrap config',
        updateMachineRequest('m-ok', CLUSTER, TARGET, 'm-elsewhere'),
        `refused: Machine ${ns}/m-ok spec.bootstrap.configRef is KubeadmConfig/m-ok, not the desired KubeadmConfig/m-elsewhere`,
      ],
    ])('refuses %s: Failure naming it, nothing started or queued', async (_, req, message) => {
      const before = await metricValues();
      const answer = await call(hooks, 'UpdateMachine', req);
      expect((await metricValues()).checks('UpdateMachine', 'refused')).toBe(
        before.checks('UpdateMachine', 'refused') + 1,
      );
      expect(answer).toEqual({
        apiVersion: HOOKS_API_VERSION,
        kind: 'UpdateMachineResponse',
        status: 'Failure',
        message,
        retryAfterSeconds: 0,
      });
      expect(await exists(workflowIdOf(req))).toBe(false);
      expect(await exists(machineUpdateSlotsWorkflowId({ namespace: ns, name: CLUSTER }))).toBe(false);
      // The operator's trail: a warning naming the mismatch and who called (this server asks no certificate).
      expect(hooks.logLines()).toContainEqual(
        expect.objectContaining({
          level: 40,
          msg: 'request refused by its check',
          hook: 'UpdateMachine',
          caller: '(no client certificate)',
          mismatch: message.replace(/^refused: /, ''),
        }),
      );
    });

    it('starts the update of the Machine CAPI is updating in place, to its own spec', async () => {
      const req = updateMachineRequest('m-ok', CLUSTER, TARGET);
      const answer = await call(hooks, 'UpdateMachine', req);
      expect(answer).toMatchObject({ status: 'Success', retryAfterSeconds: 10 });
      expect(await exists(workflowIdOf(req))).toBe(true);
      // A repeat poll reads Temporal only.
      const reads = objects.reads;
      expect(await call(hooks, 'UpdateMachine', req)).toMatchObject({ status: 'Success', retryAfterSeconds: 10 });
      expect(objects.reads).toBe(reads);
      await client.workflow.getHandle(workflowIdOf(req)).terminate('test done');
    });
  });
});
