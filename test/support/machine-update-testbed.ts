// The integration tier's test bed for one file of machine-update activity tests: a
// test group's namespace in both clusters, the workload Cluster's kubeconfig
// Secret, KWOK nodes, any Cluster API objects the file needs, and the real
// activities acting as the worker's ServiceAccount with their workload objects
// in the group's namespace.
import { managementKubeConfig } from '../../src/platform/kube/clients.ts';
import { createMachineUpdateActivities } from '../../src/activities/machine-update.ts';
import type { MachineUpdateActivities } from '../../src/activities/machine-update-types.ts';
import {
  createCapiObject,
  createKubeconfigSecret,
  createNamespace,
  createNodes,
  createWorkloadNamespace,
  deleteGroup,
  kwokNode,
  managementApi,
  testbed,
  testGroup,
  type CapiObject,
  type ManagementApi,
  type TestGroup,
  type WorkloadApi,
  workloadApi,
} from '../../support/testbed-fixtures.ts';

export interface MachineUpdateTestbed {
  group: TestGroup;
  /** The group's name: its namespace in both clusters, and the prefix of its node names. */
  g: string;
  wl: WorkloadApi;
  mg: ManagementApi;
  activities: MachineUpdateActivities;
  /** The workload Cluster (its kubeconfig Secret is made by `setUp`). */
  cluster: { namespace: string; name: string };
  /** Creates the namespaces, then the kubeconfig Secret, the KWOK nodes named and the CAPI objects given. */
  setUp(nodeNames: readonly string[], capiObjects?: readonly CapiObject[]): Promise<void>;
  /** Best-effort: the group in the workload cluster (namespace, nodes) and its management namespace. */
  tearDown(): Promise<void>;
}

export function machineUpdateTestbed(prefix: string): MachineUpdateTestbed {
  const group = testGroup(prefix);
  const g = group.name;
  const wl = workloadApi();
  const mg = managementApi();
  const cluster = { namespace: g, name: 'wl' };
  const activities = createMachineUpdateActivities({
    management: managementKubeConfig(testbed().workerKubeconfig),
    workloadNamespace: g,
    pollIntervalMs: 250,
  });
  return {
    group,
    g,
    wl,
    mg,
    activities,
    cluster,
    async setUp(nodeNames, capiObjects = []) {
      await Promise.all([createWorkloadNamespace(wl, g), createNamespace(mg.core, g)]);
      await Promise.all([
        createKubeconfigSecret(mg.core, g, cluster.name),
        createNodes(
          wl.core,
          nodeNames.map((name) => kwokNode(group, name)),
        ),
        ...capiObjects.map((obj) => createCapiObject(mg.custom, obj)),
      ]);
    },
    async tearDown() {
      await deleteGroup(wl, group);
      await mg.core.deleteNamespace({ name: g }).catch(() => undefined);
    },
  };
}
