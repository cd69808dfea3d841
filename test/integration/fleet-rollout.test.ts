// A fleet rollout over Cluster objects in the test bed: the real fleet
// activities select them by label and move spec.topology.version (as the
// worker's ServiceAccount), the real cluster-upgrade workflows follow each
// upgrade, and the test plays Cluster API: when a Cluster's version changes it
// calls the upgrade hooks with that Cluster, as CAPI's topology controller would.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Client } from '@temporalio/client';
import type { NativeConnection, Worker } from '@temporalio/worker';
import { createFleetActivities } from '../../src/activities/fleet.ts';
import { managementKubeConfig } from '../../src/activities/kube.ts';
import { createClusterUpgradeHandlers } from '../../src/api/cluster-upgrades.ts';
import { requestChecksOff } from '../../src/api/request-checks.ts';
import { defaultHandlerName, HOOKS_API_VERSION, type HookName } from '../../src/api/contract.ts';
import { hookPath } from '../../src/api/hook-route.ts';
import {
  FLEET_ROLLOUT_ANNOTATION,
  fleetRolloutWorkflowId,
  type FleetRolloutInput,
  type FleetRolloutStatus,
} from '../../src/model/fleet-rollout.ts';
import { callHook } from '../../support/capi-client.ts';
import {
  capiCluster,
  createCapiObject,
  createNamespace,
  eventsOf,
  getCapiObject,
  jsonPatch,
  managementApi,
  testbed,
  testGroup,
} from '../../support/testbed-fixtures.ts';
import { startTestHookServer, type TestHookServer } from '../support/hook-server.ts';
import { createTestWorker, testClient, uniqueTaskQueue } from '../support/temporal.ts';
import { healthy, steps, stubUpgradeActivities } from '../support/upgrade-harness.ts';
import { waitFor } from '../support/wait.ts';

const group = testGroup('fr');
const g = group.name;
const mg = managementApi();
const FROM = 'v1.32.4';
const TARGET = 'v1.33.0';
const SELECTOR = `fleet=${g}`;

interface ClusterObject {
  metadata: { name: string; namespace: string; uid: string; annotations?: Record<string, string> };
  spec: { topology: { version: string } };
}

async function createCluster(name: string, version: string, labelled = true): Promise<void> {
  const obj = capiCluster(name, g, { version });
  if (labelled) obj.metadata.labels = { ...obj.metadata.labels, fleet: g };
  await createCapiObject(mg.custom, obj);
}
const readCluster = async (name: string) =>
  (await getCapiObject(mg.custom, 'Cluster', g, name)) as unknown as ClusterObject;

describe('a fleet rollout over Clusters in the test bed', () => {
  let client: Client;
  let closeClient: () => Promise<void>;
  let hooks: TestHookServer;
  let worker: { worker: Worker; connection: NativeConnection; done: Promise<void> };
  const taskQueue = uniqueTaskQueue('fleet');
  const driven = new Map<string, Promise<void>>();
  let playing = true;
  let player: Promise<void>;

  /** One hook call with the Cluster as it is now, as CAPI sends it. */
  const call = async (name: string, hook: HookName, fields: Record<string, unknown>) => {
    const cluster = await readCluster(name);
    const res = await callHook<{ status: string; message?: string; retryAfterSeconds: number }>(
      hooks.url,
      hookPath(hook, defaultHandlerName(hook)),
      { apiVersion: HOOKS_API_VERSION, kind: `${hook}Request`, cluster, ...fields },
      { ca: hooks.ca.certPem, timeout: '10s' },
    );
    return res.body;
  };
  const untilOpen = async (name: string, hook: HookName, fields: Record<string, unknown>) => {
    const answer = await waitFor(
      () => call(name, hook, fields),
      (a) => a.status === 'Failure' || a.retryAfterSeconds === 0,
      60_000,
    );
    expect(answer).toMatchObject({ status: 'Success', retryAfterSeconds: 0 });
  };
  /** The upgrade one Cluster goes through once its version changed: every hook in CAPI's order. */
  const upgrade = async (name: string) => {
    const lists = { controlPlaneUpgrades: steps(TARGET), workersUpgrades: steps(TARGET) };
    await untilOpen(name, 'BeforeClusterUpgrade', {
      fromKubernetesVersion: FROM,
      toKubernetesVersion: TARGET,
      ...lists,
    });
    await untilOpen(name, 'BeforeControlPlaneUpgrade', {
      fromKubernetesVersion: FROM,
      toKubernetesVersion: TARGET,
      ...lists,
    });
    await untilOpen(name, 'AfterControlPlaneUpgrade', { kubernetesVersion: TARGET, workersUpgrades: steps(TARGET) });
    await untilOpen(name, 'BeforeWorkersUpgrade', { fromKubernetesVersion: FROM, toKubernetesVersion: TARGET });
    await untilOpen(name, 'AfterWorkersUpgrade', { kubernetesVersion: TARGET });
    await untilOpen(name, 'AfterClusterUpgrade', { kubernetesVersion: TARGET });
  };

  beforeAll(async () => {
    await createNamespace(mg.core, g);
    await Promise.all([
      createCluster('a', FROM),
      createCluster('b', FROM),
      createCluster('c', FROM),
      createCluster('d', TARGET),
      createCluster('not-selected', FROM, false),
    ]);
    ({ client, close: closeClient } = await testClient());
    hooks = await startTestHookServer({
      lifecycle: createClusterUpgradeHandlers({ client, taskQueue, checks: requestChecksOff }),
    });
    const fleet = createFleetActivities({
      management: managementKubeConfig(testbed().workerKubeconfig),
      temporal: () => client,
      checkClusterHealth: async () => healthy(),
    });
    const created = await createTestWorker({ taskQueue, activities: { ...stubUpgradeActivities(), ...fleet } });
    worker = { ...created, done: created.worker.run() };
    // Cluster API, played: a Cluster whose version moved to the target gets upgraded through the hooks.
    player = (async () => {
      while (playing) {
        for (const name of ['a', 'b', 'c', 'd']) {
          if (driven.has(name) || (await readCluster(name)).spec.topology.version !== TARGET || name === 'd') continue;
          driven.set(name, upgrade(name));
        }
        await new Promise((r) => setTimeout(r, 300));
      }
    })();
  }, 120_000);

  afterAll(async () => {
    playing = false;
    await player;
    await hooks?.close();
    worker?.worker.shutdown();
    await worker?.done;
    await worker?.connection.close();
    await closeClient?.();
    await mg.core.deleteNamespace({ name: g }).catch(() => undefined);
  });

  it('upgrades the selected clusters in waves, skips the one at the target and the one someone else moved', async () => {
    const input: FleetRolloutInput = {
      name: g,
      selector: { labelSelector: SELECTOR, namespaces: [g] },
      targetVersion: TARGET,
      waves: ['1', '100%'],
      soak: '1s',
      maxConcurrent: 2,
      failureBudget: 0,
      approveBefore: [2],
    };
    const handle = await client.workflow.start('fleetRolloutWorkflow', {
      workflowId: fleetRolloutWorkflowId(g),
      taskQueue,
      args: [input],
    });
    // Wave 1 (the canary, `a`) runs alone; wave 2 waits for approval.
    const waiting = await waitFor(
      () => handle.query<FleetRolloutStatus>('status'),
      (s) => s.phase === 'WaitingForApproval',
      90_000,
    );
    expect(waiting.message).toBe('waiting for approval of wave 2 (signal approve with {"wave":2})');
    expect(waiting.clusters.map((c) => [c.name, c.wave, c.state])).toEqual([
      ['a', 1, 'done'],
      ['b', 2, 'pending'],
      ['c', 2, 'pending'],
      ['d', undefined, 'skipped'],
    ]);
    expect((await readCluster('b')).spec.topology.version).toBe(FROM);
    // Someone moves `c` meanwhile: the rollout must not overwrite it.
    await mg.custom.patchNamespacedCustomObject(
      {
        group: 'cluster.x-k8s.io',
        version: 'v1beta2',
        plural: 'clusters',
        namespace: g,
        name: 'c',
        body: [{ op: 'replace', path: '/spec/topology/version', value: 'v1.32.9' }],
      },
      jsonPatch,
    );
    await handle.signal('approve', { wave: 2, by: 'alice' });
    const result = (await handle.result()) as FleetRolloutStatus;
    expect(result).toMatchObject({ phase: 'Completed', message: 'completed: 2 upgraded, 2 skipped, 0 failed' });
    expect(result.waves[1]?.approvedBeforeBy).toBe('alice');
    expect(result.clusters.find((c) => c.name === 'c')).toMatchObject({
      state: 'skipped',
      reason: 'version changed by someone else to v1.32.9 since it was selected',
    });
    expect(result.clusters.find((c) => c.name === 'd')).toMatchObject({ reason: 'already at v1.33.0' });

    // On the Clusters: the version, the rollout's annotation and one Event each; nothing else touched.
    for (const name of ['a', 'b']) {
      const c = await readCluster(name);
      expect(c.spec.topology.version).toBe(TARGET);
      expect(c.metadata.annotations?.[FLEET_ROLLOUT_ANNOTATION]).toBe(g);
      const events = (await eventsOf(mg, 'Cluster', g, name)).filter((e) => e.reason === 'FleetRolloutVersionSet');
      expect(events.map((e) => e.message)).toEqual([
        `fleet rollout ${g} set spec.topology.version ${FROM} → ${TARGET}`,
      ]);
    }
    expect((await readCluster('c')).spec.topology.version).toBe('v1.32.9');
    expect((await readCluster('not-selected')).spec.topology.version).toBe(FROM);
    await Promise.all(driven.values());

    // Findable by the rollout's name: the rollout and the cluster upgrades it started.
    const tagged = await waitFor(
      async () => {
        const ids: string[] = [];
        for await (const wf of client.workflow.list({ query: `CapiFleetRollout = ${JSON.stringify(g)}` }))
          ids.push(wf.workflowId);
        return ids.sort();
      },
      (ids) => ids.length >= 3,
    );
    const [a, b] = await Promise.all([readCluster('a'), readCluster('b')]);
    expect(tagged).toEqual(
      [
        fleetRolloutWorkflowId(g),
        `cluster-upgrade/${g}/a/${a.metadata.uid}`,
        `cluster-upgrade/${g}/b/${b.metadata.uid}`,
      ].sort(),
    );
  });
});
