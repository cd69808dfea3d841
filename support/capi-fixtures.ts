// Requests shaped like CAPI's (v1.13+: v1beta2 objects, status and
// managedFields stripped), built after the Go types in
// api/runtime/hooks/v1alpha1 and the CAPI book's examples.
import { HOOKS_API_VERSION, type HookName, type HookRequest } from '../src/api/hooks/contract.ts';

export function cluster(name = 'prod-1', namespace = 'fleet-a', version = 'v1.33.0') {
  return {
    apiVersion: 'cluster.x-k8s.io/v1beta2',
    kind: 'Cluster',
    metadata: {
      name,
      namespace,
      uid: '6b1e2c3d-0000-4000-8000-000000000001',
      resourceVersion: '4711',
      generation: 3,
      labels: { 'cluster.x-k8s.io/cluster-name': name, env: 'prod' },
      annotations: { 'runtime.cluster.x-k8s.io/pending-hooks': 'AfterClusterUpgrade' },
      finalizers: ['cluster.cluster.x-k8s.io'],
    },
    spec: {
      clusterNetwork: { pods: { cidrBlocks: ['192.168.0.0/16'] }, services: { cidrBlocks: ['10.128.0.0/12'] } },
      controlPlaneEndpoint: { host: '172.18.0.3', port: 6443 },
      controlPlaneRef: {
        apiGroup: 'controlplane.cluster.x-k8s.io',
        kind: 'KubeadmControlPlane',
        name: `${name}-abcde`,
      },
      infrastructureRef: { apiGroup: 'infrastructure.cluster.x-k8s.io', kind: 'DockerCluster', name: `${name}-fghij` },
      topology: {
        classRef: { name: 'quick-start' },
        version,
        controlPlane: { replicas: 3 },
        workers: { machineDeployments: [{ class: 'default-worker', name: 'md-0', replicas: 2 }] },
        variables: [{ name: 'imageRepository', value: 'registry.k8s.io' }],
      },
    },
  };
}

export function machine(name = 'prod-1-md-0-abc12-q9z8w', namespace = 'fleet-a', version = 'v1.33.0') {
  return {
    apiVersion: 'cluster.x-k8s.io/v1beta2',
    kind: 'Machine',
    metadata: {
      name,
      namespace,
      labels: { 'cluster.x-k8s.io/cluster-name': 'prod-1', 'cluster.x-k8s.io/deployment-name': 'prod-1-md-0' },
      annotations: {},
    },
    spec: {
      clusterName: 'prod-1',
      version,
      bootstrap: { configRef: { apiGroup: 'bootstrap.cluster.x-k8s.io', kind: 'KubeadmConfig', name } },
      infrastructureRef: { apiGroup: 'infrastructure.cluster.x-k8s.io', kind: 'DockerMachine', name },
      providerID: `docker:////${name}`,
      failureDomain: 'fd1',
    },
  };
}

export function infrastructureMachine(name = 'prod-1-md-0-abc12-q9z8w', namespace = 'fleet-a') {
  return {
    apiVersion: 'infrastructure.cluster.x-k8s.io/v1beta2',
    kind: 'DockerMachine',
    metadata: { name, namespace },
    spec: { customImage: 'kindest/node:v1.33.0', providerID: `docker:////${name}` },
  };
}

export function kubeadmConfig(
  name = 'prod-1-md-0-abc12-q9z8w',
  namespace = 'fleet-a',
  files: { path: string; content: string }[] = [],
) {
  return {
    apiVersion: 'bootstrap.cluster.x-k8s.io/v1beta2',
    kind: 'KubeadmConfig',
    metadata: { name, namespace },
    spec: {
      files,
      joinConfiguration: {
        nodeRegistration: { kubeletExtraArgs: [{ name: 'eviction-hard', value: 'memory.available<0.5Gi' }] },
      },
    },
  };
}

export function machineSet(version = 'v1.33.0', name = 'prod-1-md-0-abc12', namespace = 'fleet-a') {
  return {
    apiVersion: 'cluster.x-k8s.io/v1beta2',
    kind: 'MachineSet',
    metadata: { name, namespace, labels: { 'cluster.x-k8s.io/cluster-name': 'prod-1' } },
    spec: {
      clusterName: 'prod-1',
      replicas: 3,
      selector: { matchLabels: { 'cluster.x-k8s.io/deployment-name': 'prod-1-md-0' } },
      template: {
        metadata: { labels: { 'cluster.x-k8s.io/deployment-name': 'prod-1-md-0' } },
        spec: {
          clusterName: 'prod-1',
          version,
          bootstrap: {
            configRef: {
              apiGroup: 'bootstrap.cluster.x-k8s.io',
              kind: 'KubeadmConfigTemplate',
              name: 'prod-1-md-0-t1',
            },
          },
          infrastructureRef: {
            apiGroup: 'infrastructure.cluster.x-k8s.io',
            kind: 'DockerMachineTemplate',
            name: 'prod-1-md-0-t1',
          },
        },
      },
    },
  };
}

export function template(
  kind: string,
  apiGroup: string,
  spec: Record<string, unknown> = {},
  name = 'prod-1-md-0-t1',
  namespace = 'fleet-a',
) {
  return { apiVersion: `${apiGroup}/v1beta2`, kind, metadata: { name, namespace }, spec: { template: { spec } } };
}

const steps = (...versions: string[]) => versions.map((version) => ({ version }));

/** One realistic request per hook (a chained upgrade v1.31.2 → v1.33.0 where relevant). */
export function sampleRequest<H extends HookName>(hook: H, settings?: Record<string, string>): HookRequest<H> {
  const c = cluster();
  const bodies: Record<HookName, Record<string, unknown>> = {
    BeforeClusterCreate: { cluster: c },
    AfterControlPlaneInitialized: { cluster: c },
    BeforeClusterUpgrade: {
      cluster: c,
      fromKubernetesVersion: 'v1.31.2',
      toKubernetesVersion: 'v1.33.0',
      controlPlaneUpgrades: steps('v1.32.4', 'v1.33.0'),
      workersUpgrades: steps('v1.33.0'),
    },
    BeforeControlPlaneUpgrade: {
      cluster: c,
      fromKubernetesVersion: 'v1.31.2',
      toKubernetesVersion: 'v1.32.4',
      controlPlaneUpgrades: steps('v1.32.4', 'v1.33.0'),
      workersUpgrades: steps('v1.33.0'),
    },
    AfterControlPlaneUpgrade: {
      cluster: c,
      kubernetesVersion: 'v1.32.4',
      controlPlaneUpgrades: steps('v1.33.0'),
      workersUpgrades: steps('v1.33.0'),
    },
    BeforeWorkersUpgrade: {
      cluster: c,
      fromKubernetesVersion: 'v1.31.2',
      toKubernetesVersion: 'v1.33.0',
      workersUpgrades: steps('v1.33.0'),
    },
    AfterWorkersUpgrade: { cluster: c, kubernetesVersion: 'v1.33.0' },
    AfterClusterUpgrade: { cluster: c, kubernetesVersion: 'v1.33.0' },
    BeforeClusterDelete: { cluster: { ...c, metadata: { ...c.metadata, deletionTimestamp: '2026-11-22T10:00:00Z' } } },
    GenerateUpgradePlan: {
      cluster: c,
      fromControlPlaneKubernetesVersion: 'v1.31.2',
      fromWorkersKubernetesVersion: 'v1.31.2',
      toKubernetesVersion: 'v1.33.0',
    },
    CanUpdateMachine: {
      current: { machine: machine(), infrastructureMachine: infrastructureMachine(), bootstrapConfig: kubeadmConfig() },
      desired: {
        machine: machine(undefined, undefined, 'v1.33.1'),
        infrastructureMachine: infrastructureMachine(),
        bootstrapConfig: kubeadmConfig(),
      },
    },
    CanUpdateMachineSet: {
      current: {
        machineSet: machineSet(),
        infrastructureMachineTemplate: template('DockerMachineTemplate', 'infrastructure.cluster.x-k8s.io'),
        bootstrapConfigTemplate: template('KubeadmConfigTemplate', 'bootstrap.cluster.x-k8s.io'),
      },
      desired: {
        machineSet: machineSet('v1.33.1'),
        infrastructureMachineTemplate: template('DockerMachineTemplate', 'infrastructure.cluster.x-k8s.io'),
        bootstrapConfigTemplate: template('KubeadmConfigTemplate', 'bootstrap.cluster.x-k8s.io'),
      },
    },
    UpdateMachine: {
      desired: {
        machine: {
          ...machine(undefined, undefined, 'v1.33.1'),
          metadata: {
            ...machine().metadata,
            annotations: {
              'in-place-updates.internal.cluster.x-k8s.io/update-in-progress': '',
              'runtime.cluster.x-k8s.io/pending-hooks': 'UpdateMachine',
            },
          },
        },
        infrastructureMachine: infrastructureMachine(),
        bootstrapConfig: kubeadmConfig(),
      },
    },
  };
  return {
    apiVersion: HOOKS_API_VERSION,
    kind: `${hook}Request`,
    ...(settings ? { settings } : {}),
    ...bodies[hook],
  } as HookRequest<H>;
}

/** CanUpdateMachine under the `delegate` executor for a Machine of `clusterName` on `nodeName` (v1.33.0 → v1.33.1). */
export function delegateCanUpdateMachine(namespace: string, clusterName: string, nodeName: string) {
  const withNode = (version: string) => ({
    ...machine('m-0', namespace, version),
    spec: { ...machine('m-0', namespace, version).spec, clusterName },
    status: { nodeRef: { name: nodeName } },
  });
  return {
    apiVersion: 'hooks.runtime.cluster.x-k8s.io/v1alpha1',
    kind: 'CanUpdateMachineRequest',
    settings: { nodeUpgradeExecutor: 'delegate' },
    current: {
      machine: withNode('v1.33.0'),
      infrastructureMachine: infrastructureMachine(),
      bootstrapConfig: kubeadmConfig(),
    },
    desired: {
      machine: withNode('v1.33.1'),
      infrastructureMachine: infrastructureMachine(),
      bootstrapConfig: kubeadmConfig(),
    },
  };
}
