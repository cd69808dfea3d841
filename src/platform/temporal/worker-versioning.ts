// Worker Versioning (Temporal Worker Deployments): the worker registers as one
// version (deployment name + build id) of a Worker Deployment. New workflows
// go to the deployment's *current* version; each workflow type declares
// whether it stays on the build it started on (PINNED) or moves to the current
// one at its next task (AUTO_UPGRADE): see the `setWorkflowOptions` in
// src/workflows and docs/worker-versioning.md.
//
// Off when no build id is set (`make dev`, the test tiers): the worker polls
// unversioned, and a workflow change then needs patched() (or no running runs).
import type { WorkerDeploymentOptions } from '@temporalio/worker';

export interface WorkerVersioning {
  deploymentName: string;
  buildId: string;
}

export const DEFAULT_DEPLOYMENT_NAME = 'capi-upgrade-orchestrator';
/** The server derives workflow ids from both fields (at most 1,000 characters together, with a prefix). */
const MAX_LENGTH = 255;

/**
 * A problem with a deployment name or build id as Temporal would refuse it; undefined when fine.
 * TEMPORAL_WORKER_BUILD_ID (stamped into the image) turns versioning on; TEMPORAL_WORKER_DEPLOYMENT_NAME
 * (set by the manifests) names the deployment, unless Temporal's Worker Controller sets
 * TEMPORAL_DEPLOYMENT_NAME on the pods it runs (the deployment it promotes): src/config reads them.
 */
export function versioningFieldProblem(field: string, kind: 'deployment name' | 'build id'): string | undefined {
  if (field.length > MAX_LENGTH) return `a ${kind} has at most ${MAX_LENGTH} characters`;
  if (field.startsWith('__')) return `a ${kind} must not start with "__" (reserved by Temporal)`;
  if (/\s/.test(field)) return `a ${kind} has no whitespace`;
  if (kind === 'deployment name' && /[.:]/.test(field)) return 'a deployment name has no "." or ":"';
  return undefined;
}

/**
 * The worker's deployment options. Every workflow type declares its own behaviour; the default
 * (PINNED: the run never meets code it did not start on) covers one that forgot to.
 */
export function workerDeploymentOptions(v: WorkerVersioning): WorkerDeploymentOptions {
  return {
    useWorkerVersioning: true,
    version: { deploymentName: v.deploymentName, buildId: v.buildId },
    defaultVersioningBehavior: 'PINNED',
  };
}
