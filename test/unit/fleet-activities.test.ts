// The fleet activities without a cluster: abortClusterUpgrades signals each in-flight cluster
// upgrade `abort` with the reason (a cluster whose upgrade is gone is skipped), and
// checkClustersHealth heartbeats through a wave's clusters.
import { describe, expect, it } from '@jest/globals';
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { MockActivityEnvironment } from '@temporalio/testing';
import { createFleetActivities } from '../../src/activities/fleet.ts';
import { clusterUpgradeWorkflowId } from '../../src/model/cluster-upgrade.ts';
import type { SelectedCluster } from '../../src/model/fleet-rollout.ts';
import { managementKubeConfig } from '../../src/platform/kube/clients.ts';
import { workflowPort } from '../../src/platform/temporal/workflows.ts';

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
      temporal: workflowPort(client),
      checkClusterHealth: () => Promise.reject(new Error('not called')),
    });
    await fleet.abortClusterUpgrades({ clusters: [a, gone, b], reason: 'bad canary' });
    expect(sent).toEqual([
      { workflowId: idOf(a), signal: 'abort', args: [{ reason: 'bad canary' }] },
      { workflowId: idOf(b), signal: 'abort', args: [{ reason: 'bad canary' }] },
    ]);
  });
});

describe('checkClustersHealth', () => {
  it("heartbeats while it checks a wave's clusters one after another, so the caller's heartbeat timeout holds", async () => {
    const checked: string[] = [];
    const fleet = createFleetActivities({
      management: managementKubeConfig(undefined, {}),
      temporal: workflowPort(recordingClient(new Set()).client),
      checkClusterHealth: async ({ cluster: c }) => {
        checked.push(c.name);
        await new Promise((r) => setTimeout(r, 20));
        return c.name === 'sick'
          ? { healthy: false, summary: 'node n1 NotReady', findings: [], warnings: [] }
          : { healthy: true, summary: 'healthy', findings: [], warnings: [] };
      },
    });
    const env = new MockActivityEnvironment();
    let heartbeats = 0;
    env.on('heartbeat', () => heartbeats++);
    const unhealthy = await env.run(() =>
      fleet.checkClustersHealth({ clusters: [cluster('a'), cluster('sick'), cluster('b')], version: 'v1.34.0' }),
    );
    expect(checked).toEqual(['a', 'sick', 'b']);
    expect(unhealthy).toEqual([{ uid: 'uid-sick', summary: 'node n1 NotReady' }]);
    expect(heartbeats).toBeGreaterThan(0);
  });
});
