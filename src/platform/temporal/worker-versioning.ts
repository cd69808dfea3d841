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
import { parseGoDuration } from '../../domain/durations.ts';

export interface WorkerVersioning {
  deploymentName: string;
  buildId: string;
}

export const DEFAULT_DEPLOYMENT_NAME = 'capi-upgrade-orchestrator';
/** The server derives workflow ids from both fields (at most 1,000 characters together, with a prefix). */
const MAX_LENGTH = 255;

/** A problem with a deployment name or build id as Temporal would refuse it; undefined when fine. */
function fieldProblem(field: string, kind: 'deployment name' | 'build id'): string | undefined {
  if (field.length > MAX_LENGTH) return `a ${kind} has at most ${MAX_LENGTH} characters`;
  if (field.startsWith('__')) return `a ${kind} must not start with "__" (reserved by Temporal)`;
  if (/\s/.test(field)) return `a ${kind} has no whitespace`;
  if (kind === 'deployment name' && /[.:]/.test(field)) return 'a deployment name has no "." or ":"';
  return undefined;
}

/**
 * TEMPORAL_WORKER_BUILD_ID (stamped into the image) turns versioning on;
 * TEMPORAL_WORKER_DEPLOYMENT_NAME (set by the manifests) names the deployment. Temporal's Worker
 * Controller sets TEMPORAL_DEPLOYMENT_NAME and TEMPORAL_WORKER_BUILD_ID on the pods it runs: its name
 * wins, since it is the deployment the controller promotes.
 */
export function parseWorkerVersioning(env: Record<string, string | undefined>): {
  versioning?: WorkerVersioning;
  /** WORKER_DRAIN_TIMEOUT: how long a stopping versioned worker waits for its pinned runs (0 = not at all). */
  drainTimeoutMs: number;
  problems: string[];
} {
  const problems: string[] = [];
  const drainText = env.WORKER_DRAIN_TIMEOUT?.trim() || '0s';
  const drain = parseGoDuration(drainText);
  if (drain === undefined || drain > 24 * 3_600_000)
    problems.push(`WORKER_DRAIN_TIMEOUT=${JSON.stringify(drainText)}: expected a duration up to 24h, such as 20m`);
  const drainTimeoutMs = drain ?? 0;
  const buildId = env.TEMPORAL_WORKER_BUILD_ID?.trim() || undefined;
  const nameVariable = env.TEMPORAL_DEPLOYMENT_NAME?.trim()
    ? 'TEMPORAL_DEPLOYMENT_NAME'
    : 'TEMPORAL_WORKER_DEPLOYMENT_NAME';
  const deploymentName = env[nameVariable]?.trim() || DEFAULT_DEPLOYMENT_NAME;
  const nameProblem = fieldProblem(deploymentName, 'deployment name');
  if (nameProblem) problems.push(`${nameVariable}=${JSON.stringify(deploymentName)}: ${nameProblem}`);
  if (!buildId) return { drainTimeoutMs, problems };
  const buildProblem = fieldProblem(buildId, 'build id');
  if (buildProblem) problems.push(`TEMPORAL_WORKER_BUILD_ID=${JSON.stringify(buildId)}: ${buildProblem}`);
  return problems.length > 0
    ? { drainTimeoutMs, problems }
    : { versioning: { deploymentName, buildId }, drainTimeoutMs, problems };
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
