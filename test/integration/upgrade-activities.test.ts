// The upgrade activities against the test bed: health checks read a real
// workload cluster (KWOK nodes, pods, PodDisruptionBudgets maintained by the
// disruption controller) through the kubeconfig Secret of a Cluster API Cluster;
// capacity reservation patches real v1beta2 Cluster and MachineDeployment objects.
import { createServer as createHttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createServer } from 'node:net';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ApplicationFailure } from '@temporalio/common';
import { withStableFailures } from '../../src/activities/failures.ts';
import { KUBERNETES_API_UNREACHABLE } from '../../src/platform/kube/stable-error.ts';
import { managementKubeConfig } from '../../src/platform/kube/clients.ts';
import { WORKLOAD_KUBECONFIG_REFUSED } from '../../src/platform/kube/workload-clusters.ts';
import { RESERVED_CAPACITY_ANNOTATION } from '../../src/activities/capacity.ts';
import { createUpgradeActivities } from '../../src/activities/upgrade.ts';
import type { HealthCheckInput } from '../../src/activities/upgrade-types.ts';
import {
  eventsOf,
  capiCluster,
  capiMachine,
  capiMachineDeployment,
  createCapiObject,
  createKubeconfigSecret,
  createNamespace,
  createNodes,
  deleteGroup,
  deployment,
  getCapiObject,
  kwokNode,
  managementApi,
  mergePatch,
  patchCapiObject,
  podDisruptionBudget,
  setKubeletVersion,
  setNodeReady,
  standalonePod,
  testbed,
  testGroup,
  waitFor,
  waitForRunningPods,
  workloadApi,
  workloadKubeconfigYaml,
  createWorkloadNamespace,
} from '../../support/testbed-fixtures.ts';

const group = testGroup('ua');
const g = group.name;
const wl = workloadApi();
const mg = managementApi();
const activities = createUpgradeActivities({ management: managementKubeConfig(testbed().workerKubeconfig) });
const cluster = { namespace: g, name: 'prod' };
const cps = [1, 2, 3].map((i) => `${g}-cp-${i}`);
const workers = [1, 2, 3, 4, 5, 6, 7].map((i) => `${g}-w-${i}`);
const OLD = 'v1.31.14';
const NEW = 'v1.32.4';

function check(scope: HealthCheckInput['scope'], extra: Partial<HealthCheckInput> = {}) {
  return activities.checkClusterHealth({
    cluster,
    scope,
    criticalNamespaces: [g],
    blockingPdbPolicy: 'fail',
    ...extra,
  });
}

beforeAll(async () => {
  await Promise.all([createWorkloadNamespace(wl, g), createNamespace(mg.core, g)]);
  await createKubeconfigSecret(mg.core, g, cluster.name);
  await Promise.all([
    createNodes(wl.core, [
      ...cps.map((n) => kwokNode(group, n, { role: 'control-plane', kubeletVersion: OLD })),
      ...workers.map((n) => kwokNode(group, n, { kubeletVersion: OLD })),
    ]),
    createCapiObject(mg.custom, capiCluster(cluster.name, g, { version: OLD })),
    ...cps.map((n) =>
      createCapiObject(mg.custom, capiMachine(n, g, { cluster: cluster.name, controlPlane: true, nodeName: n })),
    ),
    ...workers.map((n) => createCapiObject(mg.custom, capiMachine(n, g, { cluster: cluster.name, nodeName: n }))),
    wl.apps.createNamespacedDeployment({ namespace: g, body: deployment(group, 'core', { replicas: 2 }) }),
  ]);
  await waitForRunningPods(wl.core, g, 'app=core', 2);
});

afterAll(async () => {
  await deleteGroup(wl, group);
  await mg.core.deleteNamespace({ name: g }).catch(() => undefined);
});

describe('checkClusterHealth', () => {
  it('pre: a healthy cluster passes, with the same report every time', async () => {
    const report = await check('pre');
    expect(report).toEqual({
      healthy: true,
      summary: '10 of 10 nodes Ready; 2 of 2 critical pods Ready',
      findings: [],
      warnings: [],
    });
    expect(await check('pre')).toEqual(report);
  });

  it('control-plane: fails until every control-plane node runs the version (a leading v is optional)', async () => {
    await Promise.all([setKubeletVersion(wl.core, cps[0]!, NEW), setKubeletVersion(wl.core, cps[1]!, NEW)]);
    expect(await check('control-plane', { version: NEW })).toEqual({
      healthy: false,
      summary: `2 of 3 control-plane nodes Ready at ${NEW} (${cps[2]}: kubelet ${OLD})`,
      findings: [`node ${cps[2]}: kubelet ${OLD}, want ${NEW}`],
      warnings: [],
    });
    await setKubeletVersion(wl.core, cps[2]!, NEW);
    expect(await check('control-plane', { version: '1.32.4' })).toEqual({
      healthy: true,
      summary: `3 of 3 control-plane nodes Ready at ${NEW}`,
      findings: [],
      warnings: [],
    });
  });

  it('workers: lists at most five nodes in the summary, and passes once all run the version', async () => {
    const report = await check('workers', { version: NEW });
    expect(report.healthy).toBe(false);
    expect(report.summary).toBe(
      `0 of 7 worker nodes Ready at ${NEW} (` +
        workers
          .slice(0, 5)
          .map((n) => `${n}: kubelet ${OLD}`)
          .join(', ') +
        ', +2 more)',
    );
    expect(report.findings).toEqual(workers.map((n) => `node ${n}: kubelet ${OLD}, want ${NEW}`));

    await Promise.all(workers.map((n) => setKubeletVersion(wl.core, n, NEW)));
    expect(await check('workers', { version: NEW })).toMatchObject({
      healthy: true,
      summary: `7 of 7 worker nodes Ready at ${NEW}`,
    });
  });

  it('workers: a node that is not Ready fails the check', async () => {
    await setNodeReady(wl, workers[1]!, false);
    try {
      expect(await check('workers', { version: NEW })).toEqual({
        healthy: false,
        summary: `6 of 7 worker nodes Ready at ${NEW} (${workers[1]}: NotReady)`,
        findings: [`node ${workers[1]}: NotReady`],
        warnings: [],
      });
    } finally {
      await setNodeReady(wl, workers[1]!, true);
    }
  });

  it('post: every node at the version and every critical pod running; a Pending critical pod fails it', async () => {
    expect(await check('post', { version: NEW })).toMatchObject({
      healthy: true,
      summary: `10 of 10 nodes Ready at ${NEW}; 2 of 2 critical pods Ready`,
    });
    await wl.core.createNamespacedPod({
      namespace: g,
      body: standalonePod(group, 'stuck', { nodeSelector: { 'capi-uo.test/nowhere': 'true' } }),
    });
    try {
      expect(await check('post', { version: NEW })).toEqual({
        healthy: false,
        summary: `10 of 10 nodes Ready at ${NEW}; 2 of 3 critical pods Ready (${g}/stuck: Pending)`,
        findings: [`pod ${g}/stuck: Pending`],
        warnings: [],
      });
    } finally {
      await wl.core.deleteNamespacedPod({ name: 'stuck', namespace: g, gracePeriodSeconds: 0 });
    }
  });

  it('post: a Machine whose node is gone fails it', async () => {
    const gone = `${g}-gone`;
    await createCapiObject(mg.custom, capiMachine(gone, g, { cluster: cluster.name, nodeName: gone }));
    try {
      const report = await check('post', { version: NEW });
      expect(report.healthy).toBe(false);
      expect(report.findings).toEqual([`node ${gone}: not found (Machine ${gone})`]);
      expect(report.summary).toBe(
        `10 of 11 nodes Ready at ${NEW} (${gone}: not found (Machine ${gone})); 2 of 2 critical pods Ready`,
      );
    } finally {
      await mg.custom.deleteNamespacedCustomObject({
        group: 'cluster.x-k8s.io',
        version: 'v1beta2',
        namespace: g,
        plural: 'machines',
        name: gone,
      });
    }
  });

  it('pre: a PodDisruptionBudget that allows no disruptions fails or warns as the policy says', async () => {
    await wl.apps.createNamespacedDeployment({ namespace: g, body: deployment(group, 'guarded') });
    await wl.policy.createNamespacedPodDisruptionBudget({
      namespace: g,
      body: podDisruptionBudget(group, 'guarded', { app: 'guarded' }, { minAvailable: 1 }),
    });
    await waitForRunningPods(wl.core, g, 'app=guarded', 1);
    await waitFor('the budget to allow no disruptions', async () => {
      const pdb = await wl.policy.readNamespacedPodDisruptionBudget({ name: 'guarded', namespace: g });
      return pdb.status?.currentHealthy === 1 && pdb.status.disruptionsAllowed === 0;
    });
    const line = `PodDisruptionBudget ${g}/guarded allows no disruptions (covers 1 pod)`;
    const summary = `10 of 10 nodes Ready; 3 of 3 critical pods Ready; 1 PodDisruptionBudget blocks drains (${g}/guarded)`;
    expect(await check('pre', { blockingPdbPolicy: 'fail' })).toEqual({
      healthy: false,
      summary,
      findings: [line],
      warnings: [],
    });
    expect(await check('pre', { blockingPdbPolicy: 'warn' })).toEqual({
      healthy: true,
      summary,
      findings: [],
      warnings: [line],
    });
  });
});

// ---- capacity reservation -------------------------------------------------------------

interface ClusterShape {
  metadata: { annotations?: Record<string, string> };
  spec: { topology?: { workers?: { machineDeployments?: { name: string; replicas?: number }[] } } };
}

async function topologyReplicas(name: string): Promise<Record<string, number | undefined>> {
  const c = (await getCapiObject(mg.custom, 'Cluster', g, name)) as unknown as ClusterShape;
  return Object.fromEntries((c.spec.topology?.workers?.machineDeployments ?? []).map((md) => [md.name, md.replicas]));
}

async function annotation(name: string): Promise<string | undefined> {
  const c = await getCapiObject(mg.custom, 'Cluster', g, name);
  return c.metadata.annotations?.[RESERVED_CAPACITY_ANNOTATION];
}

async function mdReplicas(name: string): Promise<number | undefined> {
  const md = await getCapiObject(mg.custom, 'MachineDeployment', g, name);
  return md.spec.replicas as number | undefined;
}

describe('reserveCapacity / releaseCapacity', () => {
  it('scales topology MachineDeployments in the Cluster topology and others in place, once, and scales back', async () => {
    const ref = { namespace: g, name: 'topo' };
    await createCapiObject(
      mg.custom,
      capiCluster(ref.name, g, {
        machineDeployments: [
          { name: 'md-0', replicas: 2 },
          { name: 'md-1', replicas: 1 },
          { name: 'md-auto' }, // autoscaled: no replicas in the topology, left alone
        ],
      }),
    );
    await Promise.all([
      createCapiObject(
        mg.custom,
        capiMachineDeployment('topo-md-0-x1', g, { cluster: 'topo', replicas: 2, topologyName: 'md-0' }),
      ),
      createCapiObject(
        mg.custom,
        capiMachineDeployment('topo-md-1-x2', g, { cluster: 'topo', replicas: 1, topologyName: 'md-1' }),
      ),
      createCapiObject(
        mg.custom,
        capiMachineDeployment('topo-md-auto-x3', g, { cluster: 'topo', replicas: 5, topologyName: 'md-auto' }),
      ),
      createCapiObject(mg.custom, capiMachineDeployment('topo-extra', g, { cluster: 'topo', replicas: 3 })),
      // another cluster's MachineDeployment in the same namespace
      createCapiObject(mg.custom, capiMachineDeployment('other-md', g, { cluster: 'other', replicas: 4 })),
    ]);

    const expected = [
      { machineDeployment: 'md-0', originalReplicas: 2, reservedReplicas: 3 },
      { machineDeployment: 'md-1', originalReplicas: 1, reservedReplicas: 2 },
      { machineDeployment: 'topo-extra', originalReplicas: 3, reservedReplicas: 4 },
    ];
    expect(await activities.reserveCapacity({ cluster: ref, count: 1 })).toEqual(expected);
    const after = async () => ({
      topology: await topologyReplicas('topo'),
      mds: await Promise.all(
        ['topo-md-0-x1', 'topo-md-1-x2', 'topo-md-auto-x3', 'topo-extra', 'other-md'].map(mdReplicas),
      ),
    });
    const reserved = { topology: { 'md-0': 3, 'md-1': 2, 'md-auto': undefined }, mds: [2, 1, 5, 4, 4] };
    expect(await after()).toEqual(reserved);
    expect(JSON.parse((await annotation('topo')) ?? 'null')).toEqual([
      { ...expected[0], scaledIn: 'topology' },
      { ...expected[1], scaledIn: 'topology' },
      { ...expected[2], scaledIn: 'machineDeployment' },
    ]);

    // Idempotent: the recorded reservation comes back and nothing scales again.
    expect(await activities.reserveCapacity({ cluster: ref, count: 1 })).toEqual(expected);
    expect(await after()).toEqual(reserved);

    expect(await activities.releaseCapacity({ cluster: ref })).toEqual(expected);
    expect(await after()).toEqual({ topology: { 'md-0': 2, 'md-1': 1, 'md-auto': undefined }, mds: [2, 1, 5, 3, 4] });
    expect(await annotation('topo')).toBeUndefined();
    expect(await activities.releaseCapacity({ cluster: ref })).toEqual([]);
    expect(await after()).toEqual({ topology: { 'md-0': 2, 'md-1': 1, 'md-auto': undefined }, mds: [2, 1, 5, 3, 4] });
  });

  it('finishes a reservation recorded before a crash, and concurrent calls scale once', async () => {
    const ref = { namespace: g, name: 'plain' };
    await createCapiObject(mg.custom, capiCluster(ref.name, g, { topology: false }));
    await createCapiObject(mg.custom, capiMachineDeployment('plain-md-0', g, { cluster: 'plain', replicas: 2 }));
    const entry = { machineDeployment: 'plain-md-0', originalReplicas: 2, reservedReplicas: 4 };

    // The record was written, then the worker died before scaling the MachineDeployment.
    await patchCapiObject(mg.custom, 'Cluster', g, 'plain', {
      metadata: {
        annotations: { [RESERVED_CAPACITY_ANNOTATION]: JSON.stringify([{ ...entry, scaledIn: 'machineDeployment' }]) },
      },
    });
    expect(await mdReplicas('plain-md-0')).toBe(2);
    expect(await activities.reserveCapacity({ cluster: ref, count: 2 })).toEqual([entry]);
    expect(await mdReplicas('plain-md-0')).toBe(4);
    expect(await activities.reserveCapacity({ cluster: ref, count: 2 })).toEqual([entry]);
    expect(await mdReplicas('plain-md-0')).toBe(4);
    expect(await activities.releaseCapacity({ cluster: ref })).toEqual([entry]);
    expect(await mdReplicas('plain-md-0')).toBe(2);

    // Two activity attempts racing (e.g. a retry after a lost heartbeat): one reservation.
    const [a, b] = await Promise.all([
      activities.reserveCapacity({ cluster: ref, count: 2 }),
      activities.reserveCapacity({ cluster: ref, count: 2 }),
    ]);
    expect(a).toEqual([entry]);
    expect(b).toEqual([entry]);
    expect(await mdReplicas('plain-md-0')).toBe(4);
    await Promise.all([activities.releaseCapacity({ cluster: ref }), activities.releaseCapacity({ cluster: ref })]);
    expect(await mdReplicas('plain-md-0')).toBe(2);
    expect(await annotation('plain')).toBeUndefined();
  });

  it('fails non-retryably for a missing Cluster or a bad count; releasing a missing Cluster is a no-op', async () => {
    const missing = { namespace: g, name: 'absent' };
    const err = await activities.reserveCapacity({ cluster: missing, count: 1 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApplicationFailure);
    expect(err).toMatchObject({
      nonRetryable: true,
      type: 'ClusterNotFound',
      message: `Cluster ${g}/absent not found`,
    });
    expect(await activities.releaseCapacity({ cluster: missing })).toEqual([]);
    await expect(
      activities.reserveCapacity({ cluster: { namespace: g, name: 'topo' }, count: 0 }),
    ).rejects.toMatchObject({
      nonRetryable: true,
      type: 'InvalidCapacityCount',
    });
  });
});

// ---- reserved capacity readiness ----------------------------------------------------

/** Writes a MachineDeployment's status.readyReplicas through the status subresource (CAPI's controller would). */
async function setReadyReplicas(name: string, readyReplicas: number): Promise<void> {
  await mg.custom.patchNamespacedCustomObjectStatus(
    {
      group: 'cluster.x-k8s.io',
      version: 'v1beta2',
      namespace: g,
      plural: 'machinedeployments',
      name,
      body: { status: { readyReplicas } },
    },
    mergePatch,
  );
}

describe('checkReservedCapacity', () => {
  it('is ready when nothing is reserved', async () => {
    const ref = { namespace: g, name: 'noreserve' };
    await createCapiObject(mg.custom, capiCluster(ref.name, g, { topology: false }));
    await createCapiObject(mg.custom, {
      ...capiMachineDeployment('noreserve-md-0', g, { cluster: ref.name, replicas: 2 }),
      status: { readyReplicas: 0 },
    });
    expect(await activities.checkReservedCapacity({ cluster: ref })).toEqual({ ready: true, pending: [] });
  });

  it('waits until every reserved MachineDeployment has its reserved replicas Ready', async () => {
    const ref = { namespace: g, name: 'cap' };
    await createCapiObject(
      mg.custom,
      capiCluster(ref.name, g, { machineDeployments: [{ name: 'md-0', replicas: 2 }] }),
    );
    await Promise.all([
      createCapiObject(mg.custom, {
        ...capiMachineDeployment('cap-md-0-q7x', g, { cluster: ref.name, replicas: 2, topologyName: 'md-0' }),
        status: { readyReplicas: 2 },
      }),
      createCapiObject(mg.custom, {
        ...capiMachineDeployment('cap-extra', g, { cluster: ref.name, replicas: 1 }),
        status: { readyReplicas: 1 },
      }),
      // Another cluster's topology MachineDeployment of the same name: not this cluster's capacity.
      createCapiObject(mg.custom, {
        ...capiMachineDeployment('capother-md-0-z9z', g, { cluster: 'capother', replicas: 9, topologyName: 'md-0' }),
        status: { readyReplicas: 9 },
      }),
    ]);
    expect(await activities.reserveCapacity({ cluster: ref, count: 1 })).toEqual([
      { machineDeployment: 'cap-extra', originalReplicas: 1, reservedReplicas: 2 },
      { machineDeployment: 'md-0', originalReplicas: 2, reservedReplicas: 3 },
    ]);

    const notReady = {
      ready: false,
      pending: [
        'MachineDeployment cap-extra: 1 of 2 machines Ready',
        'MachineDeployment cap-md-0-q7x: 2 of 3 machines Ready',
      ],
    };
    expect(await activities.checkReservedCapacity({ cluster: ref })).toEqual(notReady);
    expect(await activities.checkReservedCapacity({ cluster: ref })).toEqual(notReady);

    await setReadyReplicas('cap-md-0-q7x', 3);
    expect(await activities.checkReservedCapacity({ cluster: ref })).toEqual({
      ready: false,
      pending: ['MachineDeployment cap-extra: 1 of 2 machines Ready'],
    });
    await setReadyReplicas('cap-extra', 2);
    expect(await activities.checkReservedCapacity({ cluster: ref })).toEqual({ ready: true, pending: [] });

    await activities.releaseCapacity({ cluster: ref });
    expect(await activities.checkReservedCapacity({ cluster: ref })).toEqual({ ready: true, pending: [] });
  });

  it('reports a recorded MachineDeployment that no longer exists', async () => {
    const ref = { namespace: g, name: 'capgone' };
    await createCapiObject(mg.custom, capiCluster(ref.name, g, { topology: false }));
    await patchCapiObject(mg.custom, 'Cluster', g, ref.name, {
      metadata: {
        annotations: {
          [RESERVED_CAPACITY_ANNOTATION]: JSON.stringify([
            {
              machineDeployment: 'capgone-md-0',
              originalReplicas: 1,
              reservedReplicas: 2,
              scaledIn: 'machineDeployment',
            },
            { machineDeployment: 'md-9', originalReplicas: 1, reservedReplicas: 2, scaledIn: 'topology' },
          ]),
        },
      },
    });
    expect(await activities.checkReservedCapacity({ cluster: ref })).toEqual({
      ready: false,
      pending: ['MachineDeployment capgone-md-0: not found', 'MachineDeployment md-9: not found'],
    });
  });
});

// ---- stable failure messages ------------------------------------------------------------

/** A loopback port nothing listens on: bound by a server, then closed again. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no TCP port');
  return address.port;
}

/** The `<cluster>-kubeconfig` Secret, pointing wherever the test says. */
async function kubeconfigSecret(cluster: string, server: string, token: string): Promise<void> {
  await rawKubeconfigSecret(cluster, workloadKubeconfigYaml(server, { token }));
}

async function rawKubeconfigSecret(cluster: string, kubeconfig: string): Promise<void> {
  await mg.core.createNamespacedSecret({
    namespace: g,
    body: {
      metadata: { name: `${cluster}-kubeconfig`, namespace: g },
      data: { value: Buffer.from(kubeconfig).toString('base64') },
    },
  });
}

describe('failure messages (withStableFailures)', () => {
  const stable = withStableFailures(activities);
  const probe = (name: string) =>
    stable.checkClusterHealth({
      cluster: { namespace: g, name },
      scope: 'pre',
      criticalNamespaces: [],
      blockingPdbPolicy: 'fail',
    });

  it('an unreachable workload cluster: retryable, names the address, no HTTP details', async () => {
    const port = await closedPort();
    await kubeconfigSecret('unreachable', `https://127.0.0.1:${port}`, 'irrelevant');
    const err = await probe('unreachable').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApplicationFailure);
    expect(err).toMatchObject({
      message: expect.stringMatching(/cannot reach the Kubernetes API/),
      type: KUBERNETES_API_UNREACHABLE,
      nonRetryable: false,
    });
    const message = (err as ApplicationFailure).message;
    expect(message).toBe(`cannot reach the Kubernetes API at 127.0.0.1:${port}: ECONNREFUSED`);
    expect(message).not.toContain('Date');
    // Deterministic: the same cause gives the same text.
    expect(await probe('unreachable').catch((e: unknown) => (e as Error).message)).toBe(message);
  });

  it('a kubeconfig is data, never code: an exec plugin is refused naming the field, and never runs', async () => {
    // This command used to run inside the worker within 2 s of BeforeClusterUpgrade.
    const dir = mkdtempSync(join(tmpdir(), 'kubeconfig-exec-'));
    const marker = join(dir, 'ran');
    try {
      const exec = {
        apiVersion: 'client.authentication.k8s.io/v1',
        command: 'sh',
        args: ['-c', `touch ${marker}`],
        interactiveMode: 'Never',
      };
      await rawKubeconfigSecret('execs', workloadKubeconfigYaml(testbed().workloadServer, { exec }));
      // checkClusterHealth is the first activity of an upgrade that reads the kubeconfig (the pre-upgrade check).
      const err = await probe('execs').catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ApplicationFailure);
      expect(err).toMatchObject({
        type: WORKLOAD_KUBECONFIG_REFUSED,
        nonRetryable: true,
        message:
          `Secret ${g}/execs-kubeconfig: users[0].user.exec is refused (runs a credential plugin command); ` +
          'a workload kubeconfig may hold only a server URL, CA data, client certificate/key data or a bearer token',
      });
      expect((err as Error).message).not.toContain(marker);
      expect(existsSync(marker)).toBe(false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a refused request: the status, without the response headers the raw error carries', async () => {
    await kubeconfigSecret('badtoken', testbed().workloadServer, 'not-a-valid-token');
    const raw = await activities
      .checkClusterHealth({
        cluster: { namespace: g, name: 'badtoken' },
        scope: 'pre',
        criticalNamespaces: [],
        blockingPdbPolicy: 'fail',
      })
      .catch((e: unknown) => e);
    // What used to reach the condition: the whole response, its Date header included.
    expect(String((raw as Error).message)).toMatch(/date/i);
    const err = await probe('badtoken').catch((e: unknown) => e);
    expect(err).toMatchObject({
      message: 'Kubernetes API answered HTTP 401 Unauthorized',
      type: 'KubernetesApi401',
      nonRetryable: true,
    });
  });
});

describe('recordClusterEvent', () => {
  it('records an Event on the Cluster that kubectl describe finds, once per key, and nothing for a Cluster that is gone', async () => {
    const input = {
      cluster,
      reason: 'UpgradeAborted' as const,
      type: 'Warning' as const,
      message: `upgrade to v1.33.0 aborted: change freeze; signal "resume" to continue`,
      key: `cluster-upgrade/${g}/prod/uid/run-1/7`,
    };
    await activities.recordClusterEvent(input);
    await activities.recordClusterEvent(input); // a retried activity
    const events = await eventsOf(mg, 'Cluster', g, cluster.name);
    expect(events.map((e) => [e.type, e.reason, e.message, e.count, e.involvedObject.apiVersion])).toEqual([
      ['Warning', 'UpgradeAborted', input.message, 1, 'cluster.x-k8s.io/v1beta2'],
    ]);
    await activities.recordClusterEvent({ ...input, cluster: { namespace: g, name: 'gone' }, key: 'other' });
    const none = await mg.core.listNamespacedEvent({ namespace: g, fieldSelector: 'involvedObject.name=gone' });
    expect(none.items).toEqual([]);
  });
});

describe('recordClusterEvent with a notification webhook', () => {
  it('writes the Event and posts the CloudEvent side by side; a webhook that is down holds nothing back', async () => {
    const bodies: string[] = [];
    const server = createHttpServer((req, res) => {
      let data = '';
      req.on('data', (c: Buffer) => (data += c.toString()));
      req.on('end', () => {
        bodies.push(data);
        res.writeHead(200).end();
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
      const notifying = createUpgradeActivities({
        management: managementKubeConfig(testbed().workerKubeconfig),
        notifications: { url },
      });
      const key = `cluster-upgrade/${g}/prod/uid/run-2/1`;
      await notifying.recordClusterEvent({
        cluster,
        reason: 'UpgradeStarted',
        type: 'Normal',
        message: 'upgrade to v1.33.0 started',
        key,
      });
      expect(bodies.map((b) => JSON.parse(b) as { id: string; type: string })).toEqual([
        expect.objectContaining({ id: key, type: 'io.capi-orchestrator.upgrade.started' }),
      ]);
      const events = await mg.core.listNamespacedEvent({ namespace: g, fieldSelector: 'reason=UpgradeStarted' });
      expect(events.items.map((e) => e.message)).toEqual(['upgrade to v1.33.0 started']);

      // Nothing listening: the Event is still written; the activity neither throws nor waits for long.
      const down = createUpgradeActivities({
        management: managementKubeConfig(testbed().workerKubeconfig),
        notifications: { url: 'http://127.0.0.1:9/', attempts: 2, backoffMs: 10 },
      });
      await down.recordClusterEvent({
        cluster,
        reason: 'UpgradeCompleted',
        type: 'Normal',
        message: 'upgraded to v1.33.0',
        key: `${key}-done`,
      });
      const done = await mg.core.listNamespacedEvent({ namespace: g, fieldSelector: 'reason=UpgradeCompleted' });
      expect(done.items).toHaveLength(1);
    } finally {
      await new Promise<void>((r) => server.close(() => r()));
    }
  });
});
