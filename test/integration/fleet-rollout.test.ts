// A fleet rollout over Cluster objects in the test bed: the real fleet
// activities select them by label and move spec.topology.version (as the
// worker's ServiceAccount), the real cluster-upgrade workflows follow each
// upgrade, and the test plays Cluster API (test/support/fleet-capi-player.ts): when a
// Cluster's version changes it calls the upgrade hooks with that Cluster, as CAPI's
// topology controller would.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  FLEET_ROLLOUT_ANNOTATION,
  fleetRolloutWorkflowId,
  type FleetRolloutInput,
  type FleetRolloutStatus,
} from '../../src/model/fleet-rollout.ts';
import { capiCluster, createCapiObject, eventsOf, jsonPatch } from '../../support/testbed-fixtures.ts';
import { fleetCapiTestbed, FROM, TARGET } from '../support/fleet-capi-player.ts';
import { waitFor } from '../support/wait.ts';

const bed = fleetCapiTestbed('fr', 'fleet');
const { g, mg, readCluster } = bed;
const SELECTOR = `fleet=${g}`;

async function createCluster(name: string, version: string, labelled = true): Promise<void> {
  const obj = capiCluster(name, g, { version });
  if (labelled) obj.metadata.labels = { ...obj.metadata.labels, fleet: g };
  await createCapiObject(mg.custom, obj);
}

describe('a fleet rollout over Clusters in the test bed', () => {
  // Cluster API, played: a Cluster whose version moved to the target gets upgraded through the hooks
  // (`d` is at the target from the start: no upgrade of its own).
  beforeAll(
    () =>
      bed.setUp(['a', 'b', 'c'], () =>
        Promise.all([
          createCluster('a', FROM),
          createCluster('b', FROM),
          createCluster('c', FROM),
          createCluster('d', TARGET),
          createCluster('not-selected', FROM, false),
        ]),
      ),
    120_000,
  );
  afterAll(() => bed.tearDown());

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
    const handle = await bed.startRollout(input);
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
    await Promise.all(bed.driven.values());

    // Findable by the rollout's name: the rollout and the cluster upgrades it started.
    const tagged = await waitFor(
      async () => {
        const ids: string[] = [];
        for await (const wf of bed.client.workflow.list({ query: `CapiFleetRollout = ${JSON.stringify(g)}` }))
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
