// The `delegate` node-upgrade executor: a NodeUpgradeRequest custom resource in
// the workload cluster that an agent on the node acts on and reports back in
// status; upgradeNode writes it (installing its CRD when missing), and the
// agent's verdict on the current generation is read by the caller.
import { CustomObjectsApi, PatchStrategy, setHeaderOptions, type KubeConfig } from '@kubernetes/client-node';
import { ApplicationFailure } from '@temporalio/common';
import { canonicalJson } from '../../domain/canonical-json.ts';
import { apiClient, isConflict, isNotFound } from '../kube.ts';
import { watchObject } from '../object-watch.ts';
import { ensureFilesSecret, filesSecretName, type ResolvedNodeUpgrade } from './bootstrap-files.ts';
import {
  MACHINE_UPDATE_FAILURES,
  MANAGED_BY,
  MANAGED_BY_LABEL,
  MANAGED_BY_SELECTOR,
  nodeLabel,
  seconds,
  type NodeUpgradeExecution,
} from '../machine-update-common.ts';
import type { MachineRef } from '../machine-update-types.ts';

export const NODE_UPGRADE_GROUP = 'upgrades.capi-orchestrator.io';
export const NODE_UPGRADE_VERSION = 'v1alpha1';
export const NODE_UPGRADE_PLURAL = 'nodeupgraderequests';
export const NODE_UPGRADE_KIND = 'NodeUpgradeRequest';
/** How long a NodeUpgradeRequest may go without any status before we conclude no agent serves the node. */
export const AGENT_PICKUP_TIMEOUT_MS = 5 * 60_000;

const jsonPatch = setHeaderOptions('Content-Type', PatchStrategy.JsonPatch);
/** Asking again for a just-installed CRD to be served: 5 s at most (the activity heartbeats every 10 s). */
const CRD_SERVED_ATTEMPTS = 20;
const CRD_SERVED_PAUSE_MS = 250;

export interface NodeUpgradeRequestSpec {
  nodeName: string;
  machineRef: MachineRef;
  kubernetesVersion: string;
  /** Deprecated (before the files moved out of the spec): inline files; no longer written. */
  bootstrapFiles?: unknown[];
  /** Secret in the same namespace, owned by the request: one key per file and a `manifest`. */
  bootstrapFilesSecretRef?: { name: string };
}

export type NodeUpgradePhase = 'Pending' | 'Running' | 'Succeeded' | 'Failed';

export interface NodeUpgradeRequest {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace: string;
    uid?: string;
    generation?: number;
    labels?: Record<string, string>;
    resourceVersion?: string;
  };
  spec: NodeUpgradeRequestSpec;
  status?: { phase?: NodeUpgradePhase; message?: string; observedGeneration?: number };
}

const str = { type: 'string' };

/**
 * The CustomResourceDefinition of NodeUpgradeRequest, in wire format (the same as
 * config/crd/nodeupgraderequests.yaml; a test keeps the two equal). upgradeNode installs it in
 * the workload cluster when it is missing.
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
              'A request to upgrade one node in place, written by capi-upgrade-orchestrator for an agent on the node. ' +
              'The agent reports in status; it sets status.observedGeneration to the metadata.generation it acted on.',
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

/** The node's NodeUpgradeRequest (written, or its spec replaced) and the agent's verdict on that generation. */
export function delegateExecution(kc: KubeConfig, namespace: string, input: ResolvedNodeUpgrade): NodeUpgradeExecution {
  const custom = apiClient(kc, CustomObjectsApi);
  const ref = { group: NODE_UPGRADE_GROUP, version: NODE_UPGRADE_VERSION, plural: NODE_UPGRADE_PLURAL, namespace };
  const name = input.requestName;
  const where = `${NODE_UPGRADE_KIND} ${namespace}/${name}`;
  const files = input.files;
  const spec: NodeUpgradeRequestSpec = {
    nodeName: input.nodeName,
    machineRef: { namespace: input.machine.namespace, name: input.machine.name },
    kubernetesVersion: input.version,
    // File contents (often secrets) go in a Secret owned by the request, never in its spec.
    ...(files.length > 0 ? { bootstrapFilesSecretRef: { name: filesSecretName(name) } } : {}),
  };

  const ensure = async (): Promise<NodeUpgradeRequest> => {
    let existing: NodeUpgradeRequest | undefined;
    try {
      existing = (await custom.getNamespacedCustomObject({ ...ref, name })) as NodeUpgradeRequest;
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
    if (existing) {
      if (canonicalJson(existing.spec) === canonicalJson(spec)) return existing;
      // Same name, other spec: the agent must act on the new generation.
      return (await custom.patchNamespacedCustomObject(
        { ...ref, name, body: [{ op: 'replace', path: '/spec', value: spec }] },
        jsonPatch,
      )) as NodeUpgradeRequest;
    }
    const body: NodeUpgradeRequest = {
      apiVersion: `${NODE_UPGRADE_GROUP}/${NODE_UPGRADE_VERSION}`,
      kind: NODE_UPGRADE_KIND,
      metadata: { name, namespace, labels: { [MANAGED_BY_LABEL]: MANAGED_BY, ...nodeLabel(input.nodeName) } },
      spec,
    };
    try {
      return (await custom.createNamespacedCustomObject({ ...ref, body })) as NodeUpgradeRequest;
    } catch (err) {
      if (isConflict(err)) return await ensure(); // created meanwhile (a racing attempt)
      if (!isNotFound(err)) throw err;
      // The CRD is missing, or was just installed by a concurrent update and not yet served here.
      await ensureNodeUpgradeRequestCrd(kc);
      // A new CRD is served a few seconds after it is Established: ask again here, briefly,
      // rather than fail into the activity's retry backoff (2 s, 4 s …: the first machine
      // updates of a cluster lost ~6 s each to it in bench/machine-updates.ts).
      for (let attempt = 1; ; attempt++) {
        try {
          return (await custom.createNamespacedCustomObject({ ...ref, body })) as NodeUpgradeRequest;
        } catch (again) {
          if (isConflict(again)) return await ensure();
          if (!isNotFound(again)) throw again;
          if (attempt >= CRD_SERVED_ATTEMPTS)
            throw ApplicationFailure.retryable(
              `${NODE_UPGRADE_KIND} is not served yet in the workload cluster`,
              'CrdNotServed',
            );
        }
        await new Promise((r) => setTimeout(r, CRD_SERVED_PAUSE_MS));
      }
    }
  };

  const ensureWithFiles = async (): Promise<NodeUpgradeRequest> => {
    const request = await ensure();
    if (files.length > 0) await ensureFilesSecret(kc, request, files);
    return request;
  };

  return {
    async ensure() {
      await ensureWithFiles();
    },
    changes: (onChange) =>
      watchObject(
        kc,
        {
          path: `/apis/${NODE_UPGRADE_GROUP}/${NODE_UPGRADE_VERSION}/namespaces/${namespace}/${NODE_UPGRADE_PLURAL}`,
          labelSelector: MANAGED_BY_SELECTOR,
        },
        name,
        onChange,
      ),
    async check(startedAtMs) {
      let request: NodeUpgradeRequest;
      try {
        request = (await custom.getNamespacedCustomObject({ ...ref, name })) as NodeUpgradeRequest;
      } catch (err) {
        if (!isNotFound(err)) throw err;
        request = await ensureWithFiles(); // deleted by someone: ask again
      }
      const generation = request.metadata.generation;
      const status = request.status;
      const current = status !== undefined && status.observedGeneration === generation;
      if (current && status.phase === 'Succeeded') {
        return { done: true, message: status.message || `node agent reported Succeeded for ${where}` };
      }
      if (current && status.phase === 'Failed') {
        throw ApplicationFailure.nonRetryable(
          `node agent reported Failed: ${status.message || 'no message'}`,
          MACHINE_UPDATE_FAILURES.nodeAgentFailed,
        );
      }
      const observed = current
        ? `phase ${status.phase ?? 'Pending'}`
        : status?.phase
          ? `status of generation ${status.observedGeneration ?? 'unknown'} ignored, want ${generation ?? 'unknown'}`
          : 'no status yet';
      // Nobody answers at all: no agent serves this node. Say so early instead of stalling.
      const pickupMs = input.agentPickupTimeoutMs ?? AGENT_PICKUP_TIMEOUT_MS;
      if (status?.phase === undefined && Date.now() - startedAtMs > pickupMs) {
        throw ApplicationFailure.nonRetryable(
          `no node agent took ${where} for node ${input.nodeName} within ${seconds(pickupMs)}: ` +
            'is an agent running there? (or use nodeUpgradeExecutor=job)',
          MACHINE_UPDATE_FAILURES.nodeAgentMissing,
        );
      }
      if (Date.now() - startedAtMs > input.timeoutMs) {
        throw ApplicationFailure.nonRetryable(
          `${where} for node ${input.nodeName} not finished within ${seconds(input.timeoutMs)} (${observed})`,
          MACHINE_UPDATE_FAILURES.nodeUpgradeTimeout,
        );
      }
      return { done: false, observed };
    },
  };
}

/**
 * Installs the NodeUpgradeRequest CRD (a 409 means it is there) and waits until it is served.
 * Create first, not read first: one request either way, and the same verbs every time
 * (config/workload grants exactly get and create).
 */
export async function ensureNodeUpgradeRequestCrd(kc: KubeConfig): Promise<void> {
  const custom = apiClient(kc, CustomObjectsApi);
  const ref = { group: 'apiextensions.k8s.io', version: 'v1', plural: 'customresourcedefinitions' };
  const name = NODE_UPGRADE_REQUEST_CRD.metadata.name;
  const read = async (): Promise<CrdObject | undefined> => {
    try {
      return (await custom.getClusterCustomObject({ ...ref, name })) as CrdObject;
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  };
  const established = (crd: CrdObject | undefined) =>
    crd?.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True') ?? false;
  try {
    await custom.createClusterCustomObject({ ...ref, body: NODE_UPGRADE_REQUEST_CRD });
  } catch (err) {
    if (!isConflict(err)) throw err;
  }
  // Plain timers: this also runs from the async-completion watch, outside any activity.
  const pause = () => new Promise((r) => setTimeout(r, 500));
  for (let i = 0; i < 60; i++) {
    if (established(await read())) {
      // Established, yet the endpoint may need a moment longer to serve.
      await pause();
      return;
    }
    await pause();
  }
  throw ApplicationFailure.retryable(`CustomResourceDefinition ${name} not established after 30s`, 'CrdNotEstablished');
}

interface CrdObject {
  status?: { conditions?: { type: string; status: string }[] };
}

/** Deletes the NodeUpgradeRequest `name` (abort, cleanup): the agent stops on deletion; gone already is fine. */
export async function deleteNodeUpgradeRequest(kc: KubeConfig, namespace: string, name: string): Promise<void> {
  try {
    await apiClient(kc, CustomObjectsApi).deleteNamespacedCustomObject({
      group: NODE_UPGRADE_GROUP,
      version: NODE_UPGRADE_VERSION,
      plural: NODE_UPGRADE_PLURAL,
      namespace,
      name,
    });
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
}
