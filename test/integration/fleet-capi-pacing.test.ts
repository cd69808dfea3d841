// A fleet rollout respects Cluster API's own pacing annotations. A Cluster whose
// worker topology carries topology.cluster.x-k8s.io/defer-upgrade (or hold-upgrade-sequence) would
// have its control plane moved by CAPI but its upgrade never completed (CAPI calls no
// AfterWorkersUpgrade/AfterClusterUpgrade while a worker is deferred), so the rollout leaves its
// version alone, shows it as deferred (status, memo, CLI, an Event), does not count it as failed,
// and picks it up when the annotation goes. Real fleet activities against the test bed's API server,
// real cluster-upgrade workflows; the test plays CAPI's hook calls for Clusters whose version moved
// (test/support/fleet-capi-player.ts).
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { rolloutText } from '../../src/cli/rollouts.ts';
import { CAPI_DEFER_UPGRADE_ANNOTATION, CAPI_HOLD_UPGRADE_SEQUENCE_ANNOTATION } from '../../src/domain/capi-pacing.ts';
import {
  FLEET_ROLLOUT_MEMO_KEY,
  type FleetRolloutInput,
  type FleetRolloutMemo,
  type FleetRolloutStatus,
} from '../../src/model/fleet-rollout.ts';
import { capiCluster, createCapiObject, eventsOf, jsonPatch } from '../../support/testbed-fixtures.ts';
import { fleetCapiTestbed, FROM, TARGET } from '../support/fleet-capi-player.ts';
import { waitFor } from '../support/wait.ts';

const bed = fleetCapiTestbed('fp', 'pacing');
const { g, mg, readCluster } = bed;
const DEFER_MESSAGE = `deferred by CAPI annotation ${CAPI_DEFER_UPGRADE_ANNOTATION} (MachineDeployment md-1)`;
const HOLD_MESSAGE = `deferred by CAPI annotation ${CAPI_HOLD_UPGRADE_SEQUENCE_ANNOTATION} (MachineDeployment md-0, MachineDeployment md-1)`;

/** A Cluster with two worker topologies, md-0 and md-1, each with the given annotation (if any). */
async function createCluster(name: string, annotations: [string | undefined, string | undefined]) {
  const obj = capiCluster(name, g, { version: FROM, machineDeployments: [{ name: 'md-0' }, { name: 'md-1' }] });
  const topology = (obj.spec as { topology: { workers: { machineDeployments: Record<string, unknown>[] } } }).topology;
  topology.workers.machineDeployments.forEach((md, i) => {
    const a = annotations[i];
    if (a) md.metadata = { annotations: { [a]: '' } };
  });
  await createCapiObject(mg.custom, obj);
}

/** Removes the annotation from worker topology `index`, as an operator would. */
async function release(name: string, index: number) {
  await mg.custom.patchNamespacedCustomObject(
    {
      group: 'cluster.x-k8s.io',
      version: 'v1beta2',
      plural: 'clusters',
      namespace: g,
      name,
      body: [{ op: 'remove', path: `/spec/topology/workers/machineDeployments/${index}/metadata` }],
    },
    jsonPatch,
  );
}

describe('a fleet rollout over Clusters CAPI pacing annotations defer', () => {
  beforeAll(
    () =>
      bed.setUp(['deferred', 'held', 'plain'], () =>
        Promise.all([
          createCluster('deferred', [undefined, CAPI_DEFER_UPGRADE_ANNOTATION]),
          createCluster('held', [CAPI_HOLD_UPGRADE_SEQUENCE_ANNOTATION, undefined]),
          createCluster('plain', [undefined, undefined]),
        ]),
      ),
    120_000,
  );
  afterAll(() => bed.tearDown());

  it('leaves deferred clusters at their version, shows why, and upgrades them once the annotation goes', async () => {
    const input: FleetRolloutInput = {
      name: g,
      selector: { labelSelector: '', namespaces: [g] },
      targetVersion: TARGET,
      waves: ['100%'],
      soak: '0s',
      maxConcurrent: 3,
      failureBudget: 0,
      deferralRecheckMs: 500,
    };
    const handle = await bed.startRollout(input);
    // `plain` upgrades; the other two wait with CAPI's reason, neither failed nor moved.
    const waiting = await waitFor(
      () => handle.query<FleetRolloutStatus>('status'),
      (s) => s.clusters.find((c) => c.name === 'plain')?.state === 'done',
      90_000,
    );
    expect(waiting.phase).toBe('Running');
    expect(waiting.message).toBe('wave 1 of 1: 2 deferred, 1 done (failure budget 0)');
    expect(waiting.clusters.map((c) => [c.name, c.state, c.reason])).toEqual([
      ['deferred', 'deferred', DEFER_MESSAGE],
      ['held', 'deferred', HOLD_MESSAGE],
      ['plain', 'done', `upgraded to ${TARGET}`],
    ]);
    for (const name of ['deferred', 'held']) expect((await readCluster(name)).spec.topology.version).toBe(FROM);
    const memo = (await handle.describe()).memo?.[FLEET_ROLLOUT_MEMO_KEY] as FleetRolloutMemo;
    expect(memo.counts).toEqual({ pending: 0, upgrading: 0, done: 1, failed: 0, skipped: 0, deferred: 2 });
    expect(rolloutText(waiting)).toContain(DEFER_MESSAGE);
    const events = (await eventsOf(mg, 'Cluster', g, 'deferred')).filter((e) => e.reason === 'FleetRolloutDeferred');
    expect(events.map((e) => e.message)).toEqual([
      `fleet rollout ${g} leaves spec.topology.version at ${FROM}: ${DEFER_MESSAGE}`,
    ]);

    // Looked at again and again: still deferred, no second Event, nothing moved.
    await new Promise((r) => setTimeout(r, 2_000));
    expect((await handle.query<FleetRolloutStatus>('status')).clusters.map((c) => c.state)).toEqual([
      'deferred',
      'deferred',
      'done',
    ]);
    expect(
      (await eventsOf(mg, 'Cluster', g, 'deferred')).filter((e) => e.reason === 'FleetRolloutDeferred'),
    ).toHaveLength(1);

    // The operator lifts the annotations: the rollout picks both up and completes, nothing failed.
    await release('deferred', 1);
    await release('held', 0);
    const result = (await handle.result()) as FleetRolloutStatus;
    expect(result).toMatchObject({ phase: 'Completed', message: 'completed: 3 upgraded, 0 skipped, 0 failed' });
    for (const name of ['deferred', 'held', 'plain'])
      expect((await readCluster(name)).spec.topology.version).toBe(TARGET);
    await Promise.all(bed.driven.values());
  });
});
