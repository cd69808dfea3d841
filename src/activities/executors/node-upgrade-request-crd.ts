// The NodeUpgradeRequest resource (docs/node-upgrade-request.md): its API group and kind, the
// spec and status both request executors write and read, and its CustomResourceDefinition.
import type { V1OwnerReference } from '@kubernetes/client-node';
import type { TypedObjectRef } from '../../model/machine-update.ts';
import { MANAGED_BY, MANAGED_BY_LABEL } from '../machine-update-common.ts';
import type { MachineRef } from '../machine-update-types.ts';

export const NODE_UPGRADE_GROUP = 'upgrades.capi-orchestrator.io';
export const NODE_UPGRADE_VERSION = 'v1alpha1';
export const NODE_UPGRADE_PLURAL = 'nodeupgraderequests';
export const NODE_UPGRADE_KIND = 'NodeUpgradeRequest';
/** How long a NodeUpgradeRequest may go without any status before we conclude nobody serves the node. */
export const AGENT_PICKUP_TIMEOUT_MS = 5 * 60_000;

export interface NodeUpgradeRequestSpec {
  nodeName: string;
  machineRef: MachineRef;
  kubernetesVersion: string;
  /** management: the Machine's Cluster, infrastructure machine and bootstrap config. */
  clusterName?: string;
  infrastructureMachineRef?: TypedObjectRef;
  bootstrapConfigRef?: TypedObjectRef;
  /** Deprecated (before the files moved out of the spec): inline files; no longer written. */
  bootstrapFiles?: unknown[];
  /** Secret in the same namespace, owned by the request: one key per file and a `manifest`. */
  bootstrapFilesSecretRef?: { name: string };
}

export type NodeUpgradePhase = 'Pending' | 'Running' | 'Succeeded' | 'Failed';

export interface NodeUpgradeRequestStatus {
  phase?: NodeUpgradePhase;
  message?: string;
  /** On Failed: short CamelCase, e.g. `ImagePullFailed`. */
  failureReason?: string;
  failureMessage?: string;
  observedGeneration?: number;
}

export interface NodeUpgradeRequest {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace: string;
    uid?: string;
    generation?: number;
    labels?: Record<string, string>;
    ownerReferences?: V1OwnerReference[];
    resourceVersion?: string;
  };
  spec: NodeUpgradeRequestSpec;
  status?: NodeUpgradeRequestStatus;
}

const str = { type: 'string' };
const objectRef = (description: string) => ({
  type: 'object',
  description,
  required: ['apiVersion', 'kind', 'name'],
  properties: { apiVersion: str, kind: str, name: str },
});

/**
 * The CustomResourceDefinition of NodeUpgradeRequest, in wire format (the same as
 * config/crd/nodeupgraderequests.yaml; a test keeps the two equal). The delegate executor
 * installs it in the workload cluster when it is missing; config/default installs it in the
 * management cluster (the management executor never does: it has no CRD rights there).
 */
export const NODE_UPGRADE_REQUEST_CRD = {
  apiVersion: 'apiextensions.k8s.io/v1',
  kind: 'CustomResourceDefinition',
  metadata: {
    name: `${NODE_UPGRADE_PLURAL}.${NODE_UPGRADE_GROUP}`,
    labels: { [MANAGED_BY_LABEL]: MANAGED_BY },
  },
  spec: {
    group: NODE_UPGRADE_GROUP,
    names: {
      kind: NODE_UPGRADE_KIND,
      listKind: `${NODE_UPGRADE_KIND}List`,
      plural: NODE_UPGRADE_PLURAL,
      singular: 'nodeupgraderequest',
      shortNames: ['nur'],
      categories: ['capi-upgrade-orchestrator'],
    },
    scope: 'Namespaced',
    versions: [
      {
        name: NODE_UPGRADE_VERSION,
        served: true,
        storage: true,
        subresources: { status: {} },
        selectableFields: [{ jsonPath: '.spec.nodeName' }],
        additionalPrinterColumns: [
          { name: 'Node', type: 'string', jsonPath: '.spec.nodeName' },
          { name: 'Version', type: 'string', jsonPath: '.spec.kubernetesVersion' },
          { name: 'Phase', type: 'string', jsonPath: '.status.phase' },
          { name: 'Message', type: 'string', jsonPath: '.status.message', priority: 1 },
          { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
        ],
        schema: {
          openAPIV3Schema: {
            type: 'object',
            description:
              'A request to upgrade one node in place, written by capi-upgrade-orchestrator for an agent on the node ' +
              '(in the workload cluster) or a node upgrader (in the management cluster). It reports in status; it ' +
              'sets status.observedGeneration to the metadata.generation it acted on.',
            required: ['spec'],
            properties: {
              apiVersion: str,
              kind: str,
              metadata: { type: 'object' },
              spec: {
                type: 'object',
                required: ['nodeName', 'kubernetesVersion'],
                properties: {
                  nodeName: { type: 'string', minLength: 1, description: 'The Node to upgrade.' },
                  machineRef: {
                    type: 'object',
                    description: 'The Cluster API Machine of the node (in the management cluster).',
                    required: ['namespace', 'name'],
                    properties: { namespace: str, name: str },
                  },
                  kubernetesVersion: {
                    type: 'string',
                    minLength: 1,
                    description: 'Desired Kubernetes (kubelet) version, e.g. v1.33.1.',
                  },
                  clusterName: { type: 'string', description: 'The Cluster API Cluster of the node.' },
                  infrastructureMachineRef: objectRef('The infrastructure machine of the Machine (same namespace).'),
                  bootstrapConfigRef: objectRef('The bootstrap config of the Machine (same namespace).'),
                  bootstrapFiles: {
                    type: 'array',
                    description: 'Deprecated and no longer written: inline bootstrap files (KubeadmConfig spec.files).',
                    items: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
                  },
                  bootstrapFilesSecretRef: {
                    type: 'object',
                    description:
                      'Secret in this namespace, owned by this request, holding the files to write: one key per file ' +
                      '(the bytes as they go on disk) and a `manifest` of `<key> <mode> <owner> <path>` lines.',
                    required: ['name'],
                    properties: { name: str },
                  },
                },
              },
              status: {
                type: 'object',
                properties: {
                  phase: { type: 'string', enum: ['Pending', 'Running', 'Succeeded', 'Failed'] },
                  message: str,
                  failureReason: {
                    type: 'string',
                    description: 'On Failed: a short CamelCase reason, e.g. ImagePullFailed.',
                  },
                  failureMessage: { type: 'string', description: 'On Failed: what went wrong (no secrets).' },
                  observedGeneration: { type: 'integer', format: 'int64' },
                },
              },
            },
          },
        },
      },
    ],
  },
} as const;
