// A fleet behind stubbed fleet-rollout activities: each cluster "upgrades" a
// short while after its version is set, or fails, as a test says; and the
// workflow tier's rig that runs rollouts over it on the real dev server.
import type { Client, WorkflowHandle } from '@temporalio/client';
import type { ClusterReadinessFinding, FleetActivities, SetVersionResult } from '../../src/activities/fleet-types.ts';
import {
  fleetRolloutWorkflowId,
  type ClusterUpgradeProgress,
  type FleetRolloutInput,
  type SelectedCluster,
} from '../../src/model/fleet-rollout.ts';
import { startTestWorker, testClient, uniqueTaskQueue } from './temporal.ts';

interface FakeCluster extends SelectedCluster {
  setAt?: number;
}

/** A fleet the stubbed activities act on; each test makes its own. */
export class FakeFleet {
  clusters: FakeCluster[] = [];
  upgradeMs = 300;
  failing = new Set<string>();
  unhealthy = new Set<string>();
  changedBySomeoneElse = new Set<string>();
  /** Clusters CAPI's pacing annotations defer, with the message the real activity would give. */
  deferred = new Map<string, string>();
  sets: string[] = [];
  aborted: string[] = [];
  /** The size of each checkClustersHealth call. */
  healthChecks: number[] = [];
  /** Clusters whose readiness is Blocked, with the check that holds them (`unhealthy` ones: `health`). */
  blocked = new Map<string, string>();
  /** Clusters whose readiness run could not tell. */
  unknownReadiness = new Set<string>();
  /** The size of each checkClustersReadiness call. */
  readinessChecks: number[] = [];
  maxInFlight = 0;

  constructor(n: number, version = 'v1.32.4') {
    for (let i = 0; i < n; i++)
      this.clusters.push({ namespace: 'fleet', name: `c${String(i).padStart(2, '0')}`, uid: `uid-${i}`, version });
  }

  inFlight(): number {
    return this.clusters.filter((c) => c.setAt !== undefined && this.progress(c).state === 'upgrading').length;
  }

  progress(c: FakeCluster): ClusterUpgradeProgress {
    const deferredBy = this.deferred.get(c.name);
    if (c.setAt !== undefined && deferredBy) return { uid: c.uid, state: 'upgrading', message: deferredBy };
    if (c.setAt === undefined || Date.now() - c.setAt < this.upgradeMs) return { uid: c.uid, state: 'upgrading' };
    if (this.failing.has(c.name)) return { uid: c.uid, state: 'failed', message: 'upgrade failed: node n1 NotReady' };
    return { uid: c.uid, state: 'done', message: 'upgraded' };
  }

  byUid(uid: string): FakeCluster {
    const c = this.clusters.find((x) => x.uid === uid);
    if (!c) throw new Error(`no cluster ${uid}`);
    return c;
  }
}

/** Activities acting on whatever fleet `current()` returns (tests swap fleets). */
export function fakeFleetActivities(current: () => FakeFleet): FleetActivities {
  return {
    async selectClusters() {
      return current().clusters.map(({ namespace, name, uid, version }) => ({ namespace, name, uid, version }));
    },
    async setClusterVersions({ target, clusters }) {
      return clusters.map((sel): SetVersionResult => {
        const c = current().byUid(sel.uid);
        if (current().changedBySomeoneElse.has(c.name)) return { uid: c.uid, outcome: 'changed', found: 'v1.32.9' };
        if (c.version === target) return { uid: c.uid, outcome: 'already' };
        const deferredBy = current().deferred.get(c.name);
        if (deferredBy) return { uid: c.uid, outcome: 'deferred', deferredBy };
        c.version = target;
        c.setAt = Date.now();
        current().sets.push(c.name);
        current().maxInFlight = Math.max(current().maxInFlight, current().inFlight());
        return { uid: c.uid, outcome: 'set' };
      });
    },
    async awaitClusterUpgrades({ clusters, waitMs }) {
      const end = Date.now() + waitMs;
      for (;;) {
        const now = clusters.map((c) => current().progress(current().byUid(c.cluster.uid)));
        if (now.some((p, i) => p.state !== clusters[i]?.known) || Date.now() >= end) return now;
        await new Promise((r) => setTimeout(r, 50));
      }
    },
    async checkClustersHealth({ clusters }) {
      current().healthChecks.push(clusters.length);
      return clusters
        .filter((c) => current().unhealthy.has(c.name))
        .map((c) => ({ uid: c.uid, summary: 'node n1 NotReady' }));
    },
    async checkClustersReadiness({ clusters }) {
      const fleet = current();
      fleet.readinessChecks.push(clusters.length);
      return clusters.flatMap((c): ClusterReadinessFinding[] => {
        if (fleet.unknownReadiness.has(c.name))
          return [{ uid: c.uid, verdict: 'Unknown', finding: 'drain: could not read the workload cluster' }];
        const finding = fleet.unhealthy.has(c.name) ? 'health: node n1 NotReady' : fleet.blocked.get(c.name);
        return finding ? [{ uid: c.uid, verdict: 'Blocked', finding }] : [];
      });
    },
    async abortClusterUpgrades({ clusters }) {
      current().aborted.push(...clusters.map((c) => c.name));
    },
  };
}

/** A client and a real worker serving the fleet rollout workflow over the fake fleet, on a task queue of its own. */
export interface FakeFleetRollouts {
  client: Client;
  taskQueue: string;
  /** Starts a rollout (workflow id fleet-rollout/<name>). */
  start(input: FleetRolloutInput): Promise<WorkflowHandle>;
  /** Terminates the rollouts started so far: a test that failed half-way must not act on the next test's fleet. */
  terminateStarted(): Promise<void>;
  /** Shuts the worker down and closes the client. */
  close(): Promise<void>;
}

export async function startFakeFleetRollouts(
  taskQueuePrefix: string,
  current: () => FakeFleet,
): Promise<FakeFleetRollouts> {
  const taskQueue = uniqueTaskQueue(taskQueuePrefix);
  const { client, close: closeClient } = await testClient();
  const worker = await startTestWorker({ taskQueue, activities: fakeFleetActivities(current) }).catch(
    async (err: unknown) => {
      await closeClient();
      throw err;
    },
  );
  const started: string[] = [];
  return {
    client,
    taskQueue,
    start(input) {
      const workflowId = fleetRolloutWorkflowId(input.name);
      started.push(workflowId);
      return client.workflow.start('fleetRolloutWorkflow', { workflowId, taskQueue, args: [input] });
    },
    async terminateStarted() {
      for (const id of started.splice(0))
        await client.workflow
          .getHandle(id)
          .terminate('test over')
          .catch(() => undefined);
    },
    async close() {
      await worker.stop();
      await closeClient();
    },
  };
}
