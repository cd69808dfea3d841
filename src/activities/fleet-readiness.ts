// The fleet rollout's look at its next wave: each cluster's readiness run (the
// readinessWorkflow, as `capi-upgrades readiness` runs it) from one activity
// per batch, a few runs at a time, so that every run is in the Web UI and the
// rollout's own history grows by one activity per batch, not by a child per
// cluster.
import { Context } from '@temporalio/activity';
import { blockingText } from '../domain/readiness-recheck.ts';
import type { SelectedCluster } from '../model/fleet-rollout.ts';
import type { WorkflowPort } from '../platform/temporal/workflows.ts';
import type { ClusterReadinessFinding, FleetActivities } from './fleet-types.ts';
import { heartbeating } from './heartbeat.ts';

/** Readiness runs at once: each reads a whole workload cluster. */
export const READINESS_RUNS_AT_ONCE = 4;
/** Checks named per cluster that could not tell. */
const SHOWN = 3;

async function readinessOf(
  port: WorkflowPort,
  taskQueue: string,
  c: SelectedCluster,
  version: string,
): Promise<ClusterReadinessFinding | undefined> {
  let report;
  try {
    report = await port.readiness(
      { cluster: { namespace: c.namespace, name: c.name }, targetVersion: version },
      taskQueue,
    );
  } catch (err) {
    // One run that fails says nothing of the others.
    const cause = err instanceof Error ? (err.cause instanceof Error ? err.cause.message : err.message) : String(err);
    return { uid: c.uid, verdict: 'Unknown', finding: `its readiness run failed: ${cause}` };
  }
  if (report.verdict === 'Ready') return undefined;
  if (report.verdict === 'Blocked')
    return { uid: c.uid, verdict: 'Blocked', finding: blockingText(report.checks).join('; ') };
  const unknown = report.checks.filter((k) => k.verdict === 'Unknown').map((k) => `${k.check}: ${k.message}`);
  return { uid: c.uid, verdict: 'Unknown', finding: unknown.slice(0, SHOWN).join('; ') };
}

/** The activity on the workflow service `temporal()` returns; the runs go to this activity's own task queue. */
export function checkClustersReadiness(temporal: () => WorkflowPort): FleetActivities['checkClustersReadiness'] {
  return ({ clusters, version }) =>
    heartbeating(async () => {
      const port = temporal();
      const { taskQueue } = Context.current().info;
      const found: (ClusterReadinessFinding | undefined)[] = [];
      let next = 0;
      const runner = async () => {
        for (let i = next++; i < clusters.length; i = next++)
          found[i] = await readinessOf(port, taskQueue, clusters[i] as SelectedCluster, version);
      };
      await Promise.all(Array.from({ length: Math.min(READINESS_RUNS_AT_ONCE, clusters.length) }, runner));
      return found.filter((f): f is ClusterReadinessFinding => f !== undefined);
    });
}
