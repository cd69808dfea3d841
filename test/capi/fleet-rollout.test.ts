// Real Cluster API under a fleet rollout: the rollout (run by the extension's
// own worker, as its least-privilege ServiceAccount) moves three in-memory
// clusters' spec.topology.version in two waves; CAPI's topology controller
// then upgrades each through our hooks, and the rollout follows each cluster's
// upgrade workflow until it is done. Services: test/support/capi-tier.ts.
import { afterAll, describe, expect, it } from '@jest/globals';
import {
  FLEET_ROLLOUT_ANNOTATION,
  fleetRolloutWorkflowId,
  type FleetRolloutInput,
  type FleetRolloutStatus,
} from '../../src/model/fleet-rollout.ts';
import { CapiTierClient, eventually, hookSequence } from '../support/capi-cluster.ts';

const FROM = 'v1.34.0';
const TARGET = 'v1.35.0';
const MINUTE = 60_000;
const TASK_QUEUE = 'capi-upgrade-orchestrator';

const capi = new CapiTierClient();
afterAll(async () => await capi.close());

describe('real Cluster API under a fleet rollout', () => {
  it(
    'upgrades three in-memory clusters in two waves: the canary first, then the other two together',
    async () => {
      const namespace = await capi.newNamespace('rollout');
      const names = ['r1', 'r2', 'r3'];
      await Promise.all(names.map((name) => capi.createCluster({ namespace, name, version: FROM })));
      for (const name of names)
        await eventually(
          `cluster ${namespace}/${name} Available`,
          () => capi.condition(namespace, name, 'Available'),
          (c) => c?.status === 'True',
          // A minute or two alone; a first fleet-rollout cluster took over 4 beside make-dev-demo.test.ts's stack.
          8 * MINUTE,
        );

      const client = await capi.temporal();
      const input: FleetRolloutInput = {
        name: namespace,
        selector: { labelSelector: '', namespaces: [namespace] },
        targetVersion: TARGET,
        waves: ['1', '100%'],
        soak: '5s',
        maxConcurrent: 2,
        failureBudget: 0,
      };
      const handle = await client.workflow.start('fleetRolloutWorkflow', {
        workflowId: fleetRolloutWorkflowId(namespace),
        taskQueue: TASK_QUEUE,
        args: [input],
      });
      const result = (await handle.result()) as FleetRolloutStatus;
      expect(result).toMatchObject({ phase: 'Completed', message: 'completed: 3 upgraded, 0 skipped, 0 failed' });
      expect(result.waves.map((w) => [w.size, w.state])).toEqual([
        [1, 'done'],
        [2, 'done'],
      ]);
      expect(result.clusters.map((c) => [c.name, c.wave, c.state])).toEqual([
        ['r1', 1, 'done'],
        ['r2', 2, 'done'],
        ['r3', 2, 'done'],
      ]);

      // CAPI did the upgrades, through the hooks, and the canary finished before wave 2 began.
      const versions = await capi.versions(namespace);
      expect(
        [...versions.controlPlane, ...versions.machineDeployments, ...versions.machines].every((v) => v === TARGET),
      ).toBe(true);
      const calls = capi.hookCalls(namespace);
      // The canary was done before wave 2 began: in the rollout's record, and in CAPI's calls (it had reached
      // r1's last hook before any hook of r2 or r3; it learns the gate opened on its next poll, maybe later).
      const [r1, r2, r3] = result.clusters;
      expect(Date.parse(r1?.finishedAt ?? '')).toBeLessThanOrEqual(Date.parse(r2?.startedAt ?? ''));
      expect(Date.parse(r1?.finishedAt ?? '')).toBeLessThanOrEqual(Date.parse(r3?.startedAt ?? ''));
      const r1Done = Math.min(
        ...calls.filter((c) => c.subject === `${namespace}/r1` && c.hook === 'AfterClusterUpgrade').map((c) => c.seq),
      );
      const wave2Began = Math.min(
        ...calls
          .filter(
            (c) =>
              (c.subject === `${namespace}/r2` || c.subject === `${namespace}/r3`) && c.hook === 'BeforeClusterUpgrade',
          )
          .map((c) => c.seq),
      );
      expect(r1Done).toBeLessThan(wave2Began);
      for (const name of names) {
        expect(
          hookSequence(
            calls.filter((c) => c.subject === `${namespace}/${name}`),
            ['BeforeClusterUpgrade', 'AfterClusterUpgrade'],
          ),
        ).toEqual([`BeforeClusterUpgrade ${TARGET}`, `AfterClusterUpgrade ${TARGET}`]);
        const cluster = await capi.get('cluster', namespace, name);
        expect(cluster?.metadata.annotations?.[FLEET_ROLLOUT_ANNOTATION]).toBe(namespace);
      }
      // The cluster upgrades the rollout started carry its name.
      const tagged = await eventually(
        'cluster upgrades tagged with the rollout',
        async () => {
          const ids: string[] = [];
          for await (const wf of client.workflow.list({ query: `CapiFleetRollout = ${JSON.stringify(namespace)}` }))
            ids.push(wf.workflowId);
          return ids;
        },
        (ids) => ids.length === 4,
        30_000,
        500,
      );
      expect(tagged.filter((id) => id.startsWith(`cluster-upgrade/${namespace}/`))).toHaveLength(3);
    },
    15 * MINUTE,
  );
});
