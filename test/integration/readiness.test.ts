// The readiness check against the test bed with nothing stubbed: the real worker (the extension's
// least-privilege identities) runs the readiness workflow over a Cluster API Cluster whose workload
// has a Deployment of 2 on one worker under a PDB of minAvailable 2. The drain check is Blocked
// naming the PDB and its pods; relaxing the PDB makes it Ready; and the run changes nothing: every
// object keeps its resourceVersion, no node is cordoned, no pod evicted, and the API servers' audit
// logs hold no write by the extension to the test's objects. The other gates' checks read with
// them: a capacity reservation of 1 over a MachineDeployment with no Ready machine (Blocked, nothing
// scaled), the delegate executor's node agents (none: in place would be declined) and no alert gate.
// A fleet rollout's look at its next wave runs the same run through the worker's Temporal port.
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Client } from '@temporalio/client';
import { MockActivityEnvironment } from '@temporalio/testing';
import { createFleetActivities } from '../../src/activities/fleet.ts';
import type { ClusterReadinessFinding } from '../../src/activities/fleet-types.ts';
import { READINESS_CHECKS, type ReadinessReport } from '../../src/domain/readiness.ts';
import { readinessWorkflowId, type ReadinessInput } from '../../src/model/readiness.ts';
import { workflowTypes } from '../../src/model/workflow-types.ts';
import { managementKubeConfig } from '../../src/platform/kube/clients.ts';
import { workflowPort } from '../../src/platform/temporal/workflows.ts';
import {
  capiCluster,
  capiMachine,
  capiMachineDeployment,
  createCapiObject,
  createKubeconfigSecret,
  createNamespace,
  createNodes,
  createWorkloadNamespace,
  deleteGroup,
  deployment,
  kwokNode,
  managementApi,
  mergePatch,
  podDisruptionBudget,
  sleep,
  testbed,
  testGroup,
  waitFor,
  waitForRunningPods,
  workloadApi,
} from '../../support/testbed-fixtures.ts';
import { capiUpgrades } from '../support/cli.ts';
import { testClient, uniqueTaskQueue } from '../support/temporal.ts';
import { startTestbedWorker, type TestbedWorker } from '../support/testbed-worker.ts';

const group = testGroup('rd');
const g = group.name;
const wl = workloadApi();
const mg = managementApi();
const cluster = { namespace: g, name: 'shop' };
const cp = `${g}-cp-1`;
const worker = `${g}-w-1`;
const VERSION = 'v1.31.14';
const P = 'upgrades.capi-orchestrator.io/';

let client: Client;
let closeClient: () => Promise<void>;
let tb: TestbedWorker;
const taskQueue = uniqueTaskQueue('readiness');

beforeAll(async () => {
  ({ client, close: closeClient } = await testClient());
  tb = await startTestbedWorker(taskQueue);
  await Promise.all([createWorkloadNamespace(wl, g), createNamespace(mg.core, g)]);
  await createKubeconfigSecret(mg.core, g, cluster.name);
  const shop = capiCluster(cluster.name, g, { version: VERSION });
  // The health check's critical namespace is the test's own (the shared test bed's kube-system is not ours).
  shop.metadata.annotations = { [`${P}critical-namespaces`]: g, [`${P}capacity-reservation`]: '1' };
  await Promise.all([
    createNodes(wl.core, [
      kwokNode(group, cp, { role: 'control-plane', kubeletVersion: VERSION }),
      kwokNode(group, worker, { kubeletVersion: VERSION }),
    ]),
    createCapiObject(mg.custom, shop),
    createCapiObject(mg.custom, capiMachine(cp, g, { cluster: cluster.name, controlPlane: true, nodeName: cp })),
    createCapiObject(mg.custom, capiMachine(worker, g, { cluster: cluster.name, nodeName: worker })),
    // No controller runs here: it never has a Ready machine, so a reservation would wait on it.
    createCapiObject(mg.custom, capiMachineDeployment(`${g}-md`, g, { cluster: cluster.name, replicas: 1 })),
    wl.apps.createNamespacedDeployment({
      namespace: g,
      body: deployment(group, 'web', { replicas: 2, nodeName: worker }),
    }),
    wl.policy.createNamespacedPodDisruptionBudget({
      namespace: g,
      body: podDisruptionBudget(group, 'web', { app: 'web' }, { minAvailable: 2 }),
    }),
  ]);
  await waitForRunningPods(wl.core, g, 'app=web', 2);
  await settledPdb(0);
});

afterAll(async () => {
  await tb?.stop();
  await closeClient?.();
  await deleteGroup(wl, group);
  await mg.core.deleteNamespace({ name: g }).catch(() => undefined);
});

/** Waits until the disruption controller has counted both pods and allows `allowed` disruptions. */
async function settledPdb(allowed: number): Promise<void> {
  await waitFor(
    `PDB ${g}/web counting 2 healthy pods and allowing ${allowed} disruptions`,
    async () => {
      const p = await wl.policy.readNamespacedPodDisruptionBudget({ namespace: g, name: 'web' });
      return (
        p.status?.observedGeneration === p.metadata?.generation &&
        p.status?.currentHealthy === 2 &&
        p.status?.disruptionsAllowed === allowed
      );
    },
    { timeoutMs: 30_000 },
  );
}

let runs = 0;
async function readiness(): Promise<ReadinessReport> {
  const input: ReadinessInput = { cluster, targetVersion: 'v1.32.4', settings: { nodeUpgradeExecutor: 'delegate' } };
  return (await client.workflow.execute(workflowTypes.readiness, {
    taskQueue,
    workflowId: `${readinessWorkflowId(cluster, input.targetVersion)}/${taskQueue}/${++runs}`,
    args: [input],
  })) as ReadinessReport;
}

/** `kind/namespace/name` → resourceVersion of every object the test made (nodes: their cordon and taints). */
async function snapshot(): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const add = (
    kind: string,
    items: { metadata?: { namespace?: string; name?: string; resourceVersion?: string } }[],
  ) => {
    for (const o of items)
      out[`${kind}/${o.metadata?.namespace ?? ''}/${o.metadata?.name ?? ''}`] = o.metadata?.resourceVersion ?? '';
  };
  const [pods, deployments, replicaSets, pdbs, secrets] = await Promise.all([
    wl.core.listNamespacedPod({ namespace: g }),
    wl.apps.listNamespacedDeployment({ namespace: g }),
    wl.apps.listNamespacedReplicaSet({ namespace: g }),
    wl.policy.listNamespacedPodDisruptionBudget({ namespace: g }),
    mg.core.listNamespacedSecret({ namespace: g }),
  ]);
  add('Pod', pods.items);
  add('Deployment', deployments.items);
  add('ReplicaSet', replicaSets.items);
  add('PodDisruptionBudget', pdbs.items);
  add('Secret', secrets.items);
  for (const plural of ['clusters', 'machines', 'machinedeployments']) {
    const list = (await mg.custom.listNamespacedCustomObject({
      group: 'cluster.x-k8s.io',
      version: 'v1beta2',
      namespace: g,
      plural,
    })) as { items: { metadata?: { namespace?: string; name?: string; resourceVersion?: string } }[] };
    add(plural, list.items);
  }
  // KWOK renews node status on its own: a node's resourceVersion moves without us; its spec must not.
  for (const name of [cp, worker]) {
    const node = await wl.core.readNode({ name });
    out[`Node//${name}`] = JSON.stringify({
      unschedulable: node.spec?.unschedulable ?? false,
      taints: node.spec?.taints,
    });
  }
  return out;
}

interface AuditEvent {
  verb: string;
  requestReceivedTimestamp: string;
  objectRef?: { resource?: string; subresource?: string; namespace?: string; name?: string };
}

/** The requests the extension's identities made about this test's objects since `since` (both API servers). */
function requestsSince(since: number): string[] {
  const events: AuditEvent[] = [];
  for (const path of [testbed().managementAuditLog, testbed().workloadAuditLog]) {
    for (const line of readFileSync(path, 'utf8').split('\n')) {
      try {
        if (line.trim()) events.push(JSON.parse(line) as AuditEvent);
      } catch {
        // a line being written
      }
    }
  }
  const ours = (r: AuditEvent['objectRef']) => r?.namespace === g || r?.name === cp || r?.name === worker;
  return events
    .filter((e) => Date.parse(e.requestReceivedTimestamp) >= since && ours(e.objectRef))
    .map(
      (e) =>
        `${e.verb} ${e.objectRef?.resource ?? ''}${e.objectRef?.subresource ? `/${e.objectRef.subresource}` : ''} ${e.objectRef?.namespace ?? ''}/${e.objectRef?.name ?? ''}`,
    );
}

const READS = /^(get|list|watch) /;

describe('readiness on the test bed', () => {
  it('reports a PDB whose minAvailable equals the replicas on a node as Blocked, naming it and its pods, and writes nothing', async () => {
    const pods = (await wl.core.listNamespacedPod({ namespace: g, labelSelector: 'app=web' })).items
      .map((p) => `${g}/${p.metadata?.name ?? ''}`)
      .sort();
    const before = await snapshot();
    const since = Date.now() - 1_000;

    const report = await readiness();
    const drain = report.checks.find((c) => c.check === 'drain');
    expect(drain).toEqual({
      check: 'drain',
      verdict: 'Blocked',
      message: `node ${worker}: PodDisruptionBudget ${g}/web (disruptionsAllowed 0: minAvailable 2 with 2 healthy) covers ${pods.join(', ')} (relax the budget's minAvailable or add replicas on other nodes; label pods the drain may leave cluster.x-k8s.io/drain=skip)`,
    });
    expect(report.verdict).toBe('Blocked');
    expect(report.fromVersion).toBe(VERSION);
    expect(report.checks.map((c) => c.check)).toEqual([...READINESS_CHECKS]);
    expect(report.checks.find((c) => c.check === 'version-skew')?.verdict).toBe('Ready');
    expect(report.checks.find((c) => c.check === 'calendar')?.message).toBe(
      'can start now: no upgradeAt ahead, the maintenance calendar is open',
    );
    const gate = (name: string) => report.checks.find((c) => c.check === name);
    expect(gate('capacity')).toEqual({
      check: 'capacity',
      verdict: 'Blocked',
      message: `would reserve ${g}-md 1→2, and waits for every machine Ready: MachineDeployment ${g}-md: 0 of 1 machines Ready (fix or replace the machines that are not Ready)`,
    });
    expect(gate('in-place')).toEqual({
      check: 'in-place',
      verdict: 'Ready',
      message: `warns: no node agent serves node ${cp} (no fresh Lease kube-system/node-upgrade-agent-${cp}); no node agent serves node ${worker} (no fresh Lease kube-system/node-upgrade-agent-${worker}): Cluster API rolls those machines out instead (start the node agent on those nodes to update them in place)`,
    });
    expect(gate('alerts')).toEqual({
      check: 'alerts',
      verdict: 'Ready',
      message: 'no alert gate configured (alertPrometheusUrl is not set)',
    });

    // Nothing changed: the same objects at the same resourceVersions, nodes uncordoned, no pod evicted.
    expect(await snapshot()).toEqual(before);
    // The audit log is written after each response: wait until it holds the run's reads, then look for writes.
    const requests = await waitFor(
      'the readiness run in the audit log',
      async () => {
        const seen = requestsSince(since);
        return seen.includes(`get clusters ${g}/${cluster.name}`) && seen.includes(`list machines ${g}/`) && seen;
      },
      { timeoutMs: 10_000 },
    );
    await sleep(1_000);
    expect(requestsSince(since).filter((r) => !READS.test(r))).toEqual([]);
    expect(requests.length).toBeGreaterThan(0);
  });

  it("a fleet rollout's look at its next wave runs the same readiness run and names what holds the cluster", async () => {
    const fleet = createFleetActivities({
      management: managementKubeConfig(testbed().workerKubeconfig),
      checkClusterHealth: () => Promise.reject(new Error('the look asks readiness, not health')),
      temporal: workflowPort(client),
    });
    // The activity runs on the worker's task queue: its readiness runs go there too.
    const env = new MockActivityEnvironment({ taskQueue });
    const found: ClusterReadinessFinding[] = await env.run(fleet.checkClustersReadiness, {
      clusters: [{ ...cluster, uid: 'uid-shop', version: VERSION }],
      version: 'v1.32.4',
    });
    expect(found).toEqual([{ uid: 'uid-shop', verdict: 'Blocked', finding: expect.any(String) }]);
    expect(found[0]?.finding).toContain(`capacity: would reserve ${g}-md 1→2`);
    expect(found[0]?.finding).toContain(`drain: node ${worker}: PodDisruptionBudget ${g}/web (disruptionsAllowed 0`);
    // The run is the one `capi-upgrades readiness` starts: in the Web UI under its own id.
    const run = await client.workflow.getHandle(readinessWorkflowId(cluster, 'v1.32.4')).describe();
    expect(run.status.name).toBe('COMPLETED');
  });

  it('turns Ready once the PDB lets one pod go at a time', async () => {
    await wl.policy.patchNamespacedPodDisruptionBudget(
      { namespace: g, name: 'web', body: { spec: { minAvailable: 1 } } },
      mergePatch,
    );
    await settledPdb(1);
    const report = await readiness();
    expect(report.checks.find((c) => c.check === 'drain')).toEqual({
      check: 'drain',
      verdict: 'Ready',
      message: '2 nodes drain: 2 pods to evict, 0 skipped, none blocking',
    });
  });

  it('capi-upgrades readiness --all --namespace lists the Clusters and ranks them, Blocked first', async () => {
    // A second Cluster whose workload cannot be read (no kubeconfig Secret): Unknown.
    await createCapiObject(mg.custom, capiCluster('bare', g, { version: VERSION }));
    const out = await capiUpgrades(
      ['readiness', '--all', '--namespace', g, '--to', 'v1.32.4', '--setting', 'nodeUpgradeExecutor=delegate'],
      { TEMPORAL_TASK_QUEUE: taskQueue, MANAGEMENT_KUBECONFIG: testbed().managementKubeconfig },
    );
    expect(out.stderr).toBe('');
    expect(out.code).toBe(1);
    const lines = out.stdout.trimEnd().split('\n');
    expect(lines[0]).toBe('2 clusters: 1 Blocked, 1 Unknown, 0 Ready');
    expect(lines[3]).toMatch(
      new RegExp(`^${g}/shop\\s+Blocked\\s+v1\\.31\\.14 → v1\\.32\\.4\\s+capacity\\s+would reserve ${g}-md 1→2`),
    );
    expect(lines[4]).toMatch(new RegExp(`^${g}/bare\\s+Unknown\\s`));
    expect(lines).toHaveLength(5);
  });
});
