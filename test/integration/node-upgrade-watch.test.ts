// Waiting on node upgrades holds no worker slot: real machine update workflows
// on the dev server, the real activities against the test bed, and a worker
// allowed only 2 activities at once. Four updates must all be waiting on their
// NodeUpgradeRequests at the same time; with the wait inside the activity the
// third and fourth could never start while the first two wait.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { AsyncCompletionClient, type Client } from '@temporalio/client';
import { managementKubeConfig } from '../../src/activities/kube.ts';
import { createMachineUpdateActivities } from '../../src/activities/machine-update.ts';
import { NodeUpgradeWatch } from '../../src/activities/node-upgrade-watch.ts';
import type { MachineUpdateStatus } from '../../src/model/machine-update.ts';
import { machineUpdateWorkflow } from '../../src/workflows/machine-update.ts';
import { deleteGroup, managementApi, testbed, testGroup, workloadApi } from '../support/fixtures.ts';
import { createMachineUpdateRig, startStandInAgent, type MachineUpdateRig } from '../support/machine-update-rig.ts';
import { createTestWorker, testClient } from '../support/temporal.ts';

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

describe('node upgrades waited on outside activity slots', () => {
  it('four updates wait on their requests at once on a worker with two activity slots, then all finish', async () => {
    const taskQueue = `watch-${randomUUID()}`;
    const watch = new NodeUpgradeWatch(new AsyncCompletionClient({ connection: client.connection }), { pollMs: 250 });
    const { worker, connection } = await createTestWorker({
      taskQueue,
      maxConcurrentActivityTaskExecutions: 2,
      activities: createMachineUpdateActivities({
        management: managementKubeConfig(testbed().workerKubeconfig),
        workloadNamespace: rig.namespace,
        pollIntervalMs: 250,
        upgradeWatch: watch,
      }),
    });
    // The agent answers nothing until all four requests are waiting together.
    const agent = startStandInAgent(rig.namespace, (_firstSeen, pending) => pending >= 4);
    try {
      await worker.runUntil(async () => {
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
      });
    } finally {
      await agent.stop();
      watch.close();
      await connection.close();
    }
  }, 120_000);
});
