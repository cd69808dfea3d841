// abortClusterUpgrades: a fleet rollout aborted with its in-flight upgrades signals each cluster's
// upgrade workflow `abort` with the reason; a cluster whose upgrade is gone is skipped.
import { describe, expect, it } from '@jest/globals';
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { createFleetActivities } from '../../src/activities/fleet.ts';
import { clusterUpgradeWorkflowId } from '../../src/model/cluster-upgrade.ts';
import type { SelectedCluster } from '../../src/model/fleet-rollout.ts';
import { managementKubeConfig } from '../../src/platform/kube/clients.ts';

interface Sent {
  workflowId: string;
  signal: string;
  args: unknown[];
}

/** A workflow service that records each signal; `missing` workflows do not exist. */
function recordingClient(missing: ReadonlySet<string>): { client: Client; sent: Sent[] } {
  const sent: Sent[] = [];
  const client = {
    workflow: {
      getHandle: (workflowId: string) => ({
        signal: async (def: string | { name: string }, ...args: unknown[]) => {
          if (missing.has(workflowId)) throw new WorkflowNotFoundError('not found', workflowId, undefined);
          sent.push({ workflowId, signal: typeof def === 'string' ? def : def.name, args });
        },
      }),
    },
  } as unknown as Client;
  return { client, sent };
}

const cluster = (name: string): SelectedCluster => ({
  namespace: 'fleet',
  name,
  uid: `uid-${name}`,
  version: 'v1.33.0',
});
const idOf = (c: SelectedCluster) => clusterUpgradeWorkflowId({ namespace: c.namespace, name: c.name, uid: c.uid });

describe('abortClusterUpgrades', () => {
  it("signals each cluster's upgrade abort with the reason, skipping upgrades that are gone", async () => {
    const [a, gone, b] = [cluster('a'), cluster('gone'), cluster('b')];
    const { client, sent } = recordingClient(new Set([idOf(gone)]));
    const fleet = createFleetActivities({
      management: managementKubeConfig(undefined, {}),
      temporal: () => client,
      checkClusterHealth: () => Promise.reject(new Error('not called')),
    });
    await fleet.abortClusterUpgrades({ clusters: [a, gone, b], reason: 'bad canary' });
    expect(sent).toEqual([
      { workflowId: idOf(a), signal: 'abort', args: [{ reason: 'bad canary' }] },
      { workflowId: idOf(b), signal: 'abort', args: [{ reason: 'bad canary' }] },
    ]);
  });
});
