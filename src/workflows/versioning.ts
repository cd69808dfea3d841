// Each workflow type's Worker Versioning behaviour (docs/worker-versioning.md).
// Named only on a versioned worker: the server refuses a workflow task that
// names a behaviour from an unversioned one (no build id: `make dev`, tests),
// whose task carries a build id but no deployment name.
import type { VersioningBehavior, WorkflowDefinitionOptions } from '@temporalio/common';
import { setWorkflowOptions, workflowInfo } from '@temporalio/workflow';

export function setVersioningBehavior<A extends unknown[], R>(
  behavior: VersioningBehavior,
  workflow: (...args: A) => Promise<R>,
): void {
  setWorkflowOptions(
    (): WorkflowDefinitionOptions =>
      workflowInfo().currentDeploymentVersion?.deploymentName ? { versioningBehavior: behavior } : {},
    workflow,
  );
}
