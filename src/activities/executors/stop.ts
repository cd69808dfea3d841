// An abort after the executor started: what it last said is read first (the
// Job's newest pod log goes with the Job; an agent's status with its request),
// then it is stopped (the Job deleted, which kills its pod; the request
// deleted, which the agent contract reads as "stop now"). The answer says
// whether the executor had started on the node at all: the workflow keeps a
// touched node cordoned and marked, and gives an untouched one back.
import { BatchV1Api, CoreV1Api, CustomObjectsApi, type KubeConfig, type V1JobStatus } from '@kubernetes/client-node';
import { apiClient, isNotFound } from '../kube.ts';
import { truncate } from '../machine-update-common.ts';
import type { ExecutorKind, NodeUpgradeStopped } from '../machine-update-types.ts';
import {
  deleteNodeUpgradeRequest,
  NODE_UPGRADE_GROUP,
  NODE_UPGRADE_PLURAL,
  NODE_UPGRADE_VERSION,
  type NodeUpgradeRequest,
} from './delegate.ts';
import { deleteUpgradeJob, lastFailedPodLog } from './job.ts';

/**
 * Keeps what the executor's object says, then deletes it. Idempotent, and safe when retried: a
 * `retried` attempt may find gone what its previous attempt deleted, so "not there" then counts as
 * started (the node is kept out of service); only a first look that finds nothing says "not started".
 */
export async function stopNodeUpgrade(
  kc: KubeConfig,
  namespace: string,
  executor: ExecutorKind,
  name: string,
  retried: boolean,
): Promise<NodeUpgradeStopped> {
  const stopped = executor === 'job' ? await stopJob(kc, namespace, name) : await stopRequest(kc, namespace, name);
  if (stopped === undefined) {
    const what = `no ${executor === 'job' ? 'Job' : 'NodeUpgradeRequest'} ${namespace}/${name}`;
    return retried
      ? { started: true, observed: `${what} (an earlier attempt of this stop may have deleted it)` }
      : { started: false, observed: what };
  }
  return stopped;
}

/** undefined: there is no such Job. */
async function stopJob(kc: KubeConfig, namespace: string, name: string): Promise<NodeUpgradeStopped | undefined> {
  let status: V1JobStatus | undefined;
  try {
    status = (await apiClient(kc, BatchV1Api).readNamespacedJob({ name, namespace })).status;
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
  // The pods go with the Job: their log is read now or never.
  const log = await lastFailedPodLog(apiClient(kc, CoreV1Api), namespace, name, true);
  await deleteUpgradeJob(kc, namespace, name);
  const observed = `Job ${namespace}/${name}: active ${status?.active ?? 0}, succeeded ${status?.succeeded ?? 0}, failed ${status?.failed ?? 0}`;
  return { started: true, observed, log };
}

/** undefined: there is no such request. */
async function stopRequest(kc: KubeConfig, namespace: string, name: string): Promise<NodeUpgradeStopped | undefined> {
  const where = `NodeUpgradeRequest ${namespace}/${name}`;
  let request: NodeUpgradeRequest;
  try {
    request = (await apiClient(kc, CustomObjectsApi).getNamespacedCustomObject({
      group: NODE_UPGRADE_GROUP,
      version: NODE_UPGRADE_VERSION,
      plural: NODE_UPGRADE_PLURAL,
      namespace,
      name,
    })) as NodeUpgradeRequest;
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
  await deleteNodeUpgradeRequest(kc, namespace, name);
  const phase = request.status?.phase;
  // Any status at all: an agent took the request and may have begun on the node.
  if (phase === undefined) return { started: false, observed: `${where}: no agent took it` };
  const message = request.status?.message ? `: ${request.status.message}` : '';
  return { started: true, observed: truncate(`${where}: agent reported ${phase}${message}`, 400) };
}
