// Records a cluster lifecycle event (BeforeClusterCreate,
// AfterControlPlaneInitialized) as a short workflow execution, so the
// cluster's history in the Web UI starts where the cluster does.
import { setVersioningBehavior } from './versioning.ts';

export interface ClusterEventInput {
  cluster: { namespace: string; name: string };
  hook: string;
  kubernetesVersion?: string;
}

export async function clusterEventWorkflow(
  input: ClusterEventInput,
): Promise<ClusterEventInput & { recordedAt: string }> {
  return { ...input, recordedAt: new Date().toISOString() };
}

// Worker Versioning: a single task; it finishes on the build it started on.
setVersioningBehavior('PINNED', clusterEventWorkflow);
