// Seed 003's preflight rule: never take a node out while its MachineDeployment
// (or control plane) already has as many machines unavailable as its
// maxUnavailable allows. Unavailable: no node yet, being deleted, or a node
// that is NotReady or cordoned (our own updates in flight included).
//
// A check, not a lock: two preflights in the same instant can both pass. CAPI
// itself starts in-place updates within maxUnavailable, and the cluster's
// maxConcurrentMachineUpdates slots are the hard limit; this keeps an update
// from adding to an outage that is already there.
import { CoreV1Api, type CustomObjectsApi, type KubeConfig, type V1Node } from '@kubernetes/client-node';
import { listPaged } from '../platform/kube/paged-list.ts';
import { allowedUnavailable } from '../domain/max-unavailable.ts';
import { apiClient } from '../platform/kube/clients.ts';
import { isNotFound } from '../platform/kube/errors.ts';
import {
  CAPI_CORE,
  CLUSTER_NAME_LABEL,
  CONTROL_PLANE_LABEL,
  DEPLOYMENT_NAME_LABEL,
} from '../platform/kube/capi-api.ts';

interface MachineLike {
  metadata?: { name?: string; labels?: Record<string, string>; deletionTimestamp?: string };
  status?: { nodeRef?: { name?: string } };
}

interface DeploymentLike {
  spec?: {
    replicas?: number;
    rollout?: { strategy?: { rollingUpdate?: { maxUnavailable?: number | string } } };
    strategy?: { rollingUpdate?: { maxUnavailable?: number | string } };
  };
}

/** Why the machine must wait, or undefined when its group has room (or it belongs to none). */
export async function unavailableBudgetExceeded(
  custom: CustomObjectsApi,
  kc: KubeConfig,
  namespace: string,
  clusterName: string,
  machine: MachineLike,
): Promise<string | undefined> {
  const labels = machine.metadata?.labels ?? {};
  let group: string;
  let selector: string;
  let allowed: number;
  const deployment = labels[DEPLOYMENT_NAME_LABEL];
  if (deployment) {
    let md: DeploymentLike;
    try {
      md = (await custom.getNamespacedCustomObject({
        ...CAPI_CORE,
        plural: 'machinedeployments',
        namespace,
        name: deployment,
      })) as DeploymentLike;
    } catch (err) {
      if (isNotFound(err)) return undefined; // a MachineSet without its deployment: nothing to hold to
      throw err;
    }
    const rolling = md.spec?.rollout?.strategy?.rollingUpdate ?? md.spec?.strategy?.rollingUpdate;
    allowed = allowedUnavailable(rolling?.maxUnavailable, md.spec?.replicas ?? 1);
    group = `MachineDeployment ${namespace}/${deployment}`;
    selector = `${CLUSTER_NAME_LABEL}=${clusterName},${DEPLOYMENT_NAME_LABEL}=${deployment}`;
  } else if (CONTROL_PLANE_LABEL in labels) {
    // KCP updates in place one machine at a time (maxSurge 0): no other may be out.
    allowed = 1;
    group = `the control plane of cluster ${namespace}/${clusterName}`;
    selector = `${CLUSTER_NAME_LABEL}=${clusterName},${CONTROL_PLANE_LABEL}`;
  } else {
    return undefined;
  }
  const [machines, nodes] = await Promise.all([
    custom.listNamespacedCustomObject({
      ...CAPI_CORE,
      plural: 'machines',
      namespace,
      labelSelector: selector,
    }) as Promise<{
      items: MachineLike[];
    }>,
    listPaged(kc, 'nodes', (page) => apiClient(kc, CoreV1Api).listNode(page)),
  ]);
  const byName = new Map(nodes.map((n) => [n.metadata?.name ?? '', n]));
  const unavailable = machines.items
    .filter((m) => m.metadata?.name !== machine.metadata?.name)
    .filter((m) => {
      if (m.metadata?.deletionTimestamp) return true;
      const node = m.status?.nodeRef?.name ? byName.get(m.status.nodeRef.name) : undefined;
      return !node || !available(node);
    })
    .map((m) => m.metadata?.name ?? '')
    .sort();
  // This machine will be out too: the others must leave room for it.
  if (unavailable.length + 1 <= allowed) return undefined;
  const shown = unavailable.slice(0, 3).join(', ') + (unavailable.length > 3 ? ', …' : '');
  return `${group} has ${unavailable.length} machine(s) unavailable (${shown}); maxUnavailable allows ${allowed}`;
}

function available(node: V1Node): boolean {
  if (node.spec?.unschedulable || node.metadata?.deletionTimestamp) return false;
  return node.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;
}
