// Runs a readiness check of one cluster (the readinessWorkflow) and waits for
// its report: the run `capi-upgrades readiness` starts and a fleet rollout's
// look at its next wave starts, one id per cluster and target, so a second
// caller joins a run in progress and every run is in the Web UI.
import type { Client } from '@temporalio/client';
import type { ReadinessReport } from '../../domain/readiness.ts';
import { readinessWorkflowId, type ReadinessInput } from '../../model/readiness.ts';
import { ClusterName, ClusterNamespace, TargetVersion } from '../../model/search-attributes.ts';
import { workflowTypes } from '../../model/workflow-types.ts';

export async function executeReadiness(
  client: Client,
  taskQueue: string,
  input: ReadinessInput,
): Promise<ReadinessReport> {
  const { cluster, targetVersion } = input;
  return (await client.workflow.execute(workflowTypes.readiness, {
    workflowId: readinessWorkflowId(cluster, targetVersion),
    taskQueue,
    args: [input],
    workflowIdConflictPolicy: 'USE_EXISTING',
    // Reads only: a run that cannot finish in this time is ended rather than left waiting.
    workflowExecutionTimeout: '10 minutes',
    typedSearchAttributes: [
      { key: ClusterNamespace, value: cluster.namespace },
      { key: ClusterName, value: cluster.name },
      { key: TargetVersion, value: targetVersion },
    ],
  })) as ReadinessReport;
}
