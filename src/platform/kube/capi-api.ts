// Cluster API's API groups, the version the extension reads and writes, and the labels it
// selects by: CAPI v1.14 serves v1beta2 as its storage version (v1beta1 is deprecated), and a
// change of version is one edit here.

/** Core Cluster API: Cluster, Machine, MachineSet, MachineDeployment. */
export const CAPI_GROUP = 'cluster.x-k8s.io';
export const CAPI_VERSION = 'v1beta2';
/** `{ group, version }` of core Cluster API objects, as CustomObjectsApi calls take them. */
export const CAPI_CORE = { group: CAPI_GROUP, version: CAPI_VERSION } as const;
/** The kubeadm bootstrap provider: KubeadmConfig. */
export const CAPI_BOOTSTRAP = { group: `bootstrap.${CAPI_GROUP}`, version: CAPI_VERSION } as const;

/** The label CAPI puts on every object of a Cluster (Machines, MachineSets, MachineDeployments). */
export const CLUSTER_NAME_LABEL = 'cluster.x-k8s.io/cluster-name';
/** On a Machine of a control plane (value empty). */
export const CONTROL_PLANE_LABEL = 'cluster.x-k8s.io/control-plane';
/** On a Machine of a MachineDeployment: its name. */
export const DEPLOYMENT_NAME_LABEL = 'cluster.x-k8s.io/deployment-name';
/** On a MachineDeployment the topology controller owns: its name in the Cluster's topology. */
export const TOPOLOGY_DEPLOYMENT_NAME_LABEL = 'topology.cluster.x-k8s.io/deployment-name';
