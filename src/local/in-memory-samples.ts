// config/samples/in-memory: CAPD's in-memory ClusterClass and a Cluster of it, as
// `capi-upgrades demo` and the real-CAPI tier apply them, and the changes that
// make a Cluster's Machines go in place or move to a new version.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

export const IN_MEMORY_CLASS = 'in-memory';

/** The ClusterClass, its upgrade plan from our GenerateUpgradePlan handler under `extensionName`. */
export function inMemoryClusterClass(samplesDir: string, extensionName: string): string {
  return readFileSync(join(samplesDir, 'clusterclass-in-memory.yaml'), 'utf8').replaceAll(
    '${GENERATE_UPGRADE_PLAN_EXTENSION}',
    `generate-upgrade-plan.${extensionName}`,
  );
}

export interface InMemoryCluster {
  namespace: string;
  name: string;
  version: string;
  controlPlaneReplicas: number;
  workerReplicas: number;
}

export function inMemoryCluster(samplesDir: string, c: InMemoryCluster): string {
  return readFileSync(join(samplesDir, 'cluster-in-memory.yaml'), 'utf8')
    .replaceAll('${CLUSTER_NAME}', c.name)
    .replaceAll('${NAMESPACE}', c.namespace)
    .replaceAll('${KUBERNETES_VERSION}', c.version)
    .replaceAll('${CONTROL_PLANE_MACHINE_COUNT}', String(c.controlPlaneReplicas))
    .replaceAll('${WORKER_MACHINE_COUNT}', String(c.workerReplicas));
}

/** A JSON patch of the Cluster: workers go in place only when the old MachineSet may scale down (maxUnavailable ≥ 1). */
export const IN_PLACE_WORKERS_PATCH = [
  {
    op: 'add',
    path: '/spec/topology/workers/machineDeployments/0/rollout',
    value: { strategy: { type: 'RollingUpdate', rollingUpdate: { maxSurge: 0, maxUnavailable: 1 } } },
  },
];

/** A JSON patch of the ClusterClass: the control plane with maxSurge 0 (in-place-templates.yaml; KCP allows it from 3 replicas). */
export const IN_PLACE_CONTROL_PLANE_PATCH = [
  { op: 'replace', path: '/spec/controlPlane/templateRef/name', value: 'in-memory-control-plane-max-surge-0' },
];

/** kubectl's arguments for a patch of one object. */
export function patchArgs(
  kind: 'cluster' | 'clusterclass',
  namespace: string,
  name: string,
  type: 'json' | 'merge',
  patch: unknown,
): string[] {
  return ['patch', kind, '-n', namespace, name, '--type', type, '-p', JSON.stringify(patch)];
}

/** kubectl's arguments that make a Cluster's workers go in place. */
export function inPlaceWorkersArgs(namespace: string, name: string): string[] {
  return patchArgs('cluster', namespace, name, 'json', IN_PLACE_WORKERS_PATCH);
}

/** kubectl's arguments that start an upgrade of a Cluster to `version`. */
export function upgradeArgs(namespace: string, name: string, version: string): string[] {
  return patchArgs('cluster', namespace, name, 'merge', { spec: { topology: { version } } });
}
