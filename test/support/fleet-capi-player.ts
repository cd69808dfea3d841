// Fleet rollouts over Cluster objects in the test bed (integration tier): the real
// fleet activities select Clusters and move spec.topology.version (as the worker's
// ServiceAccount), the real cluster-upgrade workflows run behind the real hook
// server, and Cluster API is played: when a played Cluster's version reaches the
// target, the player calls the upgrade hooks with that Cluster, in CAPI's order,
// as CAPI's topology controller would.
import { expect } from '@jest/globals';
import type { Client, WorkflowHandle } from '@temporalio/client';
import { createFleetActivities } from '../../src/activities/fleet.ts';
import { managementKubeConfig } from '../../src/platform/kube/clients.ts';
import { workflowPort } from '../../src/platform/temporal/workflows.ts';
import { createClusterUpgradeHandlers } from '../../src/api/handlers/lifecycle/cluster-upgrades.ts';
import { defaultHandlerName, HOOKS_API_VERSION, type HookName } from '../../src/api/hooks/contract.ts';
import { hookPath } from '../../src/api/hooks/hook-route.ts';
import { requestChecksOff } from '../../src/api/handlers/request-checks.ts';
import { fleetRolloutWorkflowId, type FleetRolloutInput } from '../../src/model/fleet-rollout.ts';
import { callHook } from '../../support/capi-client.ts';
import {
  createNamespace,
  getCapiObject,
  managementApi,
  testbed,
  testGroup,
  type ManagementApi,
} from '../../support/testbed-fixtures.ts';
import { startTestHookServer, type TestHookServer } from './hook-server.ts';
import { startTestWorker, testClient, uniqueTaskQueue } from './temporal.ts';
import { healthy, steps, stubUpgradeActivities } from './upgrade-harness.ts';
import { waitFor } from './wait.ts';

/** The version the played upgrades go from, and the one they go to. */
export const FROM = 'v1.32.4';
export const TARGET = 'v1.33.0';

/** The fields of a Cluster these tests read. */
export interface PlayedCluster {
  metadata: { name: string; namespace: string; uid: string; annotations?: Record<string, string> };
  spec: { topology: { version: string } };
}

export interface FleetCapiTestbed {
  /** The test group's name: the namespace of its Clusters in the management cluster. */
  g: string;
  mg: ManagementApi;
  readCluster(name: string): Promise<PlayedCluster>;
  /** Creates the namespace, then (`createClusters`) the Clusters; starts the client, hook server, worker and player. */
  setUp(played: readonly string[], createClusters: () => Promise<unknown>): Promise<void>;
  /** The client on the dev server (after `setUp`). */
  readonly client: Client;
  /** Starts the rollout `input` names on the worker's task queue. */
  startRollout(input: FleetRolloutInput): Promise<WorkflowHandle>;
  /** The upgrades the player is driving, by Cluster name (await them to see every hook answered Success). */
  driven: Map<string, Promise<void>>;
  /** Stops the player, then the hook server, the worker, the client; deletes the namespace. */
  tearDown(): Promise<void>;
}

/** A test group's fleet in the test bed, upgraded by the played CAPI. */
export function fleetCapiTestbed(prefix: string, taskQueuePrefix: string): FleetCapiTestbed {
  const g = testGroup(prefix).name;
  const mg = managementApi();
  const taskQueue = uniqueTaskQueue(taskQueuePrefix);
  const readCluster = async (name: string) =>
    (await getCapiObject(mg.custom, 'Cluster', g, name)) as unknown as PlayedCluster;
  const driven = new Map<string, Promise<void>>();
  let running: { client: Client; closeClient: () => Promise<void> } | undefined;
  let hooks: TestHookServer | undefined;
  let worker: Awaited<ReturnType<typeof startTestWorker>> | undefined;
  let playing = true;
  let player: Promise<void> | undefined;

  /** One hook call with the Cluster as it is now, as CAPI sends it, repeated until it lets CAPI go on. */
  const untilOpen = async (server: TestHookServer, name: string, hook: HookName, fields: Record<string, unknown>) => {
    const answer = await waitFor(
      async () =>
        (
          await callHook<{ status: string; message?: string; retryAfterSeconds: number }>(
            server.url,
            hookPath(hook, defaultHandlerName(hook)),
            { apiVersion: HOOKS_API_VERSION, kind: `${hook}Request`, cluster: await readCluster(name), ...fields },
            { ca: server.ca.certPem, timeout: '10s' },
          )
        ).body,
      (a) => a.status === 'Failure' || a.retryAfterSeconds === 0,
      60_000,
    );
    expect(answer).toMatchObject({ status: 'Success', retryAfterSeconds: 0 });
  };
  /** The upgrade one Cluster goes through once its version changed: every hook in CAPI's order. */
  const upgrade = async (server: TestHookServer, name: string) => {
    const span = { fromKubernetesVersion: FROM, toKubernetesVersion: TARGET };
    const lists = { controlPlaneUpgrades: steps(TARGET), workersUpgrades: steps(TARGET) };
    await untilOpen(server, name, 'BeforeClusterUpgrade', { ...span, ...lists });
    await untilOpen(server, name, 'BeforeControlPlaneUpgrade', { ...span, ...lists });
    await untilOpen(server, name, 'AfterControlPlaneUpgrade', {
      kubernetesVersion: TARGET,
      workersUpgrades: steps(TARGET),
    });
    await untilOpen(server, name, 'BeforeWorkersUpgrade', span);
    await untilOpen(server, name, 'AfterWorkersUpgrade', { kubernetesVersion: TARGET });
    await untilOpen(server, name, 'AfterClusterUpgrade', { kubernetesVersion: TARGET });
  };

  const started = () => {
    if (!running) throw new Error('fleetCapiTestbed: setUp has not run');
    return running.client;
  };

  return {
    g,
    mg,
    readCluster,
    driven,
    get client() {
      return started();
    },
    async setUp(played, createClusters) {
      await createNamespace(mg.core, g);
      await createClusters();
      const { client, close: closeClient } = await testClient();
      running = { client, closeClient };
      const server = await startTestHookServer({
        lifecycle: createClusterUpgradeHandlers({ client, taskQueue, checks: requestChecksOff }),
      });
      hooks = server;
      const fleet = createFleetActivities({
        management: managementKubeConfig(testbed().workerKubeconfig),
        temporal: workflowPort(client),
        checkClusterHealth: async () => healthy(),
      });
      worker = await startTestWorker({ taskQueue, activities: { ...stubUpgradeActivities(), ...fleet } });
      player = (async () => {
        while (playing) {
          for (const name of played) {
            if (driven.has(name) || (await readCluster(name)).spec.topology.version !== TARGET) continue;
            driven.set(name, upgrade(server, name));
          }
          await new Promise((r) => setTimeout(r, 300));
        }
      })();
    },
    startRollout(input) {
      return started().workflow.start('fleetRolloutWorkflow', {
        workflowId: fleetRolloutWorkflowId(input.name),
        taskQueue,
        args: [input],
      });
    },
    async tearDown() {
      playing = false;
      await player;
      await hooks?.close();
      await worker?.stop();
      await running?.closeClient();
      await mg.core.deleteNamespace({ name: g }).catch(() => undefined);
    },
  };
}
