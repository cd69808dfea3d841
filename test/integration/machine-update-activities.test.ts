// The machine update activities against the test bed: Machines in the management
// cluster, KWOK nodes and real workloads in the workload cluster (evictions go
// through the API server's Eviction API, PodDisruptionBudgets are kept by the
// disruption controller, replacements are made by the ReplicaSet controller and
// placed by the scheduler). Activities run in @temporalio/testing's
// MockActivityEnvironment: a real activity Context (heartbeats, heartbeat details
// of a "previous attempt", cancellation) without a Temporal server.
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { BatchV1Api, CustomObjectsApi, type V1Pod } from '@kubernetes/client-node';
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';
import { parse } from 'yaml';
import { managementKubeConfig } from '../../src/platform/kube/clients.ts';
import {
  CORDONED_BY_ANNOTATION,
  createMachineUpdateActivities,
  DEFAULT_JOB_IMAGE,
  NODE_UPGRADE_GROUP,
  NODE_UPGRADE_PLURAL,
  NODE_UPGRADE_REQUEST_CRD,
  NODE_UPGRADE_VERSION,
  UPDATE_FAILED_ANNOTATION,
  type DrainCheckpoint,
  type NodeUpgradeRequest,
} from '../../src/activities/machine-update.ts';
import type { DrainOptions, DrainResult, NodeUpgradeInput } from '../../src/activities/machine-update-types.ts';
import {
  createKubeadmConfig,
  createKubeadmConfigWithSecretFile,
  eventsOf,
  capiCluster,
  capiMachine,
  capiMachineDeployment,
  cordon,
  createCapiObject,
  createKubeconfigSecret,
  createNamespace,
  createNodes,
  daemonSet,
  deleteGroup,
  deployment,
  isRunningAndReady,
  jsonPatch,
  kwokNode,
  managementApi,
  mergePatch,
  mirrorPod,
  podDisruptionBudget,
  strategicPatch,
  podWithEmptyDir,
  setKubeletVersion,
  setNodeReady,
  sleep,
  standalonePod,
  testbed,
  testChecksumsFile,
  testDigest,
  testGroup,
  waitFor,
  waitForRunningPods,
  workloadApi,
  createWorkloadNamespace,
} from '../../support/testbed-fixtures.ts';

const group = testGroup('mu');
const g = group.name;
const wl = workloadApi();
const mg = managementApi();
const wlCustom = wl.kc.makeApiClient(CustomObjectsApi);
const NEW = 'v1.32.4';
const checksumsFile = testChecksumsFile([NEW]);
const activities = createMachineUpdateActivities({
  management: managementKubeConfig(testbed().workerKubeconfig),
  workloadNamespace: g,
  pollIntervalMs: 250,
  job: { checksumsFile },
});
const cluster = { namespace: g, name: 'wl' };
const node = (n: string) => `${g}-${n}`;
const [a, b, c, d, e, p, q, u, uf, j] = ['a', 'b', 'c', 'd', 'e', 'p', 'q', 'u', 'uf', 'j'].map(node) as [
  string,
  string,
  string,
  string,
  string,
  string,
  string,
  string,
  string,
  string,
];
const POOL_LABEL = 'capi-uo.test/pool';
const HOSTNAME = 'kubernetes.io/hostname';
const OLD = 'v1.31.14';
const SKIP_LABEL = { 'cluster.x-k8s.io/drain': 'skip' };

// The environment's logger would print every expected failure as a warning.
const logger = new DefaultLogger('ERROR');

const drainOptions = (o: Partial<DrainOptions> = {}): DrainOptions => ({
  deleteEmptyDirData: false,
  force: false,
  timeoutMs: 60_000,
  ...o,
});

/** Runs drain in its own activity environment (cancel() is sticky), recording heartbeats. */
function startDrain(nodeName: string, options: DrainOptions, previous?: DrainCheckpoint) {
  const env = new MockActivityEnvironment(previous ? { heartbeatDetails: previous } : undefined, { logger });
  const beats: DrainCheckpoint[] = [];
  env.on('heartbeat', (details: DrainCheckpoint) => beats.push(details));
  const result = env.run(activities.drain, { cluster, nodeName, options }) as Promise<DrainResult>;
  return { env, beats, result };
}

async function inActivity<T>(fn: () => Promise<T>): Promise<T> {
  return (await new MockActivityEnvironment(undefined, { logger }).run(fn)) as T;
}

const upgrade = (input: Partial<NodeUpgradeInput> & Pick<NodeUpgradeInput, 'nodeName' | 'requestName'>) =>
  inActivity(() =>
    activities.upgradeNode({
      cluster,
      machine: { namespace: g, name: `m-${input.nodeName}` },
      version: NEW,
      files: [],
      executor: 'delegate',
      timeoutMs: 30_000,
      ...input,
    }),
  );

async function podsOf(labelSelector: string): Promise<V1Pod[]> {
  return (await wl.core.listNamespacedPod({ namespace: g, labelSelector })).items;
}

async function nodeMeta(name: string) {
  const n = await wl.core.readNode({ name });
  return { unschedulable: n.spec?.unschedulable ?? false, annotations: n.metadata?.annotations ?? {} };
}

async function budgetSettled(name: string, healthy: number, allowed: number): Promise<void> {
  await waitFor(`PDB ${name}: ${healthy} healthy, ${allowed} allowed`, async () => {
    const pdb = await wl.policy.readNamespacedPodDisruptionBudget({ name, namespace: g });
    return (
      pdb.status?.observedGeneration === pdb.metadata?.generation &&
      pdb.status?.currentHealthy === healthy &&
      pdb.status.disruptionsAllowed === allowed
    );
  });
}

const CAPACITY_GATE = 'capi-uo.test/capacity';
const CAPACITY_DELAY_MS = 1_500;

/** Lifts the scheduling gate of the selected pods `delayMs` after it first sees each: new capacity arriving. */
function startCapacityKeeper(labelSelector: string): { delayMs: number; stop: () => Promise<void> } {
  const firstSeen = new Map<string, number>();
  const state = { delayMs: 0, stop: async () => {} };
  let running = true;
  const loop = (async () => {
    while (running) {
      for (const pod of await podsOf(labelSelector).catch(() => [])) {
        const name = pod.metadata?.name ?? '';
        if (!pod.spec?.schedulingGates?.length || pod.metadata?.deletionTimestamp) continue;
        const seen = firstSeen.get(name) ?? Date.now();
        firstSeen.set(name, seen);
        if (Date.now() - seen < state.delayMs) continue;
        await wl.core
          .patchNamespacedPod(
            { name, namespace: g, body: [{ op: 'remove', path: '/spec/schedulingGates' }] },
            jsonPatch,
          )
          .catch(() => undefined);
      }
      await sleep(50);
    }
  })();
  state.stop = async () => {
    running = false;
    await loop;
  };
  return state;
}

const onlyOn = (n: string) => ({ ...group.nodeSelector, [HOSTNAME]: n });

beforeAll(async () => {
  await Promise.all([createWorkloadNamespace(wl, g), createNamespace(mg.core, g)]);
  const webPool = { labels: { [POOL_LABEL]: 'web' } };
  const doomed = kwokNode(group, q);
  doomed.metadata = { ...doomed.metadata, finalizers: ['capi-uo.test/hold'] };
  await Promise.all([
    createKubeconfigSecret(mg.core, g, cluster.name),
    createNodes(wl.core, [
      kwokNode(group, a, webPool),
      kwokNode(group, b, webPool),
      kwokNode(group, c, webPool),
      ...[d, e, p, u, uf, j].map((n) => kwokNode(group, n, { kubeletVersion: OLD })),
      doomed,
    ]),
    ...[
      capiMachine('m-ready', g, { cluster: cluster.name, nodeName: p }),
      capiMachine('m-new', g, { cluster: cluster.name }),
      capiMachine('m-ghost', g, { cluster: cluster.name, nodeName: node('ghost') }),
      capiMachine('m-doomed', g, { cluster: cluster.name, nodeName: q }),
      // The Machines upgradeNode is called for (it stops when its Machine is being deleted).
      ...[u, uf, j].map((n) => capiMachine(`m-${n}`, g, { cluster: cluster.name, nodeName: n })),
    ].map((m) => createCapiObject(mg.custom, m)),
  ]);
});

afterAll(async () => {
  await wl.core.patchNode({ name: q, body: { metadata: { finalizers: null } } }, mergePatch).catch(() => undefined);
  await deleteGroup(wl, group);
  await mg.core.deleteNamespace({ name: g }).catch(() => undefined);
});

describe('preflight', () => {
  it('finds the node through status.nodeRef and checks it is Ready', async () => {
    expect(await activities.preflight({ machine: { namespace: g, name: 'm-ready' } })).toEqual({
      nodeName: p,
      clusterName: cluster.name,
    });
  });

  it('retries while the Machine has no node, fails for a missing Machine or node', async () => {
    await expect(activities.preflight({ machine: { namespace: g, name: 'm-new' } })).rejects.toMatchObject({
      nonRetryable: false,
      type: 'MachineHasNoNode',
      message: `Machine ${g}/m-new: machine has no nodeRef yet`,
    });
    await expect(activities.preflight({ machine: { namespace: g, name: 'm-absent' } })).rejects.toMatchObject({
      nonRetryable: true,
      type: 'MachineNotFound',
    });
    await expect(activities.preflight({ machine: { namespace: g, name: 'm-ghost' } })).rejects.toMatchObject({
      nonRetryable: true,
      type: 'NodeNotFound',
      message: `node ${node('ghost')} of Machine ${g}/m-ghost not found in the workload cluster`,
    });
  });

  it('fails for a node being deleted; retries while it is not Ready', async () => {
    await wl.core.deleteNode({ name: q });
    await expect(activities.preflight({ machine: { namespace: g, name: 'm-doomed' } })).rejects.toMatchObject({
      nonRetryable: true,
      type: 'NodeBeingDeleted',
    });

    await setNodeReady(wl, p, false);
    try {
      const err = await activities.preflight({ machine: { namespace: g, name: 'm-ready' } }).catch((x: unknown) => x);
      expect(err).toBeInstanceOf(ApplicationFailure);
      expect(err).toMatchObject({
        nonRetryable: false,
        type: 'NodeNotReady',
        message: `node ${p} of Machine ${g}/m-ready is not Ready (Ready=False: KubeletNotReady)`,
      });
    } finally {
      await setNodeReady(wl, p, true);
    }
  });

  it('waits, before any cordon, while the node reports DiskPressure (its kubelet would reject the upgrade pod)', async () => {
    const pressure = (status: 'True' | 'False') =>
      wl.core.patchNodeStatus(
        {
          name: p,
          body: { status: { conditions: [{ type: 'DiskPressure', status, reason: 'KubeletHasDiskPressure' }] } },
        },
        strategicPatch,
      );
    await pressure('True');
    try {
      await expect(activities.preflight({ machine: { namespace: g, name: 'm-ready' } })).rejects.toMatchObject({
        nonRetryable: false,
        type: 'NodeUnderPressure',
        message: `node ${p} of Machine ${g}/m-ready reports DiskPressure: its kubelet rejects new pods (free the node's disk or processes)`,
      });
      expect((await wl.core.readNode({ name: p })).spec?.unschedulable).toBeFalsy();
    } finally {
      await pressure('False');
    }
    await expect(activities.preflight({ machine: { namespace: g, name: 'm-ready' } })).resolves.toMatchObject({
      nodeName: p,
    });
  });
});

describe('preflight keeps to maxUnavailable', () => {
  it('waits while the MachineDeployment has as many machines out as its maxUnavailable allows, counting cordoned and NotReady nodes', async () => {
    const mdNodes = ['md0', 'md1', 'md2', 'md3'].map(node);
    const md = capiMachineDeployment('md-budget', g, { cluster: cluster.name, replicas: 4 });
    // v1beta2: spec.rollout.strategy.rollingUpdate; 50 % of 4 = 2 (a pruned field would leave 1).
    (md.spec as Record<string, unknown>).rollout = {
      strategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: '50%', maxSurge: 0 } },
    };
    await createNodes(
      wl.core,
      mdNodes.map((n) => kwokNode(group, n)),
    );
    await createCapiObject(mg.custom, md);
    await Promise.all(
      mdNodes.map((n, i) =>
        createCapiObject(
          mg.custom,
          capiMachine(`md-budget-${i}`, g, { cluster: cluster.name, nodeName: n, machineDeployment: 'md-budget' }),
        ),
      ),
    );
    const preflight = () => activities.preflight({ machine: { namespace: g, name: 'md-budget-0' } });
    // One other out (cordoned): this one makes two, which 50 % of 4 allows.
    await cordon(wl.core, mdNodes[1]!);
    expect(await preflight()).toMatchObject({ nodeName: mdNodes[0] });
    // A second one out (NotReady): no room left.
    await setNodeReady(wl, mdNodes[2]!, false);
    try {
      await expect(preflight()).rejects.toMatchObject({
        nonRetryable: false,
        type: 'MaxUnavailableReached',
        message: `Machine ${g}/md-budget-0 waits: MachineDeployment ${g}/md-budget has 2 machine(s) unavailable (md-budget-1, md-budget-2); maxUnavailable allows 2`,
      });
    } finally {
      await setNodeReady(wl, mdNodes[2]!, true);
    }
    await cordon(wl.core, mdNodes[1]!, false);
    expect(await preflight()).toMatchObject({ nodeName: mdNodes[0] });
  });
});

describe('preflight reads the per-cluster drain policy', () => {
  it('the Cluster annotation pdb-force-drain-timeout overrides the setting; a bad value fails naming it', async () => {
    const annotation = 'upgrades.capi-orchestrator.io/pdb-force-drain-timeout';
    const obj = capiCluster(cluster.name, g);
    obj.metadata.annotations = { [annotation]: '90s' };
    await createCapiObject(mg.custom, obj);
    try {
      expect(await activities.preflight({ machine: { namespace: g, name: 'm-ready' } })).toEqual({
        nodeName: p,
        clusterName: cluster.name,
        pdbForceDrainTimeoutMs: 90_000,
      });
      await mg.custom.patchNamespacedCustomObject(
        {
          group: 'cluster.x-k8s.io',
          version: 'v1beta2',
          plural: 'clusters',
          namespace: g,
          name: cluster.name,
          body: { metadata: { annotations: { [annotation]: 'soon' } } },
        },
        mergePatch,
      );
      await expect(activities.preflight({ machine: { namespace: g, name: 'm-ready' } })).rejects.toMatchObject({
        nonRetryable: true,
        message: `Cluster ${g}/${cluster.name} annotation ${annotation}="soon": not a duration (use e.g. 30m, 2h)`,
      });
    } finally {
      await mg.custom.deleteNamespacedCustomObject({
        group: 'cluster.x-k8s.io',
        version: 'v1beta2',
        plural: 'clusters',
        namespace: g,
        name: cluster.name,
      });
    }
  });
});

describe('cordon / uncordon / markNodeFailed', () => {
  it('cordons once, remembers it across a retry, and uncordons only its own cordon', async () => {
    expect(await activities.cordon({ cluster, nodeName: e })).toEqual({ wasUnschedulable: false });
    expect(await nodeMeta(e)).toMatchObject({
      unschedulable: true,
      annotations: { [CORDONED_BY_ANNOTATION]: 'machine-update' },
    });
    // A retry after a crash: the node is cordoned, by us, so it was schedulable before.
    expect(await activities.cordon({ cluster, nodeName: e })).toEqual({ wasUnschedulable: false });

    await activities.uncordon({ cluster, nodeName: e });
    const after = await nodeMeta(e);
    expect(after.unschedulable).toBe(false);
    expect(after.annotations[CORDONED_BY_ANNOTATION]).toBeUndefined();
    await activities.uncordon({ cluster, nodeName: e }); // idempotent
    expect((await nodeMeta(e)).unschedulable).toBe(false);
    await activities.uncordon({ cluster, nodeName: node('ghost') }); // a missing node: nothing to do
  });

  it('reports a node someone else cordoned, and never uncordons it', async () => {
    await cordon(wl.core, p);
    try {
      expect(await activities.cordon({ cluster, nodeName: p })).toEqual({ wasUnschedulable: true });
      expect(await activities.cordon({ cluster, nodeName: p })).toEqual({ wasUnschedulable: true });
      expect((await nodeMeta(p)).annotations[CORDONED_BY_ANNOTATION]).toBeUndefined();
      await activities.uncordon({ cluster, nodeName: p });
      expect((await nodeMeta(p)).unschedulable).toBe(true);
    } finally {
      await cordon(wl.core, p, false);
    }
    await expect(activities.cordon({ cluster, nodeName: node('ghost') })).rejects.toMatchObject({
      nonRetryable: true,
      type: 'NodeNotFound',
    });
  });

  it('marks a failed node with the reason, cut to 1024 characters', async () => {
    await activities.markNodeFailed({ cluster, nodeName: p, reason: 'x'.repeat(2000) });
    const long = (await nodeMeta(p)).annotations[UPDATE_FAILED_ANNOTATION] ?? '';
    expect([...long]).toHaveLength(1024);
    await activities.markNodeFailed({ cluster, nodeName: p, reason: 'drain timed out' });
    await activities.markNodeFailed({ cluster, nodeName: p, reason: 'drain timed out' });
    expect((await nodeMeta(p)).annotations[UPDATE_FAILED_ANNOTATION]).toBe('drain timed out');
    await activities.markNodeFailed({ cluster, nodeName: node('ghost'), reason: 'gone' });
  });
});

describe('setNodeUpdateFailed / clearNodeUpdateFailed', () => {
  const conditionOf = async (name: string) =>
    (await wl.core.readNode({ name })).status?.conditions?.find((c) => c.type === 'InPlaceUpdateFailed');

  it('sets the Node condition a MachineHealthCheck can match, and clears it after a success', async () => {
    await inActivity(() =>
      activities.setNodeUpdateFailed({ cluster, nodeName: q, reason: 'kubeadm upgrade node: exit 1' }),
    );
    expect(await conditionOf(q)).toMatchObject({
      status: 'True',
      reason: 'UpdateFailed',
      message: 'kubeadm upgrade node: exit 1',
    });
    expect((await nodeMeta(q)).annotations[UPDATE_FAILED_ANNOTATION]).toBe('kubeadm upgrade node: exit 1');
    // The kubelet's (here KWOK's) own conditions are kept: conditions merge by type.
    expect((await wl.core.readNode({ name: q })).status?.conditions?.find((c) => c.type === 'Ready')?.status).toBe(
      'True',
    );

    await inActivity(() => activities.clearNodeUpdateFailed({ cluster, nodeName: q }));
    expect(await conditionOf(q)).toMatchObject({ status: 'False', reason: 'UpdateSucceeded' });
    expect((await nodeMeta(q)).annotations[UPDATE_FAILED_ANNOTATION]).toBeUndefined();
    // A node that was never marked, or is gone, needs nothing.
    await inActivity(() => activities.clearNodeUpdateFailed({ cluster, nodeName: e }));
    expect(await conditionOf(e)).toBeUndefined();
    await inActivity(() => activities.setNodeUpdateFailed({ cluster, nodeName: node('ghost'), reason: 'gone' }));
  });
});

describe('drain', () => {
  it('evicts a Deployment one pod at a time under maxUnavailable 1, leaving DaemonSet, mirror and skip pods', async () => {
    // KWOK runs a replacement within milliseconds, which would make "one at a time" invisible.
    // The web pods carry a scheduling gate that a capacity keeper (below) lifts: at once for
    // the first three, CAPACITY_DELAY_MS after it appears for each replacement.
    await Promise.all([cordon(wl.core, b), cordon(wl.core, c)]); // the first three go to a
    const webSelector = { ...group.nodeSelector, [POOL_LABEL]: 'web' };
    const web = deployment(group, 'web', { replicas: 3, nodeSelector: webSelector });
    web.spec!.template.spec!.schedulingGates = [{ name: CAPACITY_GATE }];
    await wl.apps.createNamespacedDeployment({ namespace: g, body: web });
    const keeper = startCapacityKeeper('app=web');
    try {
      const originals = await waitForRunningPods(wl.core, g, 'app=web', 3);
      expect(originals.map((x) => x.spec?.nodeName)).toEqual([a, a, a]);
      await Promise.all([cordon(wl.core, b, false), cordon(wl.core, c, false)]);
      await Promise.all([
        wl.policy.createNamespacedPodDisruptionBudget({
          namespace: g,
          body: podDisruptionBudget(group, 'web', { app: 'web' }, { maxUnavailable: 1 }),
        }),
        wl.apps.createNamespacedDaemonSet({
          namespace: g,
          body: daemonSet(group, 'agent', { nodeSelector: webSelector }),
        }),
        wl.core.createNamespacedPod({ namespace: g, body: mirrorPod(group, 'static', a) }),
        wl.core.createNamespacedPod({
          namespace: g,
          body: standalonePod(group, 'keep', { nodeName: a, labels: SKIP_LABEL }),
        }),
      ]);
      await Promise.all([
        budgetSettled('web', 3, 1),
        waitForRunningPods(wl.core, g, 'app=agent', 3),
        waitForRunningPods(wl.core, g, 'app=static', 1),
        waitForRunningPods(wl.core, g, 'app=keep', 1),
      ]);
      expect(await activities.cordon({ cluster, nodeName: a })).toEqual({ wasUnschedulable: false });

      // Sample the Deployment while the drain runs: ready replicas, and when each original went.
      const originalNames = new Set(originals.map((x) => x.metadata?.name ?? ''));
      const evictedAt = new Map<string, number>();
      const readyAt = new Map<string, number>();
      let minReady = Number.POSITIVE_INFINITY;
      let sampling = true;
      const sampler = (async () => {
        while (sampling) {
          const pods = await podsOf('app=web');
          minReady = Math.min(minReady, pods.filter(isRunningAndReady).length);
          const now = Date.now();
          for (const pod of pods) {
            const name = pod.metadata?.name ?? '';
            if (originalNames.has(name) && pod.metadata?.deletionTimestamp && !evictedAt.has(name))
              evictedAt.set(name, now);
            if (!originalNames.has(name) && isRunningAndReady(pod) && !readyAt.has(name)) readyAt.set(name, now);
          }
          await sleep(50);
        }
      })();
      keeper.delayMs = CAPACITY_DELAY_MS;
      const started = Date.now();
      const run = startDrain(a, drainOptions());
      let result: DrainResult;
      try {
        result = await run.result;
      } finally {
        sampling = false;
        await sampler;
      }
      const took = Date.now() - started;

      expect(result).toEqual({ evicted: 3, deleted: 0, forceDeleted: 0, skipped: 3 });
      // Never more than one replica unavailable.
      expect(minReady).toBeGreaterThanOrEqual(2);
      // One at a time: each eviction after the previous one's replacement was up, and not before.
      const evictions = [...evictedAt.values()].sort((x, y) => x - y);
      const replacements = [...readyAt.values()].sort((x, y) => x - y);
      expect(evictions).toHaveLength(3);
      // (the drain does not wait for the last replacement)
      expect(replacements.length).toBeGreaterThanOrEqual(2);
      expect(replacements[0]! - evictions[0]!).toBeGreaterThanOrEqual(CAPACITY_DELAY_MS - 100);
      expect(evictions[1]!).toBeGreaterThanOrEqual(replacements[0]!);
      expect(evictions[2]!).toBeGreaterThanOrEqual(replacements[1]!);
      // While waiting, the heartbeat named the blocked pods and their budget.
      const blockedBeat = run.beats.find((beat) => beat.summary.includes('(PDB web)'));
      expect(blockedBeat?.summary).toMatch(
        new RegExp(`^drain: \\d to evict, 3 skipped, [12] blocking: ${g}/web-[a-z0-9-]+ \\(PDB web\\)`),
      );
      expect(blockedBeat?.summary).toContain(`; PDBs: ${g}/web`);
      expect(run.beats.at(-1)).toMatchObject({ remaining: 0, counts: result });

      // Left alone: DaemonSet, mirror and skip-labelled pods; the replicas run on b and c.
      const onA = (await wl.core.listNamespacedPod({ namespace: g, fieldSelector: `spec.nodeName=${a}` })).items;
      expect(onA.map((x) => [x.metadata?.labels?.app, x.metadata?.deletionTimestamp]).sort()).toEqual([
        ['agent', undefined],
        ['keep', undefined],
        ['static', undefined],
      ]);
      const moved = await waitForRunningPods(wl.core, g, 'app=web', 3);
      expect(moved.every((x) => x.spec?.nodeName === b || x.spec?.nodeName === c)).toBe(true);
      console.log(
        `drain of ${a}: ${took} ms; evictions at +${evictions.map((t) => t - started).join(', +')} ms, ` +
          `replacements ready at +${replacements.map((t) => t - started).join(', +')} ms`,
      );
    } finally {
      await keeper.stop();
    }
    await activities.uncordon({ cluster, nodeName: a });
    expect(await nodeMeta(a)).toMatchObject({ unschedulable: false });
  });

  it('waits on a budget that allows no disruption, times out naming it, stops when cancelled, then deletes after pdbForceDrainTimeout', async () => {
    await wl.apps.createNamespacedDeployment({
      namespace: g,
      body: deployment(group, 'pinned', { nodeSelector: onlyOn(d) }),
    });
    await wl.policy.createNamespacedPodDisruptionBudget({
      namespace: g,
      body: podDisruptionBudget(group, 'pinned', { app: 'pinned' }, { minAvailable: 1 }),
    });
    const [pod] = await waitForRunningPods(wl.core, g, 'app=pinned', 1);
    const podName = pod!.metadata?.name ?? '';
    await budgetSettled('pinned', 1, 0);
    await activities.cordon({ cluster, nodeName: d });
    const blocking = `${g}/${podName} (PDB pinned); PDBs: ${g}/pinned`;

    // The overall timeout: a non-retryable failure naming the pod and its budget.
    const timedOut = startDrain(d, drainOptions({ timeoutMs: 2_500 }));
    const err = await timedOut.result.catch((x: unknown) => x);
    expect(err).toBeInstanceOf(ApplicationFailure);
    expect(err).toMatchObject({
      nonRetryable: true,
      type: 'DrainTimeout',
      message: `drain of node ${d} did not finish within 2.5s: drain: 1 to evict, 0 skipped, 1 blocking: ${blocking}`,
    });
    expect(timedOut.beats.length).toBeGreaterThanOrEqual(2);
    expect(timedOut.beats[0]).toMatchObject({
      remaining: 1,
      summary: `drain: 1 to evict, 0 skipped, 1 blocking: ${blocking}`,
    });

    // Cancelled (skipDrain / forceDrain / abort): stops at once with the SDK's CancelledFailure.
    const cancelled = startDrain(d, drainOptions());
    await waitFor('a first heartbeat', async () => cancelled.beats.length > 0);
    const cancelAt = Date.now();
    cancelled.env.cancel();
    await expect(cancelled.result).rejects.toBeInstanceOf(CancelledFailure);
    expect(Date.now() - cancelAt).toBeLessThan(1_500);
    expect((await podsOf('app=pinned')).map((x) => [x.metadata?.name, x.metadata?.deletionTimestamp])).toEqual([
      [podName, undefined],
    ]);

    // After pdbForceDrainTimeout the blocked pod is deleted instead.
    const started = Date.now();
    const forced = startDrain(d, drainOptions({ pdbForceDrainTimeoutMs: 3_000 }));
    expect(await forced.result).toEqual({ evicted: 0, deleted: 1, forceDeleted: 0, skipped: 0 });
    expect(Date.now() - started).toBeGreaterThanOrEqual(3_000);
    expect(forced.beats.some((beat) => beat.summary.endsWith(blocking))).toBe(true);
    expect((await podsOf('app=pinned')).some((x) => x.metadata?.name === podName)).toBe(false);

    // A retried attempt keeps the first attempt's start (heartbeat details) and its counts.
    await activities.uncordon({ cluster, nodeName: d });
    const [again] = await waitForRunningPods(wl.core, g, 'app=pinned', 1);
    await budgetSettled('pinned', 1, 0);
    await activities.cordon({ cluster, nodeName: d });
    const retried = startDrain(d, drainOptions({ pdbForceDrainTimeoutMs: 10_000 }), {
      startedAtMs: Date.now() - 20_000,
      remaining: 1,
      summary: '',
      counts: { evicted: 2, deleted: 0, forceDeleted: 0, skipped: 0 },
    });
    const t0 = Date.now();
    expect(await retried.result).toEqual({ evicted: 2, deleted: 1, forceDeleted: 0, skipped: 0 });
    expect(Date.now() - t0).toBeLessThan(5_000);
    expect(retried.beats[0]?.startedAtMs).toBeLessThan(t0 - 19_000);
    expect((await podsOf('app=pinned')).some((x) => x.metadata?.name === again!.metadata?.name)).toBe(false);
  });

  it('refuses unmanaged and emptyDir pods unless allowed; forceDrain deletes blocked pods and force-deletes stuck ones', async () => {
    await Promise.all([
      // Stays terminating for 10 minutes after deletion (KWOK's pod-delete delay): stuck.
      wl.core.createNamespacedPod({
        namespace: g,
        body: standalonePod(group, 'loner', { nodeName: e, deleteDelay: '10m' }),
      }),
      wl.core.createNamespacedPod({ namespace: g, body: podWithEmptyDir(group, 'scratch', { nodeName: e }) }),
      wl.apps.createNamespacedDeployment({
        namespace: g,
        body: deployment(group, 'pinned2', { nodeSelector: onlyOn(e) }),
      }),
      wl.policy.createNamespacedPodDisruptionBudget({
        namespace: g,
        body: podDisruptionBudget(group, 'pinned2', { app: 'pinned2' }, { minAvailable: 1 }),
      }),
    ]);
    await Promise.all([
      waitForRunningPods(wl.core, g, 'app=loner', 1),
      waitForRunningPods(wl.core, g, 'app=scratch', 1),
      waitForRunningPods(wl.core, g, 'app=pinned2', 1),
    ]);
    await budgetSettled('pinned2', 1, 0);
    await activities.cordon({ cluster, nodeName: e });

    const refused = startDrain(e, drainOptions());
    await expect(refused.result).rejects.toMatchObject({
      nonRetryable: true,
      type: 'DrainBlocked',
      message:
        `cannot drain node ${e}: drain: 1 to evict, 0 skipped, 2 blocking: ${g}/loner (declares no controller), ` +
        `${g}/scratch (has emptyDir volumes (local data), declares no controller)`,
    });
    // Nothing was evicted.
    expect((await podsOf('app in (loner,scratch,pinned2)')).filter((x) => x.metadata?.deletionTimestamp)).toEqual([]);

    const started = Date.now();
    const forced = startDrain(e, drainOptions({ force: true, deleteEmptyDirData: true, forceNow: true }));
    expect(await forced.result).toEqual({ evicted: 2, deleted: 1, forceDeleted: 1, skipped: 0 });
    const took = Date.now() - started;
    // loner: grace 1s + the forceDrain threshold (5s) before it is force-deleted.
    expect(took).toBeGreaterThanOrEqual(5_500);
    expect(forced.beats.some((beat) => beat.summary.includes('waiting for 1 terminating pod'))).toBe(true);
    expect(await podsOf('app in (loner,scratch)')).toEqual([]);
    console.log(`forced drain of ${e}: ${took} ms`);
  });
});

// ---- node upgrade ---------------------------------------------------------------------------

/**
 * A stand-in for the node agent: acts on every NodeUpgradeRequest of the group whose
 * status is not for its current generation — reports Running, sets the node's kubelet
 * version, reports Succeeded (or Failed, for node uf).
 */
function startTestAgent(): { stop: () => Promise<void>; handled: string[] } {
  const handled: string[] = [];
  const ref = { group: NODE_UPGRADE_GROUP, version: NODE_UPGRADE_VERSION, plural: NODE_UPGRADE_PLURAL, namespace: g };
  const status = (name: string, s: NodeUpgradeRequest['status']) =>
    wlCustom.patchNamespacedCustomObjectStatus({ ...ref, name, body: { status: s } }, mergePatch);
  let running = true;
  const loop = (async () => {
    while (running) {
      try {
        const list = (await wlCustom.listNamespacedCustomObject(ref)) as { items: NodeUpgradeRequest[] };
        for (const req of list.items) {
          const generation = req.metadata.generation ?? 0;
          if (req.status?.observedGeneration === generation) continue;
          const { name } = req.metadata;
          handled.push(`${name}@${generation}`);
          await status(name, { phase: 'Running', message: 'upgrading', observedGeneration: generation });
          if (req.spec.nodeName === uf) {
            await status(name, {
              phase: 'Failed',
              message: 'kubeadm upgrade node: exit status 1',
              observedGeneration: generation,
            });
            continue;
          }
          await setKubeletVersion(wl.core, req.spec.nodeName, req.spec.kubernetesVersion);
          await status(name, {
            phase: 'Succeeded',
            message: `node ${req.spec.nodeName} upgraded to ${req.spec.kubernetesVersion}`,
            observedGeneration: generation,
          });
        }
      } catch {
        // the CRD is not installed yet
      }
      await sleep(200);
    }
  })();
  return {
    handled,
    stop: async () => {
      running = false;
      await loop;
    },
  };
}

describe('upgradeNode (delegate) and waitForNodeVersion', () => {
  let agent: ReturnType<typeof startTestAgent>;
  beforeAll(() => {
    agent = startTestAgent();
  });
  afterAll(async () => {
    await agent.stop();
  });

  it('the CRD in code is the shipped YAML', () => {
    const yaml: unknown = parse(
      readFileSync(new URL('../../config/crd/nodeupgraderequests.yaml', import.meta.url), 'utf8'),
    );
    expect(JSON.parse(JSON.stringify(NODE_UPGRADE_REQUEST_CRD))).toEqual(yaml);
  });

  it('installs the CRD, creates the request, waits for the agent; the node then reports the version', async () => {
    await createKubeadmConfigWithSecretFile(mg, g, `kc-${u}-h1`, 'join-token-h1', 'token');
    const files = { files: undefined, bootstrapConfig: { namespace: g, name: `kc-${u}-h1` } };
    const result = await upgrade({ nodeName: u, requestName: `${u}-h1`, ...files });
    expect(result).toEqual({ message: `node ${u} upgraded to ${NEW}` });
    await inActivity(() =>
      activities.waitForNodeVersion({ cluster, nodeName: u, version: '1.32.4', timeoutMs: 10_000 }),
    );

    const crd = await wlCustom.getClusterCustomObject({
      group: 'apiextensions.k8s.io',
      version: 'v1',
      plural: 'customresourcedefinitions',
      name: NODE_UPGRADE_REQUEST_CRD.metadata.name,
    });
    expect(crd).toMatchObject(JSON.parse(JSON.stringify(NODE_UPGRADE_REQUEST_CRD)) as object);
    const req = (await wlCustom.getNamespacedCustomObject({
      group: NODE_UPGRADE_GROUP,
      version: NODE_UPGRADE_VERSION,
      plural: NODE_UPGRADE_PLURAL,
      namespace: g,
      name: `${u}-h1`,
    })) as NodeUpgradeRequest;
    expect(req.spec).toEqual({
      nodeName: u,
      machineRef: { namespace: g, name: `m-${u}` },
      kubernetesVersion: NEW,
      bootstrapFilesSecretRef: { name: `${u}-h1-files` },
    });
    expect(req.metadata.labels).toMatchObject({ 'upgrades.capi-orchestrator.io/node-name': u });
    expect(req.status).toEqual({ phase: 'Succeeded', message: result.message, observedGeneration: 1 });

    // Idempotent: a retry finds the finished request and does not ask again.
    expect(await upgrade({ nodeName: u, requestName: `${u}-h1`, ...files })).toEqual(result);
    expect(agent.handled.filter((h) => h.startsWith(`${u}-h1@`))).toEqual([`${u}-h1@1`]);
    // Selectable by node for agents.
    const mine = (await wlCustom.listNamespacedCustomObject({
      group: NODE_UPGRADE_GROUP,
      version: NODE_UPGRADE_VERSION,
      plural: NODE_UPGRADE_PLURAL,
      namespace: g,
      fieldSelector: `spec.nodeName=${u}`,
    })) as { items: NodeUpgradeRequest[] };
    expect(mine.items.map((x) => x.metadata.name)).toEqual([`${u}-h1`]);
  });

  it('reads bootstrap files from the KubeadmConfig by reference, resolving contentFrom Secrets; cleanup deletes the request', async () => {
    const marker = `token-${g}`;
    await createKubeadmConfigWithSecretFile(mg, g, `kc-${u}`, 'join-token', marker);
    const input = {
      nodeName: u,
      requestName: `${u}-ref`,
      version: 'v1.32.5',
      bootstrapConfig: { namespace: g, name: `kc-${u}` },
    };
    await upgrade({ ...input, files: undefined });
    const ref = { group: NODE_UPGRADE_GROUP, version: NODE_UPGRADE_VERSION, plural: NODE_UPGRADE_PLURAL, namespace: g };
    const req = (await wlCustom.getNamespacedCustomObject({ ...ref, name: `${u}-ref` })) as NodeUpgradeRequest;
    // The contents are in a Secret owned by the request, never in its spec.
    expect(JSON.stringify(req)).not.toContain(marker);
    expect(req.spec.bootstrapFilesSecretRef).toEqual({ name: `${u}-ref-files` });
    const secret = await wl.core.readNamespacedSecret({ name: `${u}-ref-files`, namespace: g });
    expect(secret.metadata?.ownerReferences).toEqual([
      expect.objectContaining({ kind: 'NodeUpgradeRequest', name: `${u}-ref`, uid: req.metadata.uid }),
    ]);
    const data = Object.fromEntries(
      Object.entries(secret.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]),
    );
    expect(data).toEqual({
      f0: 'a=1',
      f1: marker,
      manifest: 'f0 0600 - /etc/kubernetes/extra.conf\nf1 0644 - /etc/kubernetes/token\n',
    });
    // A reference to something missing is a clear, final failure.
    await expect(
      upgrade({
        ...input,
        requestName: `${u}-ref2`,
        files: undefined,
        bootstrapConfig: { namespace: g, name: 'nope' },
      }),
    ).rejects.toMatchObject({ nonRetryable: true, message: `KubeadmConfig ${g}/nope not found` });

    await inActivity(() =>
      activities.cleanupNodeUpgrade({ cluster, nodeName: u, executor: 'delegate', requestName: `${u}-ref` }),
    );
    await expect(wlCustom.getNamespacedCustomObject({ ...ref, name: `${u}-ref` })).rejects.toMatchObject({ code: 404 });
    // Idempotent.
    await inActivity(() =>
      activities.cleanupNodeUpgrade({ cluster, nodeName: u, executor: 'delegate', requestName: `${u}-ref` }),
    );
  });

  it('refuses bootstrap files inline in the input (only a v1 update carried them: secrets in history), before any request', async () => {
    const inline = [{ path: '/etc/kubernetes/extra.conf', content: 'a=1', permissions: '0600' }];
    await expect(upgrade({ nodeName: u, requestName: `${u}-inline`, files: inline })).rejects.toMatchObject({
      nonRetryable: true,
      type: 'NodeUpgradeRefused',
      message:
        'this update carries 1 bootstrap file(s) inline in its workflow input, which is no longer accepted ' +
        '(file contents must not enter workflow history): abort it, and the next UpdateMachine reads them from the KubeadmConfig',
    });
    const ref = { group: NODE_UPGRADE_GROUP, version: NODE_UPGRADE_VERSION, plural: NODE_UPGRADE_PLURAL, namespace: g };
    await expect(wlCustom.getNamespacedCustomObject({ ...ref, name: `${u}-inline` })).rejects.toMatchObject({
      code: 404,
    });
  });

  it('a changed spec under the same name is a new generation: an older status does not count', async () => {
    await upgrade({ nodeName: u, requestName: `${u}-h3`, version: NEW, files: [] });
    const result = await upgrade({ nodeName: u, requestName: `${u}-h3`, version: 'v1.32.5', files: [] });
    expect(result).toEqual({ message: `node ${u} upgraded to v1.32.5` });
    expect(agent.handled.filter((h) => h.startsWith(`${u}-h3@`))).toEqual([`${u}-h3@1`, `${u}-h3@2`]);
    await inActivity(() =>
      activities.waitForNodeVersion({ cluster, nodeName: u, version: 'v1.32.5', timeoutMs: 10_000 }),
    );
  });

  it('waitForNodeVersion fails naming the version it sees', async () => {
    await expect(
      inActivity(() => activities.waitForNodeVersion({ cluster, nodeName: u, version: 'v1.33.0', timeoutMs: 1_000 })),
    ).rejects.toMatchObject({
      nonRetryable: true,
      type: 'NodeVersionTimeout',
      message: `node ${u} did not report kubelet v1.33.0 and Ready within 1s: kubelet v1.32.5, Ready=True: KubeletReady`,
    });
  });

  it('an agent that reports Failed fails the activity non-retryably with its message', async () => {
    const err = await upgrade({ nodeName: uf, requestName: `${uf}-h1` }).catch((x: unknown) => x);
    expect(err).toBeInstanceOf(ApplicationFailure);
    expect(err).toMatchObject({
      nonRetryable: true,
      type: 'NodeAgentFailed',
      message: 'node agent reported Failed: kubeadm upgrade node: exit status 1',
    });
    expect((await wl.core.readNode({ name: uf })).status?.nodeInfo?.kubeletVersion).toBe(OLD);
  });

  it('keeps one finished request per node: a new one prunes the node’s earlier Succeeded ones, never a Failed one or another node’s', async () => {
    const names = async (nodeName: string) =>
      (
        (await wlCustom.listNamespacedCustomObject({
          group: NODE_UPGRADE_GROUP,
          version: NODE_UPGRADE_VERSION,
          plural: NODE_UPGRADE_PLURAL,
          namespace: g,
          fieldSelector: `spec.nodeName=${nodeName}`,
        })) as { items: NodeUpgradeRequest[] }
      ).items
        .map((x) => x.metadata.name)
        .sort();
    await upgrade({ nodeName: u, requestName: `${u}-p1`, version: 'v1.32.5', files: [] });
    await upgrade({ nodeName: u, requestName: `${u}-p2`, version: 'v1.32.5', files: [] });
    expect(await names(u)).toEqual([`${u}-p2`]);
    // uf's agent fails: its earlier Failed request stays beside the new one, and u's is untouched.
    await expect(upgrade({ nodeName: uf, requestName: `${uf}-p1` })).rejects.toMatchObject({ type: 'NodeAgentFailed' });
    expect(await names(uf)).toEqual([`${uf}-h1`, `${uf}-p1`]);
    expect(await names(u)).toEqual([`${u}-p2`]);
  });
});

describe('upgradeNode while its Machine is deleted', () => {
  it('stops within seconds with MachineDeleted, so the workflow ends the update as aborted', async () => {
    const held = capiMachine(`m-${e}`, g, { cluster: cluster.name, nodeName: e });
    held.metadata = { ...held.metadata, finalizers: ['capi-uo.test/hold'] } as typeof held.metadata;
    await createCapiObject(mg.custom, held);
    const ref = { group: 'cluster.x-k8s.io', version: 'v1beta2', plural: 'machines', namespace: g, name: `m-${e}` };
    try {
      // No agent answers: without the deletion it would wait for the whole timeout.
      const pending = upgrade({ nodeName: e, requestName: `${e}-del`, timeoutMs: 120_000 }).catch((x: unknown) => x);
      await sleep(1_000);
      const deletedAt = Date.now();
      await mg.custom.deleteNamespacedCustomObject(ref);
      const err = await pending;
      expect(err).toMatchObject({
        nonRetryable: true,
        type: 'MachineDeleted',
        message: `Machine ${g}/m-${e} is being deleted`,
      });
      // The check is cached for 5 s and the wait polls every 250 ms here.
      expect(Date.now() - deletedAt).toBeLessThan(10_000);
    } finally {
      await mg.custom
        .patchNamespacedCustomObject({ ...ref, body: { metadata: { finalizers: null } } }, mergePatch)
        .catch(() => undefined);
    }
  });
});

describe('upgradeNode (delegate) without an agent', () => {
  it('fails early, saying no agent took the request, instead of waiting for the whole upgrade timeout', async () => {
    const started = Date.now();
    await expect(
      upgrade({ nodeName: u, requestName: `${u}-noagent`, agentPickupTimeoutMs: 1_000, timeoutMs: 60_000 }),
    ).rejects.toMatchObject({
      nonRetryable: true,
      type: 'NodeAgentMissing',
      message: `no node agent took NodeUpgradeRequest ${g}/${u}-noagent for node ${u} within 1s: is an agent running there? (or use nodeUpgradeExecutor=job)`,
    });
    expect(Date.now() - started).toBeLessThan(30_000);
  });
});

describe('recordMachineEvent', () => {
  it('records an Event on the Machine that kubectl describe finds, once per key, and nothing for a Machine that is gone', async () => {
    const machine = { namespace: g, name: 'm-ready' };
    const input = {
      machine,
      reason: 'MachineUpdateFailed' as const,
      type: 'Warning' as const,
      message: 'update to v1.31.15 failed: node upgrade Job failed',
      key: `machine-update/${g}/m-ready/abc/run-1/1/MachineUpdateFailed`,
    };
    await activities.recordMachineEvent(input);
    await activities.recordMachineEvent(input); // a retried activity
    // What `kubectl describe machine` asks for: the Machine's events by uid.
    const events = await eventsOf(mg, 'Machine', g, 'm-ready');
    expect(events.map((e) => [e.type, e.reason, e.message, e.count, e.source?.component])).toEqual([
      ['Warning', 'MachineUpdateFailed', input.message, 1, 'capi-upgrade-orchestrator'],
    ]);
    await activities.recordMachineEvent({ ...input, machine: { namespace: g, name: 'm-nonexistent' } });
  });
});

describe('milestone Events carried by the steps', () => {
  it('records the Event a step carries once the step succeeded, none when it failed, and never fails a step for its Event', async () => {
    const machine = { namespace: g, name: 'm-ready' };
    const event = (reason: 'MachineUpdateStarted' | 'MachineUpdateSucceeded', key: string) => ({
      machine,
      reason,
      type: 'Normal' as const,
      message: `${reason} of node ${e}`,
      key: `machine-update/${g}/m-ready/steps/run-1/1/${key}`,
    });
    expect(await activities.cordon({ cluster, nodeName: e, event: event('MachineUpdateStarted', 'started') })).toEqual({
      wasUnschedulable: false,
    });
    await expect(
      activities.cordon({ cluster, nodeName: node('ghost'), event: event('MachineUpdateStarted', 'ghost') }),
    ).rejects.toMatchObject({ type: 'NodeNotFound' });
    // An Event the API server refuses (no such namespace): the uncordon still happened.
    await activities.uncordon({
      cluster,
      nodeName: e,
      event: { ...event('MachineUpdateSucceeded', 'refused'), machine: { namespace: 'No_Such_Namespace', name: 'x' } },
    });
    expect((await nodeMeta(e)).unschedulable).toBe(false);
    const events = await eventsOf(mg, 'Machine', g, 'm-ready');
    expect(events.filter((x) => x.message?.endsWith(`of node ${e}`)).map((x) => [x.reason, x.count])).toEqual([
      ['MachineUpdateStarted', 1],
    ]);
  });
});

describe('upgradeNode (job)', () => {
  it('runs a privileged Job pinned to the node and returns when it completes', async () => {
    const result = await upgrade({ nodeName: j, requestName: `${j}-h1`, executor: 'job', timeoutMs: 60_000 });
    expect(result).toEqual({ message: `node upgrade Job ${g}/${j}-h1 completed on node ${j}` });
    const job = await wl.kc.makeApiClient(BatchV1Api).readNamespacedJob({ name: `${j}-h1`, namespace: g });
    expect(job.spec).toMatchObject({ backoffLimit: 2, activeDeadlineSeconds: 60 });
    const pod = job.spec?.template.spec;
    expect(pod).toMatchObject({
      nodeName: j,
      hostPID: true,
      restartPolicy: 'Never',
      tolerations: [{ operator: 'Exists' }],
      volumes: [{ name: 'host', hostPath: { path: '/' } }],
    });
    expect(pod?.containers[0]?.securityContext?.privileged).toBe(true);
    expect(pod?.containers[0]?.command).toEqual(['/bin/sh', '-c']);
    // The image by digest; the binaries' digests pinned in the worker's configuration, for the node's arch.
    expect(pod?.containers[0]?.image).toBe(DEFAULT_JOB_IMAGE);
    expect(pod?.containers[0]?.image).toMatch(/@sha256:[0-9a-f]{64}$/);
    expect(pod?.containers[0]?.env).toEqual([
      { name: 'KUBERNETES_VERSION', value: NEW },
      { name: 'UPGRADE_MODE', value: 'node' },
      { name: 'NODE_NAME', value: j },
      { name: 'HOST_ROOT', value: '/host' },
      { name: 'ARCH', value: 'amd64' },
      { name: 'KUBEADM_SHA256', value: testDigest(NEW, 'kubeadm') },
      { name: 'KUBELET_SHA256', value: testDigest(NEW, 'kubelet') },
      { name: 'KUBECTL_SHA256', value: testDigest(NEW, 'kubectl') },
    ]);
    expect(pod?.containers[0]?.args?.[0]).toMatch(/^#!\/bin\/sh\n# upgrade-node\.sh/);
    expect(pod?.containers[0]?.args?.[0]).toContain('SCRIPT_VERSION=3');
    // Idempotent by name: a retry finds the completed Job.
    expect(await upgrade({ nodeName: j, requestName: `${j}-h1`, executor: 'job', timeoutMs: 60_000 })).toEqual(result);
    expect(
      (await wl.kc.makeApiClient(BatchV1Api).listNamespacedJob({ namespace: g })).items.map((x) => x.metadata?.name),
    ).toEqual([`${j}-h1`]);
  });

  it('refuses a version without pinned checksums before creating the Job, naming it', async () => {
    const failure = upgrade({
      nodeName: j,
      requestName: `${j}-unpinned`,
      executor: 'job',
      version: 'v1.99.0',
      timeoutMs: 60_000,
    });
    await expect(failure).rejects.toMatchObject({
      nonRetryable: true,
      type: 'NodeUpgradeRefused',
      message: `no pinned checksums for v1.99.0 in NODE_UPGRADE_CHECKSUMS_FILE ${checksumsFile} (docs/node-upgrade-job.md)`,
    });
    const unconfigured = createMachineUpdateActivities({
      management: managementKubeConfig(testbed().workerKubeconfig),
      workloadNamespace: g,
    });
    await expect(
      inActivity(() =>
        unconfigured.upgradeNode({
          cluster,
          machine: { namespace: g, name: `m-${j}` },
          version: NEW,
          executor: 'job',
          timeoutMs: 60_000,
          nodeName: j,
          requestName: `${j}-unpinned`,
        }),
      ),
    ).rejects.toMatchObject({
      nonRetryable: true,
      message: `no pinned checksums for ${NEW}: NODE_UPGRADE_CHECKSUMS_FILE is not set (docs/node-upgrade-job.md)`,
    });
    await expect(
      wl.kc.makeApiClient(BatchV1Api).readNamespacedJob({ name: `${j}-unpinned`, namespace: g }),
    ).rejects.toMatchObject({ code: 404 });
    // On a later attempt of the activity an earlier one may have created the Job: not "refused, untouched".
    const again: NodeUpgradeInput = {
      cluster,
      machine: { namespace: g, name: `m-${j}` },
      version: 'v1.99.0',
      files: [],
      executor: 'job',
      timeoutMs: 60_000,
      nodeName: j,
      requestName: `${j}-unpinned`,
    };
    const retried = new MockActivityEnvironment({ attempt: 2 }, { logger }).run(activities.upgradeNode, again);
    await expect(retried).rejects.toMatchObject({ nonRetryable: true, type: 'InvalidNodeUpgrade' });
  });

  it('gives the script the bootstrap files in a Secret owned by the Job, never in its spec', async () => {
    const marker = `secret-${g}`;
    await createKubeadmConfig(mg, g, `kc-${j}-files`, [
      { path: '/etc/kubernetes/token', content: marker, permissions: '0600', owner: 'root:root' },
      { path: '/etc/motd', content: Buffer.from('hello').toString('base64'), encoding: 'base64' },
    ]);
    const bootstrapConfig = { namespace: g, name: `kc-${j}-files` };
    await upgrade({ nodeName: j, requestName: `${j}-files`, executor: 'job', timeoutMs: 60_000, bootstrapConfig });
    const job = await wl.kc.makeApiClient(BatchV1Api).readNamespacedJob({ name: `${j}-files`, namespace: g });
    expect(JSON.stringify(job)).not.toContain(marker);
    const pod = job.spec?.template.spec;
    expect(pod?.volumes).toContainEqual({
      name: 'files',
      secret: { secretName: `${j}-files-files`, defaultMode: 0o400 },
    });
    expect(pod?.containers[0]?.env).toContainEqual({ name: 'FILES_DIR', value: '/files' });
    expect(pod?.containers[0]?.volumeMounts).toContainEqual({ name: 'files', mountPath: '/files', readOnly: true });
    const secret = await wl.core.readNamespacedSecret({ name: `${j}-files-files`, namespace: g });
    expect(secret.metadata?.ownerReferences).toEqual([
      expect.objectContaining({ kind: 'Job', name: `${j}-files`, uid: job.metadata?.uid, controller: true }),
    ]);
    const data = Object.fromEntries(
      Object.entries(secret.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]),
    );
    expect(data).toEqual({
      f0: marker,
      f1: 'hello',
      manifest: 'f0 0600 root:root /etc/kubernetes/token\nf1 0644 - /etc/motd\n',
    });
  });

  it('fails with the script error line, and the failed pod log tail in the failure details', async () => {
    // The test bed fails Job pods of this image (test/testbed/kwok-pod-fail-stage.yaml) and serves
    // test/testbed/upgrade-job-pod-log.txt as the log of every "upgrade" container (kwok ClusterLogs).
    const failing = createMachineUpdateActivities({
      management: managementKubeConfig(testbed().workerKubeconfig),
      workloadNamespace: g,
      pollIntervalMs: 250,
      job: { image: 'testbed.invalid/fails', backoffLimit: 0, checksumsFile },
    });
    const failure = await inActivity(() =>
      failing.upgradeNode({
        cluster,
        machine: { namespace: g, name: `m-${j}` },
        version: NEW,
        files: [],
        executor: 'job',
        timeoutMs: 60_000,
        nodeName: j,
        requestName: `${j}-fail`,
      }),
    ).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(failure).toBeInstanceOf(ApplicationFailure);
    expect(failure).toMatchObject({
      type: 'NodeUpgradeJobFailed',
      nonRetryable: true,
      message:
        `node upgrade Job ${g}/${j}-fail failed: BackoffLimitExceeded: Job has reached the specified backoff limit; ` +
        '[node-upgrade] error: kubeadm v1.31.15: download from https://dl.k8s.io/release/v1.31.15/bin/linux/amd64/kubeadm failed',
    });
    const [log] = (failure as ApplicationFailure).details as [{ pod: string; lines: string[] }];
    expect(log.pod).toMatch(new RegExp(`^${j}-fail-`));
    expect(log.lines).toEqual([
      '[node-upgrade] upgrade-node.sh SCRIPT_VERSION=1 node=testbed version=v1.31.15 mode=node',
      '[node-upgrade] validating inputs',
      '[node-upgrade] node testbed: upgrading to v1.31.15 (mode node, arch amd64, host root /host, host commands: chroot)',
      'curl: (22) The requested URL returned error: 404',
      '[node-upgrade] error: kubeadm v1.31.15: download from https://dl.k8s.io/release/v1.31.15/bin/linux/amd64/kubeadm failed',
      '[node-upgrade] failed (exit 1)',
    ]);
  });

  it('cleanup deletes the Job and its pods', async () => {
    const batch = wl.kc.makeApiClient(BatchV1Api);
    await batch.readNamespacedJob({ name: `${j}-h1`, namespace: g });
    await inActivity(() =>
      activities.cleanupNodeUpgrade({ cluster, nodeName: j, executor: 'job', requestName: `${j}-h1` }),
    );
    await waitFor(`Job ${j}-h1 deleted`, async () =>
      (await batch.listNamespacedJob({ namespace: g })).items.every((x) => x.metadata?.name !== `${j}-h1`),
    );
    await inActivity(() =>
      activities.cleanupNodeUpgrade({ cluster, nodeName: j, executor: 'job', requestName: `${j}-h1` }),
    );
  });

  it('rejects an unknown executor', async () => {
    await expect(
      upgrade({ nodeName: j, requestName: `${j}-h2`, executor: 'ssh' as NodeUpgradeInput['executor'] }),
    ).rejects.toMatchObject({ nonRetryable: true, type: 'NodeUpgradeRefused' });
  });
});
