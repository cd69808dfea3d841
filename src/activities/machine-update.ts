// Activities of the machine update workflow: preflight against the Cluster API
// Machine, cordon / kubectl-style drain / uncordon of its node, the node upgrade
// through an executor (a NodeUpgradeRequest an agent on the node acts on, or a
// privileged Job pinned to the node), and the wait for the new kubelet. Every
// activity is idempotent; the long ones heartbeat, keep their start time in the
// heartbeat details (so a retried attempt keeps the original deadlines) and
// stop promptly when cancelled.
//
// This module composes them: the node activities live in node.ts, the drain in
// drain/, the executors in executors/. Their public names are re-exported here.
import type { KubeConfig } from '@kubernetes/client-node';
import { CompleteAsyncError, Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { createDrainActivities } from './drain/drain.ts';
import { resolveBootstrapFiles } from './executors/bootstrap-files.ts';
import { delegateExecution } from './executors/delegate.ts';
import { deleteNodeUpgradeRequest } from './executors/node-upgrade-request.ts';
import { managementExecution } from './executors/management.ts';
import { deleteUpgradeJob, jobExecution, type JobExecutorConfig } from './executors/job.ts';
import { stopNodeUpgrade } from './executors/stop.ts';
import { workloadKubeConfig } from '../platform/kube/workload-clusters.ts';
import {
  MACHINE_UPDATE_FAILURES,
  waitCheckpoint,
  type NodeUpgradeExecution,
  type WaitCheckpoint,
} from './machine-update-common.ts';
import type { NodeUpgradeWatch } from './node-upgrade-watch.ts';
import { createMachineEventActivities } from './machine-events.ts';
import { withStepEvents } from './step-events.ts';
import type { MachineRef, MachineUpdateActivities, NodeUpgradeInput } from './machine-update-types.ts';
import { createNodeActivities, machineDeletionCheck } from './node.ts';
import { createNodePacingActivities } from './node-pacing.ts';
import { createRemediationActivities } from './remediation.ts';

export {
  DRAIN_BACKOFF_MAX_MS,
  DRAIN_BACKOFF_MIN_MS,
  STUCK_TERMINATING_FORCE_NOW_MS,
  STUCK_TERMINATING_MS,
  type DrainCheckpoint,
} from './drain/drain.ts';
export {
  NODE_UPGRADE_GROUP,
  NODE_UPGRADE_KIND,
  NODE_UPGRADE_PLURAL,
  NODE_UPGRADE_REQUEST_CRD,
  NODE_UPGRADE_VERSION,
  type NodeUpgradePhase,
  type NodeUpgradeRequest,
  type NodeUpgradeRequestSpec,
} from './executors/node-upgrade-request-crd.ts';
export {
  DEFAULT_JOB_IMAGE,
  DEFAULT_JOB_SCRIPT,
  upgradeJob,
  type JobExecutorConfig,
  type UpgradeJobParams,
} from './executors/job.ts';
export {
  MACHINE_UPDATE_FAILURES,
  MANAGED_BY,
  MANAGED_BY_LABEL,
  NODE_NAME_LABEL,
  truncate,
  type WaitCheckpoint,
} from './machine-update-common.ts';
export {
  SKIP_REMEDIATION_ANNOTATION,
  SKIP_REMEDIATION_SET_BY_ANNOTATION,
  SKIP_REMEDIATION_SET_BY_US,
} from './remediation.ts';
export { CORDONED_BY_ANNOTATION, CORDONED_BY_US, UPDATE_FAILED_ANNOTATION, UPDATE_FAILED_MAX_LENGTH } from './node.ts';

export interface MachineUpdateActivityDeps {
  /** The management cluster (Machines, `<cluster>-kubeconfig` Secrets). */
  management: KubeConfig;
  /** Workload-cluster namespace of NodeUpgradeRequests and upgrade Jobs; default `kube-system`. */
  workloadNamespace?: string;
  /** How often the node-upgrade waits poll; default 2 s. */
  pollIntervalMs?: number;
  /** The `job` executor. */
  job?: JobExecutorConfig;
  /**
   * Waits on node upgrades outside activity slots (async completion). Unset: upgradeNode
   * polls inside the activity, holding its slot (tests that run activities directly).
   */
  upgradeWatch?: NodeUpgradeWatch;
}

export const DEFAULT_WORKLOAD_NAMESPACE = 'kube-system';

/**
 * Runs the start of a node upgrade (inputs checked, the executor's object created). Its refusal
 * (invalidInput) on the activity's first attempt comes before anything existed for this request
 * (a new name per attempt of the update): the node is untouched, and the workflow may give it
 * back. On a later attempt an earlier one may have created the Job or request: it stays invalidInput,
 * and the node is kept as after any failure past the executor.
 */
async function refusedUntouched<T>(attempt: number, start: () => Promise<T>): Promise<T> {
  try {
    return await start();
  } catch (err) {
    if (attempt === 1 && err instanceof ApplicationFailure && err.type === MACHINE_UPDATE_FAILURES.invalidInput)
      throw ApplicationFailure.nonRetryable(err.message, MACHINE_UPDATE_FAILURES.nodeUpgradeRefused);
    throw err;
  }
}

/** What starting a node upgrade needs: where each executor creates its object. */
interface Executors {
  management: KubeConfig;
  /** Workload-cluster namespace of NodeUpgradeRequests and upgrade Jobs. */
  namespace: string;
  job: JobExecutorConfig;
  workload: (cluster: MachineRef) => Promise<KubeConfig>;
}

/** The input checked and the executor's object created (idempotent): the execution to wait on. */
async function startExecution(executors: Executors, input: NodeUpgradeInput): Promise<NodeUpgradeExecution> {
  const { management, namespace, workload } = executors;
  if (!input.requestName) {
    throw ApplicationFailure.nonRetryable('upgradeNode needs a requestName', MACHINE_UPDATE_FAILURES.invalidInput);
  }
  // The KubeadmConfig comes by reference: its files (often secrets) are read here, never carried in history.
  const resolved = await resolveBootstrapFiles(management, input);
  let started: NodeUpgradeExecution;
  switch (input.executor) {
    case 'delegate':
      started = delegateExecution(await workload(input.cluster), namespace, resolved);
      break;
    case 'job':
      started = jobExecution(await workload(input.cluster), namespace, executors.job, resolved);
      break;
    case 'management':
      started = managementExecution(management, resolved);
      break;
    default:
      throw ApplicationFailure.nonRetryable(
        `unknown node upgrade executor ${JSON.stringify(input.executor)} (want delegate, job or management)`,
        MACHINE_UPDATE_FAILURES.invalidInput,
      );
  }
  await started.ensure();
  return started;
}

/** Waits inside the activity: reads again after pollMs, or as soon as the object changes, heartbeating. */
async function pollExecution(
  ctx: Context,
  execution: NodeUpgradeExecution,
  check: NodeUpgradeExecution['check'],
  startedAtMs: number,
  pollMs: number,
): Promise<{ message: string }> {
  let changed = false;
  let wake: (() => void) | undefined;
  const stopChanges = execution.changes(() => {
    changed = true;
    wake?.();
  });
  try {
    for (;;) {
      changed = false;
      const verdict = await check(startedAtMs);
      if (verdict.done) return { message: verdict.message };
      ctx.heartbeat({ startedAtMs, observed: verdict.observed } satisfies WaitCheckpoint);
      if (!changed) await Promise.race([ctx.sleep(pollMs), new Promise<void>((r) => (wake = r))]);
      wake = undefined;
    }
  } finally {
    stopChanges();
  }
}

export function createMachineUpdateActivities(deps: MachineUpdateActivityDeps): MachineUpdateActivities {
  const namespace = deps.workloadNamespace ?? DEFAULT_WORKLOAD_NAMESPACE;
  const pollMs = deps.pollIntervalMs ?? 2_000;
  const workload = async (cluster: MachineRef) => await workloadKubeConfig(deps.management, cluster);
  const node = createNodeActivities(deps.management, workload, pollMs);
  const machineDeleting = machineDeletionCheck(deps.management);
  const { drain } = createDrainActivities(workload, machineDeleting);
  const executors: Executors = { management: deps.management, namespace, job: deps.job ?? {}, workload };

  return withStepEvents({
    ...createMachineEventActivities(deps.management),
    ...createRemediationActivities(deps.management),
    ...createNodePacingActivities(workload),
    preflight: node.preflight,
    cordon: node.cordon,
    uncordon: node.uncordon,
    drain,

    async upgradeNode(input: NodeUpgradeInput): Promise<{ message: string }> {
      const ctx = Context.current();
      const startedAtMs = waitCheckpoint(ctx.info.heartbeatDetails)?.startedAtMs ?? Date.now();
      const execution = await refusedUntouched(ctx.info.attempt, async () => await startExecution(executors, input));
      // Each read also checks the Machine: one being deleted ends the wait (its update is aborted).
      const check = async (since: number) => {
        await machineDeleting(input.machine);
        return await execution.check(since);
      };
      if (deps.upgradeWatch) {
        deps.upgradeWatch.watch({
          taskToken: ctx.info.taskToken,
          startedAtMs,
          check,
          changes: (onChange) => execution.changes(onChange),
        });
        throw new CompleteAsyncError();
      }
      // Without the watch (tests): read again after pollMs, or as soon as the object changes.
      return await pollExecution(ctx, execution, check, startedAtMs, pollMs);
    },

    async cleanupNodeUpgrade({ cluster, executor, requestName }): Promise<void> {
      // management: in the management cluster, in the Machine's namespace (a Cluster's Machines share it).
      if (executor === 'management')
        return await deleteNodeUpgradeRequest(deps.management, cluster.namespace, requestName);
      const kc = await workload(cluster);
      if (executor === 'job') await deleteUpgradeJob(kc, namespace, requestName);
      else await deleteNodeUpgradeRequest(kc, namespace, requestName);
    },

    async stopNodeUpgrade({ cluster, executor, requestName }) {
      const retried = Context.current().info.attempt > 1;
      const [kc, where] =
        executor === 'management' ? [deps.management, cluster.namespace] : [await workload(cluster), namespace];
      return await stopNodeUpgrade(kc, where, executor, requestName, retried);
    },

    waitForNodeVersion: node.waitForNodeVersion,
    markNodeFailed: node.markNodeFailed,
    setNodeUpdateFailed: node.setNodeUpdateFailed,
    clearNodeUpdateFailed: node.clearNodeUpdateFailed,
  });
}
