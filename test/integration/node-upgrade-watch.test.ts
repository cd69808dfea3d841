// Waiting on node upgrades holds no worker slot: real machine update workflows
// on the dev server, the real activities against the test bed, and a worker
// allowed only 2 activities at once. Four updates must all be waiting on their
// NodeUpgradeRequests at the same time; with the wait inside the activity the
// third and fourth could never start while the first two wait. A change to
// the request is read when the watch sees it, not at the next poll; and one
// watch per cluster and collection serves every waiter.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { AsyncCompletionClient, type Client } from '@temporalio/client';
import { managementKubeConfig } from '../../src/platform/kube/clients.ts';
import { MANAGED_BY_LABEL, MANAGED_BY, MANAGED_BY_SELECTOR } from '../../src/activities/machine-update-common.ts';
import { openWatchCount, watchObject } from '../../src/activities/object-watch.ts';
import { createMachineUpdateActivities } from '../../src/activities/machine-update.ts';
import { NodeUpgradeWatch } from '../../src/activities/node-upgrade-watch.ts';
import type { MachineUpdateStatus } from '../../src/model/machine-update.ts';
import { machineUpdateWorkflow } from '../../src/workflows/machine-update/workflow.ts';
import { deleteGroup, managementApi, testbed, testGroup, workloadApi } from '../../support/testbed-fixtures.ts';
import {
  createMachineUpdateRig,
  startStandInAgent,
  type MachineUpdateRig,
  type StandInAgent,
} from '../../support/machine-update-rig.ts';
import { createTestWorker, testClient } from '../support/temporal.ts';
import { waitFor } from '../support/wait.ts';

const group = testGroup('watch');
let rig: MachineUpdateRig;
let client: Client;
let closeClient: () => Promise<void>;

beforeAll(async () => {
  rig = await createMachineUpdateRig(group, 4);
  ({ client, close: closeClient } = await testClient());
});

afterAll(async () => {
  await closeClient();
  await deleteGroup(workloadApi(), group);
  await managementApi()
    .core.deleteNamespace({ name: group.name })
    .catch(() => undefined);
});

/**
 * Runs `body` with a worker whose node upgrades are waited on by a NodeUpgradeWatch polling every
 * `pollMs`, and a stand-in agent answering the rig's requests when `answer` says so.
 */
async function withWatchedWorker(
  options: { pollMs: number; maxConcurrentActivityTaskExecutions?: number },
  answer: Parameters<typeof startStandInAgent>[1],
  body: (ctx: { taskQueue: string; watch: NodeUpgradeWatch; agent: StandInAgent }) => Promise<void>,
): Promise<void> {
  const taskQueue = `watch-${randomUUID()}`;
  const watch = new NodeUpgradeWatch(new AsyncCompletionClient({ connection: client.connection }), {
    pollMs: options.pollMs,
  });
  const { worker, connection } = await createTestWorker({
    taskQueue,
    ...(options.maxConcurrentActivityTaskExecutions
      ? { maxConcurrentActivityTaskExecutions: options.maxConcurrentActivityTaskExecutions }
      : {}),
    activities: createMachineUpdateActivities({
      management: managementKubeConfig(testbed().workerKubeconfig),
      workloadNamespace: rig.namespace,
      pollIntervalMs: options.pollMs,
      upgradeWatch: watch,
    }),
  });
  const agent = startStandInAgent(rig.namespace, answer);
  try {
    await worker.runUntil(() => body({ taskQueue, watch, agent }));
  } finally {
    await agent.stop();
    watch.close();
    await connection.close();
  }
}

describe('node upgrades waited on outside activity slots', () => {
  it('four updates wait on their requests at once on a worker with two activity slots, then all finish', async () => {
    // The agent answers nothing until all four requests are waiting together.
    await withWatchedWorker(
      { pollMs: 250, maxConcurrentActivityTaskExecutions: 2 },
      (_firstSeen, pending) => pending >= 4,
      async ({ taskQueue, watch, agent }) => {
        const handles = await Promise.all(
          rig.machines.map((_, i) =>
            client.workflow.start(machineUpdateWorkflow, {
              taskQueue,
              workflowId: `watch/${group.name}/${i}`,
              args: [rig.input(i)],
            }),
          ),
        );
        const results = (await Promise.all(handles.map((h) => h.result()))) as MachineUpdateStatus[];
        expect(results.map((r) => r.phase)).toEqual(['Succeeded', 'Succeeded', 'Succeeded', 'Succeeded']);
        expect(agent.maxPending).toBe(4);
        expect(agent.answered.size).toBe(4);
        // Each update waited in UpgradeNode and was completed by the watch, which has let go of all.
        for (const r of results) expect(r.steps.find((s) => s.type === 'UpgradeNode')?.status).toBe('True');
        expect(watch.size).toBe(0);
      },
    );
  }, 120_000);

  it("reads the request when the watch sees the agent's answer, not at the next poll", async () => {
    // Polls 9 s apart (under the 10 s heartbeat timeout): an answer read by polling shows as an
    // UpgradeNode step of 9 s or more; read on the watch's event it takes about the agent's 1 s.
    await withWatchedWorker(
      { pollMs: 9_000 },
      (firstSeen) => Date.now() - firstSeen >= 1_000,
      async ({ taskQueue, watch }) => {
        const result = (await client.workflow.execute(machineUpdateWorkflow, {
          taskQueue,
          workflowId: `watch-event/${group.name}/0`,
          // A new spec (another version) so the request is new, not the first test's.
          args: [rig.input(0, { version: 'v1.99.0', specHash: 'watch-event' })],
        })) as MachineUpdateStatus;
        expect(result.phase).toBe('Succeeded');
        const upgrade = result.steps.find((s) => s.type === 'UpgradeNode');
        const tookMs = Date.parse(upgrade?.completeTime ?? '') - Date.parse(upgrade?.startTime ?? '');
        expect(tookMs).toBeLessThan(7_000);
        expect(watch.size).toBe(0);
      },
    );
  }, 120_000);

  it('one watch per cluster and collection serves every object waited on, and closes with the last waiter', async () => {
    const { kc, core } = workloadApi();
    const collection = { path: `/api/v1/namespaces/${rig.namespace}/configmaps`, labelSelector: MANAGED_BY_SELECTOR };
    const seen = { a: 0, b: 0 };
    const stopA = watchObject(kc, collection, 'watched-a', () => seen.a++);
    const stopB = watchObject(kc, collection, 'watched-b', () => seen.b++);
    expect(openWatchCount(kc)).toBe(1);
    const configMap = (name: string) => ({
      metadata: { name, namespace: rig.namespace, labels: { [MANAGED_BY_LABEL]: MANAGED_BY } },
      data: { at: 'created' },
    });
    const touch = (name: string) =>
      core.replaceNamespacedConfigMap({
        name,
        namespace: rig.namespace,
        body: { ...configMap(name), data: { at: randomUUID() } },
      });
    try {
      // A watch opened after the object exists starts with it (ADDED), so no create is missed.
      await core.createNamespacedConfigMap({ namespace: rig.namespace, body: configMap('watched-a') });
      await waitFor(
        async () => seen.a,
        (n) => n > 0,
      );
      await core.createNamespacedConfigMap({ namespace: rig.namespace, body: configMap('watched-b') });
      await waitFor(
        async () => seen.b,
        (n) => n > 0,
      );

      stopA();
      expect(openWatchCount(kc)).toBe(1);
      const a = seen.a;
      const b = seen.b;
      await touch('watched-a');
      await touch('watched-b');
      await waitFor(
        async () => seen.b,
        (n) => n > b,
      );
      expect(seen.a).toBe(a);

      stopB();
      expect(openWatchCount(kc)).toBe(0);
    } finally {
      stopA();
      stopB();
    }
  }, 60_000);
});
