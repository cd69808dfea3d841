// The cluster upgrade's health check activity: reads the cluster's Machines
// (management cluster) and its nodes, pods and PodDisruptionBudgets (workload
// cluster); the verdict itself is domain/cluster-health.ts.
import { CoreV1Api, CustomObjectsApi, PolicyV1Api, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { ApplicationFailure } from '@temporalio/common';
import { evaluateHealth, invalidHealthCheck, type MachineInfo } from '../domain/cluster-health.ts';
import type { ClusterRef } from '../model/cluster-upgrade.ts';
import { listPaged } from '../platform/kube/paged-list.ts';
import { readLimitsOf } from '../platform/kube/workload-kube-config.ts';
import { heartbeating } from './heartbeat.ts';
import { apiClient } from '../platform/kube/clients.ts';
import { workloadKubeConfig } from '../platform/kube/workload-clusters.ts';
import type { HealthCheckInput, HealthReport, UpgradeActivities } from './upgrade-types.ts';
import { CAPI_CORE, CLUSTER_NAME_LABEL, CONTROL_PLANE_LABEL, type MachineObject } from '../platform/kube/capi-api.ts';

/** The Cluster's Machines (management cluster): their nodes are the ones an upgrade checks and drains. */
export async function listMachines(custom: CustomObjectsApi, ref: ClusterRef): Promise<MachineInfo[]> {
  const list = (await custom.listNamespacedCustomObject({
    ...CAPI_CORE,
    plural: 'machines',
    namespace: ref.namespace,
    labelSelector: `${CLUSTER_NAME_LABEL}=${ref.name}`,
  })) as { items: MachineObject[] };
  return list.items.map((m) => ({
    name: m.metadata?.name ?? '',
    controlPlane: m.metadata?.labels?.[CONTROL_PLANE_LABEL] !== undefined,
    ...(m.status?.nodeRef?.name ? { nodeName: m.status.nodeRef.name } : {}),
    ...(m.spec?.infrastructureRef?.kind ? { infrastructureKind: m.spec.infrastructureRef.kind } : {}),
  }));
}

export function createClusterHealthActivities(management: KubeConfig): Pick<UpgradeActivities, 'checkClusterHealth'> {
  const custom = apiClient(management, CustomObjectsApi);
  return {
    async checkClusterHealth(input: HealthCheckInput): Promise<HealthReport> {
      const invalid = invalidHealthCheck(input);
      if (invalid) throw ApplicationFailure.nonRetryable(invalid, 'InvalidHealthCheck');
      return await heartbeating(async () => {
        const kc = await workloadKubeConfig(management, input.cluster);
        const core = apiClient(kc, CoreV1Api);
        const policy = apiClient(kc, PolicyV1Api);
        const needsPods = input.scope === 'pre' || input.scope === 'post';
        const [machines, nodes, pdbs] = await Promise.all([
          listMachines(custom, input.cluster),
          listPaged(kc, 'nodes', (page) => core.listNode(page)),
          input.scope === 'pre'
            ? listPaged(kc, 'PodDisruptionBudgets', (page) => policy.listPodDisruptionBudgetForAllNamespaces(page))
            : Promise.resolve([]),
        ]);
        // Only the namespaces the checks read (critical ones, and those of PDBs that allow no
        // disruption): listing every pod of a large cluster on every probe is the expensive part.
        const namespaces = new Set(needsPods ? input.criticalNamespaces : []);
        for (const pdb of pdbs) {
          if ((pdb.status?.disruptionsAllowed ?? 0) === 0 && pdb.spec?.selector)
            namespaces.add(pdb.metadata?.namespace ?? '');
        }
        // As many namespaces at once as the cluster has slots (the rest would only queue there),
        // the pods of all of them within one list's cap: what the check holds is bounded too.
        const pods: V1Pod[] = [];
        const maxObjects = readLimitsOf(kc).limits.maxListObjects;
        const queue = [...namespaces].filter(Boolean).sort();
        const lister = async (): Promise<void> => {
          for (let namespace = queue.shift(); namespace !== undefined; namespace = queue.shift()) {
            const ns = namespace;
            const more = await listPaged(
              kc,
              `pods in namespace ${ns}`,
              (page) => core.listNamespacedPod({ namespace: ns, ...page }),
              { maxObjects: Math.max(0, maxObjects - pods.length) },
            );
            pods.push(...more);
          }
        };
        await Promise.all(Array.from({ length: readLimitsOf(kc).limits.perCluster }, lister));
        return evaluateHealth(input, { machines, nodes, pods, pdbs });
      });
    },
  };
}
