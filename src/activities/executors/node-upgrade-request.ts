// The NodeUpgradeRequest lifecycle both request executors share (docs/node-upgrade-request.md):
// `delegate` writes it into the workload cluster for an agent on the node, `management` into the
// management cluster for the infrastructure's node upgrader. Either way the request is written
// (idempotent), watched and polled, read against its generation, and deleted to stop; the
// executors differ only in where it lives (client, namespace, owner, extra spec refs), what
// happens when its CRD is not served, and what a spec change under the same name does.
// The resource itself (group, types, CustomResourceDefinition) is node-upgrade-request-crd.ts.
import {
  CustomObjectsApi,
  PatchStrategy,
  setHeaderOptions,
  type KubeConfig,
  type V1OwnerReference,
} from '@kubernetes/client-node';
import { ApplicationFailure } from '@temporalio/common';
import { canonicalJson } from '../../domain/canonical-json.ts';
import { apiClient } from '../../platform/kube/clients.ts';
import { isConflict, isNotFound } from '../../platform/kube/errors.ts';
import {
  MACHINE_UPDATE_FAILURES,
  MANAGED_BY_SELECTOR,
  nodeLabel,
  seconds,
  truncate,
  type NodeUpgradeExecution,
} from '../machine-update-common.ts';
import type { NodeUpgradeStopped } from '../machine-update-types.ts';
import { watchObject } from '../object-watch.ts';
import { ensureFilesSecret, type ResolvedNodeUpgrade } from './bootstrap-files.ts';
import { AGENT_PICKUP_TIMEOUT_MS } from './node-upgrade-request-crd.ts';

import {
  NODE_UPGRADE_GROUP,
  NODE_UPGRADE_KIND,
  NODE_UPGRADE_PLURAL,
  NODE_UPGRADE_VERSION,
  type NodeUpgradeRequest,
  type NodeUpgradeRequestSpec,
  type NodeUpgradeRequestStatus,
} from './node-upgrade-request-crd.ts';

// Where the requests live, for the readers that import them from here.
export { NODE_UPGRADE_GROUP, NODE_UPGRADE_PLURAL, NODE_UPGRADE_VERSION } from './node-upgrade-request-crd.ts';

const requestRef = (namespace: string) => ({
  group: NODE_UPGRADE_GROUP,
  version: NODE_UPGRADE_VERSION,
  plural: NODE_UPGRADE_PLURAL,
  namespace,
});
const jsonPatch = setHeaderOptions('Content-Type', PatchStrategy.JsonPatch);

/** Where one executor keeps its requests, and how it differs from the other. */
export interface RequestPlace {
  kc: KubeConfig;
  namespace: string;
  /** Who acts on the requests, in messages: `node agent`, `node upgrader`. */
  server: string;
  /** Said when nobody took a request in time: where to look. */
  missingHint: string;
  spec: NodeUpgradeRequestSpec;
  /** Labels and owners of a new request (read when it is created, not before). */
  metadata(): Promise<{ labels: Record<string, string>; ownerReferences?: V1OwnerReference[] }>;
  /** The collection watched for changes (any namespace will do: reads are by name). */
  watchPath: string;
  /** A request of this name with another spec: `patch` replaces the spec, `recreate` deletes and creates. */
  specChange: 'patch' | 'recreate';
  /**
   * The create was answered 404 (the CRD is not served): make it served and return the request
   * `create` then makes (undefined while still 404), or throw.
   */
  crdMissing(create: () => Promise<NodeUpgradeRequest | undefined>): Promise<NodeUpgradeRequest>;
  /** What `Failed` fails the update with. */
  failed(status: NodeUpgradeRequestStatus): string;
}

/** `<failureReason>: <failureMessage>`, falling back to `status.message`. */
export function reportedFailure(status: NodeUpgradeRequestStatus): string | undefined {
  const text = status.failureMessage || status.message;
  if (status.failureReason) return text ? `${status.failureReason}: ${text}` : status.failureReason;
  return text || undefined;
}

/** The node's NodeUpgradeRequest at `place` (written, or its spec replaced) and the verdict on that generation. */
export function requestExecution(place: RequestPlace, input: ResolvedNodeUpgrade): NodeUpgradeExecution {
  const store = requestStore(place, input);
  return {
    async ensure() {
      await store.ensure();
    },
    changes: (onChange) =>
      watchObject(place.kc, { path: place.watchPath, labelSelector: MANAGED_BY_SELECTOR }, input.requestName, onChange),
    async check(startedAtMs) {
      const request = (await store.read()) ?? (await store.ensure()); // deleted by someone: ask again
      return requestVerdict(place, input, request, startedAtMs);
    },
  };
}

/** Reads and writes the node's request at `place`: `ensure` writes it (and its files' Secret) idempotently. */
function requestStore(
  place: RequestPlace,
  input: ResolvedNodeUpgrade,
): { read(): Promise<NodeUpgradeRequest | undefined>; ensure(): Promise<NodeUpgradeRequest> } {
  const custom = apiClient(place.kc, CustomObjectsApi);
  const ref = requestRef(place.namespace);
  const name = input.requestName;
  const spec = place.spec;

  const read = async (): Promise<NodeUpgradeRequest | undefined> => {
    try {
      return (await custom.getNamespacedCustomObject({ ...ref, name })) as NodeUpgradeRequest;
    } catch (err) {
      if (!isNotFound(err)) throw err;
      return undefined;
    }
  };
  /** Creates it; undefined when the CRD is not served (404); a racing attempt's request on 409. */
  const create = async (): Promise<NodeUpgradeRequest | undefined> => {
    const body: NodeUpgradeRequest = {
      apiVersion: `${NODE_UPGRADE_GROUP}/${NODE_UPGRADE_VERSION}`,
      kind: NODE_UPGRADE_KIND,
      metadata: { name, namespace: place.namespace, ...(await place.metadata()) },
      spec,
    };
    try {
      const created = (await custom.createNamespacedCustomObject({ ...ref, body })) as NodeUpgradeRequest;
      await pruneSucceeded(place, input.nodeName, name);
      return created;
    } catch (err) {
      if (isConflict(err)) return await ensure(); // created meanwhile (a racing attempt)
      if (isNotFound(err)) return undefined;
      throw err;
    }
  };
  const ensure = async (): Promise<NodeUpgradeRequest> => {
    const existing = await read();
    if (existing) {
      if (canonicalJson(existing.spec) === canonicalJson(spec)) return existing;
      // Same name, other spec: the server must act on the new generation.
      if (place.specChange === 'patch')
        return (await custom.patchNamespacedCustomObject(
          { ...ref, name, body: [{ op: 'replace', path: '/spec', value: spec }] },
          jsonPatch,
        )) as NodeUpgradeRequest;
      await deleteNodeUpgradeRequest(place.kc, place.namespace, name);
    }
    return (await create()) ?? (await place.crdMissing(create));
  };
  const ensureWithFiles = async (): Promise<NodeUpgradeRequest> => {
    const request = await ensure();
    if (input.files.length > 0) await ensureFilesSecret(place.kc, request, input.files);
    return request;
  };
  return { read, ensure: ensureWithFiles };
}

/** Done when the server reported Succeeded for this generation; throws on Failed, on nobody answering, and past the timeout. */
function requestVerdict(
  place: RequestPlace,
  input: ResolvedNodeUpgrade,
  request: NodeUpgradeRequest,
  startedAtMs: number,
): Awaited<ReturnType<NodeUpgradeExecution['check']>> {
  const where = `${NODE_UPGRADE_KIND} ${place.namespace}/${input.requestName}`;
  const generation = request.metadata.generation;
  const status = request.status;
  const current = status !== undefined && status.observedGeneration === generation;
  if (current && status.phase === 'Succeeded') {
    return { done: true, message: status.message || `${place.server} reported Succeeded for ${where}` };
  }
  if (current && status.phase === 'Failed') {
    throw ApplicationFailure.nonRetryable(place.failed(status), MACHINE_UPDATE_FAILURES.nodeAgentFailed);
  }
  const observed = current
    ? `phase ${status.phase ?? 'Pending'}`
    : status?.phase
      ? `status of generation ${status.observedGeneration ?? 'unknown'} ignored, want ${generation ?? 'unknown'}`
      : 'no status yet';
  // Nobody answers at all: nobody serves this node. Say so early instead of stalling.
  const pickupMs = input.agentPickupTimeoutMs ?? AGENT_PICKUP_TIMEOUT_MS;
  if (status?.phase === undefined && Date.now() - startedAtMs > pickupMs) {
    throw ApplicationFailure.nonRetryable(
      `no ${place.server} took ${where} for node ${input.nodeName} within ${seconds(pickupMs)}: ${place.missingHint}`,
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
}

async function pruneSucceeded(place: RequestPlace, nodeName: string, keep: string): Promise<void> {
  const label = Object.entries(nodeLabel(nodeName))[0];
  if (!label) return; // a node name no label can hold: nothing selects its requests
  try {
    const { items } = (await apiClient(place.kc, CustomObjectsApi).listNamespacedCustomObject({
      ...requestRef(place.namespace),
      labelSelector: `${MANAGED_BY_SELECTOR},${label[0]}=${label[1]}`,
    })) as { items: NodeUpgradeRequest[] };
    for (const r of items) {
      const done = r.status?.phase === 'Succeeded' && r.status.observedGeneration === r.metadata.generation;
      if (r.metadata.name !== keep && r.spec.nodeName === nodeName && done)
        await deleteNodeUpgradeRequest(place.kc, place.namespace, r.metadata.name);
    }
  } catch {
    // Clutter only: the next request of this node prunes again.
  }
}

/** Deletes the NodeUpgradeRequest `name` (abort, cleanup): its server stops on deletion; gone already is fine. */
export async function deleteNodeUpgradeRequest(kc: KubeConfig, namespace: string, name: string): Promise<void> {
  try {
    await apiClient(kc, CustomObjectsApi).deleteNamespacedCustomObject({ ...requestRef(namespace), name });
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
}

/**
 * Keeps what the request's server said, then deletes it (an abort); undefined when there is no
 * such request. Any status at all means it took the request and may have begun on the node.
 */
export async function stopRequest(
  kc: KubeConfig,
  namespace: string,
  name: string,
  server: string,
): Promise<NodeUpgradeStopped | undefined> {
  const where = `${NODE_UPGRADE_KIND} ${namespace}/${name}`;
  let request: NodeUpgradeRequest;
  try {
    request = (await apiClient(kc, CustomObjectsApi).getNamespacedCustomObject({
      ...requestRef(namespace),
      name,
    })) as NodeUpgradeRequest;
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
  await deleteNodeUpgradeRequest(kc, namespace, name);
  const status = request.status;
  if (status?.phase === undefined) return { started: false, observed: `${where}: no ${server} took it` };
  const said = (status.phase === 'Failed' ? reportedFailure(status) : undefined) ?? status.message;
  return {
    started: true,
    observed: truncate(`${where}: ${server} reported ${status.phase}${said ? `: ${said}` : ''}`, 400),
  };
}

/** The API path of the requests in every namespace (one watch serves them all). */
export const ALL_NAMESPACES_REQUESTS_PATH = `/apis/${NODE_UPGRADE_GROUP}/${NODE_UPGRADE_VERSION}/${NODE_UPGRADE_PLURAL}`;
