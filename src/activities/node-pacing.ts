// Node pacing from the activities' side: the pods on a node
// that hold its in-place update (blockingPodSelector), read from the workload
// cluster, and the Cluster's pacing annotations, which the preflight returns so
// that they win over the ExtensionConfig settings for that cluster.
import { CoreV1Api } from '@kubernetes/client-node';
import { ApplicationFailure } from '@temporalio/common';
import { parseLabelSelector } from '../domain/label-selector.ts';
import { parseNodePacing, type BlockingPods, type NodePacing } from '../domain/node-pacing.ts';
import { apiClient } from '../platform/kube/clients.ts';
import { MACHINE_UPDATE_FAILURES, type WorkloadKubeConfig } from './machine-update-common.ts';
import type { MachineUpdateActivities } from './machine-update-types.ts';

const NODE_NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
/** Pods listed per page: a node runs a few hundred at most, so one or two pages. */
const PAGE = 500;

export function createNodePacingActivities(
  workload: WorkloadKubeConfig,
): Pick<MachineUpdateActivities, 'blockingPods'> {
  return {
    async blockingPods({ cluster, nodeName, selector }): Promise<BlockingPods> {
      // Both go into the list's query: a name or selector the workflow did not validate is refused, not sent.
      const parsed = parseLabelSelector(selector);
      if (!parsed.ok || parsed.requirements.length === 0 || !NODE_NAME.test(nodeName) || nodeName.length > 253)
        throw ApplicationFailure.nonRetryable(
          `blockingPods: node ${JSON.stringify(nodeName)} or selector ${JSON.stringify(selector)} is not usable`,
          MACHINE_UPDATE_FAILURES.invalidInput,
        );
      const core = apiClient(await workload(cluster), CoreV1Api);
      // Pods that ended (Succeeded, Failed) hold nothing; terminating ones still run until they are gone.
      const fieldSelector = `spec.nodeName=${nodeName},status.phase!=Succeeded,status.phase!=Failed`;
      // A count and the least key: nothing held per pod, however many match.
      let count = 0;
      let first: string | undefined;
      let next: string | undefined;
      do {
        const page = await core.listPodForAllNamespaces({
          fieldSelector,
          labelSelector: selector,
          limit: PAGE,
          ...(next ? { _continue: next } : {}),
        });
        for (const p of page.items) {
          const key = `${p.metadata?.namespace ?? ''}/${p.metadata?.name ?? ''}`;
          count++;
          if (first === undefined || key < first) first = key;
        }
        next = page.metadata?._continue || undefined;
      } while (next);
      return { count, ...(first !== undefined ? { first } : {}) };
    },
  };
}

/** The Cluster's pacing annotations (each wins over its setting); a bad one fails the preflight naming it. */
export function clusterNodePacing(
  annotations: Readonly<Record<string, string>>,
  namespace: string,
  name: string,
): NodePacing {
  const parsed = parseNodePacing(annotations, 'annotation', `Cluster ${namespace}/${name} `);
  if (!parsed.ok) throw ApplicationFailure.nonRetryable(parsed.message, MACHINE_UPDATE_FAILURES.invalidInput);
  return parsed.pacing;
}
