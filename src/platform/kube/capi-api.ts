// Cluster API's API groups, the version the extension reads and writes, the labels it selects
// by, and the fields of its objects the extension reads: CAPI v1.14 serves v1beta2 as its storage
// version (v1beta1 is deprecated), and a change of version is one edit here.
import type { PacedTopology, WorkerTopology } from '../../domain/capi-pacing.ts';

/** Core Cluster API: Cluster, Machine, MachineSet, MachineDeployment. */
export const CAPI_GROUP = 'cluster.x-k8s.io';
export const CAPI_VERSION = 'v1beta2';
/** `{ group, version }` of core Cluster API objects, as CustomObjectsApi calls take them. */
export const CAPI_CORE = { group: CAPI_GROUP, version: CAPI_VERSION } as const;
/** The `apiVersion` of a core Cluster API object. */
export const CAPI_API_VERSION = `${CAPI_GROUP}/${CAPI_VERSION}`;
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

// The objects as the API server hands them over: every field may be missing as far as this
// process can tell, so every field is optional and each reader says what it makes of an absence.

/** The metadata of a Cluster API object the extension reads or writes. */
export interface CapiObjectMeta {
  name?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  deletionTimestamp?: string;
}

/** One entry of a Cluster's spec.topology.workers.machineDeployments; fields not named here are kept as read. */
export interface TopologyMachineDeployment extends WorkerTopology {
  name: string;
  class: string;
  replicas?: number;
  [field: string]: unknown;
}

/** A Cluster's spec.topology: its version, its class and its worker topologies. */
export interface ClusterTopology extends PacedTopology {
  version?: string;
  classRef?: { name?: string };
  class?: string;
  workers?: { machineDeployments?: TopologyMachineDeployment[]; machinePools?: WorkerTopology[] };
}

export interface ClusterObject {
  metadata?: CapiObjectMeta;
  spec?: { topology?: ClusterTopology };
}

export interface MachineObject {
  apiVersion?: string;
  metadata?: CapiObjectMeta;
  spec?: {
    clusterName?: string;
    version?: string;
    bootstrap?: { configRef?: { apiGroup?: string; kind?: string; name?: string } };
    infrastructureRef?: { apiGroup?: string; kind?: string; name?: string };
  };
  status?: { nodeRef?: { name?: string } };
}

export interface MachineDeploymentObject {
  metadata?: CapiObjectMeta;
  spec?: { replicas?: number };
  /** v1beta2: readyReplicas counts Machines whose Ready condition is true. */
  status?: { readyReplicas?: number };
}
