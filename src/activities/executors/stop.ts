// An abort after the executor started: what it last said is read first (the
// Job's newest pod log goes with the Job; an agent's status with its request),
// then it is stopped (the Job deleted, which kills its pod; the request
// deleted, which the agent contract reads as "stop now"). The answer says
// whether the executor had started on the node at all: the workflow keeps a
// touched node cordoned and marked, and gives an untouched one back.
import { BatchV1Api, CoreV1Api, type KubeConfig, type V1JobStatus } from '@kubernetes/client-node';
import { apiClient } from '../../platform/kube/clients.ts';
import { isNotFound } from '../../platform/kube/errors.ts';
import type { ExecutorKind, NodeUpgradeStopped } from '../machine-update-types.ts';
import { deleteUpgradeJob } from './job.ts';
import { lastFailedPodLog } from './job-pods.ts';
import { stopRequest } from './node-upgrade-request.ts';

/**
 * Keeps what the executor's object says, then deletes it (`kc`, `namespace`: where the executor
 * keeps it; the management cluster and the Machine's namespace for `management`). Idempotent, and safe when retried: a
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
  const stopped =
    executor === 'job'
      ? await stopJob(kc, namespace, name)
      : await stopRequest(kc, namespace, name, executor === 'management' ? 'node upgrader' : 'agent');
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
