// The machine update activities that act on the Node object itself: preflight
// (the Cluster API Machine and its Node), cordon and uncordon (undoing only our
// own cordon, told apart by an annotation), the wait for the new kubelet, and
// the annotation a failed update leaves on the node. The executors read nodes
// through readNodeOrFail too.
import {
  CoreV1Api,
  CustomObjectsApi,
  PatchStrategy,
  setHeaderOptions,
  type KubeConfig,
  type V1Node,
  type V1NodeCondition,
} from '@kubernetes/client-node';
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { parseSkipPodSelector } from '../domain/drain.ts';
import { parseGoDuration } from '../domain/durations.ts';
import { rejectingPressure } from '../domain/node-pressure.ts';
import { policyKeys, valueOverLimit } from '../domain/policy-keys.ts';
import { apiClient } from '../platform/kube/clients.ts';
import { readCapiObject } from '../platform/kube/capi-read.ts';
import { isNotFound } from '../platform/kube/errors.ts';
import { retryOnConflict } from '../platform/kube/retry-on-conflict.ts';
import {
  MACHINE_UPDATE_FAILURES,
  seconds,
  truncate,
  waitCheckpoint,
  type MachineDeletionCheck,
  type WaitCheckpoint,
  type WorkloadKubeConfig,
} from './machine-update-common.ts';
import type { MachineRef, MachineUpdateActivities, PreflightResult } from './machine-update-types.ts';
import { clusterNodePacing } from './node-pacing.ts';
import { unavailableBudgetExceeded } from './unavailable-budget.ts';
import { kubeletMatches } from '../domain/cluster-health.ts';
import { CAPI_GROUP, CAPI_VERSION, type MachineObject } from '../platform/kube/capi-api.ts';

/** Node annotation recording that this extension cordoned the node (set in the same patch as the cordon). */
export const CORDONED_BY_ANNOTATION = 'upgrades.capi-orchestrator.io/cordoned-by';
export const CORDONED_BY_US = 'machine-update';
/** Node annotation a failed update leaves, with the reason (for MachineHealthCheck/remediation and people). */
export const UPDATE_FAILED_ANNOTATION = 'upgrades.capi-orchestrator.io/update-failed';
export const UPDATE_FAILED_MAX_LENGTH = 1024;

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
// Node conditions merge by type: a strategic merge patch leaves the kubelet's own alone.
const strategicMergePatch = setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch);

export type NodeActivities = Pick<
  MachineUpdateActivities,
  | 'preflight'
  | 'cordon'
  | 'uncordon'
  | 'waitForNodeVersion'
  | 'markNodeFailed'
  | 'setNodeUpdateFailed'
  | 'clearNodeUpdateFailed'
>;

/** Node condition a MachineHealthCheck can match (`unhealthyNodeConditions`) after a failed in-place update. */
export const UPDATE_FAILED_CONDITION = 'InPlaceUpdateFailed';

/** The node activities; Machines are read from `management`, nodes through `workload`. */
export function createNodeActivities(
  management: KubeConfig,
  workload: WorkloadKubeConfig,
  pollMs: number,
): NodeActivities {
  const custom = apiClient(management, CustomObjectsApi);

  return {
    async preflight({ machine }): Promise<PreflightResult> {
      const who = `Machine ${machine.namespace}/${machine.name}`;
      const obj = await readMachine(custom, machine);
      if (!obj) throw ApplicationFailure.nonRetryable(`${who} not found`, MACHINE_UPDATE_FAILURES.machineNotFound);
      const clusterName = obj.spec?.clusterName;
      if (!clusterName) {
        throw ApplicationFailure.nonRetryable(
          `${who} has no spec.clusterName`,
          MACHINE_UPDATE_FAILURES.machineHasNoCluster,
        );
      }
      const nodeName = obj.status?.nodeRef?.name;
      if (!nodeName) {
        throw ApplicationFailure.retryable(
          `${who}: machine has no nodeRef yet`,
          MACHINE_UPDATE_FAILURES.machineHasNoNode,
        );
      }
      const kc = await workload({ namespace: machine.namespace, name: clusterName });
      const core = apiClient(kc, CoreV1Api);
      const node = await readNodeOrFail(core, nodeName, `of ${who}`);
      if (node.metadata?.deletionTimestamp) {
        throw ApplicationFailure.nonRetryable(
          `node ${nodeName} of ${who} is being deleted`,
          MACHINE_UPDATE_FAILURES.nodeBeingDeleted,
        );
      }
      const ready = readyCondition(node);
      if (ready?.status !== 'True') {
        throw ApplicationFailure.retryable(
          `node ${nodeName} of ${who} is not Ready (${describeReady(node)})`,
          MACHINE_UPDATE_FAILURES.nodeNotReady,
        );
      }
      const pressure = rejectingPressure(node);
      if (pressure.length > 0) {
        throw ApplicationFailure.retryable(
          `node ${nodeName} of ${who} reports ${pressure.join(' and ')}: its kubelet rejects new pods (free the node's disk or processes)`,
          MACHINE_UPDATE_FAILURES.nodeUnderPressure,
        );
      }
      const blocked = await unavailableBudgetExceeded(custom, kc, machine.namespace, clusterName, obj);
      if (blocked) {
        throw ApplicationFailure.retryable(`${who} waits: ${blocked}`, MACHINE_UPDATE_FAILURES.maxUnavailableReached);
      }
      return { nodeName, clusterName, ...(await clusterDrainPolicy(custom, machine.namespace, clusterName)) };
    },

    async cordon({ cluster, nodeName }): Promise<{ wasUnschedulable: boolean }> {
      const core = apiClient(await workload(cluster), CoreV1Api);
      return await retryOnConflict(async () => {
        const node = await readNodeOrFail(core, nodeName);
        const ours = node.metadata?.annotations?.[CORDONED_BY_ANNOTATION] === CORDONED_BY_US;
        // Cordoned already: by us (an earlier attempt) it was not unschedulable before; by anyone else it was.
        if (node.spec?.unschedulable) return { wasUnschedulable: !ours };
        await core.patchNode(
          {
            name: nodeName,
            body: {
              metadata: {
                resourceVersion: node.metadata?.resourceVersion,
                annotations: { [CORDONED_BY_ANNOTATION]: CORDONED_BY_US },
              },
              spec: { unschedulable: true },
            },
          },
          mergePatch,
        );
        return { wasUnschedulable: false };
      });
    },

    async uncordon({ cluster, nodeName }): Promise<void> {
      const core = apiClient(await workload(cluster), CoreV1Api);
      await retryOnConflict(async () => {
        let node: V1Node;
        try {
          node = await core.readNode({ name: nodeName });
        } catch (err) {
          if (isNotFound(err)) return; // nothing left to give back
          throw err;
        }
        // Only our own cordon is undone; someone else's stays.
        if (node.metadata?.annotations?.[CORDONED_BY_ANNOTATION] !== CORDONED_BY_US) return;
        await core.patchNode(
          {
            name: nodeName,
            body: {
              metadata: {
                resourceVersion: node.metadata.resourceVersion,
                annotations: { [CORDONED_BY_ANNOTATION]: null },
              },
              spec: { unschedulable: false },
            },
          },
          mergePatch,
        );
      });
    },

    async waitForNodeVersion({ cluster, nodeName, version, timeoutMs }): Promise<void> {
      const ctx = Context.current();
      const startedAtMs = waitCheckpoint(ctx.info.heartbeatDetails)?.startedAtMs ?? Date.now();
      const core = apiClient(await workload(cluster), CoreV1Api);
      for (;;) {
        let observed: string;
        try {
          const node = await core.readNode({ name: nodeName });
          const kubelet = node.status?.nodeInfo?.kubeletVersion ?? '';
          const ready = readyCondition(node)?.status === 'True';
          if (kubelet && kubeletMatches(kubelet, version) && ready) return;
          observed = `kubelet ${kubelet || 'unknown'}, ${describeReady(node)}`;
        } catch (err) {
          if (!isNotFound(err)) throw err;
          observed = 'node not found'; // re-registering after the upgrade, perhaps
        }
        ctx.heartbeat({ startedAtMs, observed } satisfies WaitCheckpoint);
        if (Date.now() - startedAtMs > timeoutMs) {
          throw ApplicationFailure.nonRetryable(
            `node ${nodeName} did not report kubelet ${version} and Ready within ${seconds(timeoutMs)}: ${observed}`,
            MACHINE_UPDATE_FAILURES.nodeVersionTimeout,
          );
        }
        await ctx.sleep(pollMs);
      }
    },

    async setNodeUpdateFailed({ cluster, nodeName, reason }): Promise<void> {
      await setUpdateFailed(await workload(cluster), nodeName, reason);
    },

    async clearNodeUpdateFailed({ cluster, nodeName }): Promise<void> {
      await setUpdateFailed(await workload(cluster), nodeName, undefined);
    },

    async markNodeFailed({ cluster, nodeName, reason }): Promise<void> {
      const core = apiClient(await workload(cluster), CoreV1Api);
      try {
        await core.patchNode(
          {
            name: nodeName,
            body: {
              metadata: { annotations: { [UPDATE_FAILED_ANNOTATION]: truncate(reason, UPDATE_FAILED_MAX_LENGTH) } },
            },
          },
          mergePatch,
        );
      } catch (err) {
        if (!isNotFound(err)) throw err; // a node that is gone needs no mark
      }
    },
  };
}

/** A Machine gone or being deleted, read at most every few seconds per Machine (the drain asks each round). */
export function machineDeletionCheck(management: KubeConfig, maxAgeMs = 5_000): MachineDeletionCheck {
  const custom = apiClient(management, CustomObjectsApi);
  const seen = new Map<string, { atMs: number; deleting?: string }>();
  return async (machine) => {
    const key = `${machine.namespace}/${machine.name}`;
    let entry = seen.get(key);
    if (!entry || Date.now() - entry.atMs >= maxAgeMs) {
      const obj = await readMachine(custom, machine);
      const deleting = !obj
        ? `Machine ${key} was deleted`
        : obj.metadata?.deletionTimestamp
          ? `Machine ${key} is being deleted`
          : undefined;
      entry = { atMs: Date.now(), ...(deleting ? { deleting } : {}) };
      seen.set(key, entry);
      if (seen.size > 10_000) seen.clear();
    }
    if (entry.deleting) throw ApplicationFailure.nonRetryable(entry.deleting, MACHINE_UPDATE_FAILURES.machineDeleted);
  };
}

/** The Cluster API Machine, or undefined when it does not exist. */
export function readMachine(custom: CustomObjectsApi, machine: MachineRef): Promise<MachineObject | undefined> {
  return readCapiObject<MachineObject>(custom, 'machines', machine);
}

export async function readNodeOrFail(core: CoreV1Api, name: string, of = ''): Promise<V1Node> {
  try {
    return await core.readNode({ name });
  } catch (err) {
    if (isNotFound(err)) {
      throw ApplicationFailure.nonRetryable(
        `node ${name}${of ? ` ${of}` : ''} not found in the workload cluster`,
        MACHINE_UPDATE_FAILURES.nodeNotFound,
      );
    }
    throw err;
  }
}

function readyCondition(node: V1Node) {
  return node.status?.conditions?.find((c) => c.type === 'Ready');
}

function describeReady(node: V1Node): string {
  const ready = readyCondition(node);
  if (!ready) return 'no Ready condition';
  return `Ready=${ready.status}${ready.reason ? `: ${ready.reason}` : ''}`;
}

/**
 * Sets (reason given) or clears the failed-update mark: Node condition InPlaceUpdateFailed and
 * the update-failed annotation. Clearing a node that never had the mark writes nothing.
 */
async function setUpdateFailed(kc: KubeConfig, nodeName: string, reason: string | undefined): Promise<void> {
  const core = apiClient(kc, CoreV1Api);
  let node: V1Node;
  try {
    node = await core.readNode({ name: nodeName });
  } catch (err) {
    if (isNotFound(err)) return; // a node that is gone needs no mark
    throw err;
  }
  const marked =
    node.metadata?.annotations?.[UPDATE_FAILED_ANNOTATION] !== undefined ||
    node.status?.conditions?.some((c) => c.type === UPDATE_FAILED_CONDITION && c.status === 'True');
  if (reason === undefined && !marked) return;
  const message =
    reason === undefined ? 'the last in-place update succeeded' : truncate(reason, UPDATE_FAILED_MAX_LENGTH);
  const now = new Date();
  const mark: V1NodeCondition = {
    type: UPDATE_FAILED_CONDITION,
    status: reason === undefined ? 'False' : 'True',
    reason: reason === undefined ? 'UpdateSucceeded' : 'UpdateFailed',
    message,
    lastHeartbeatTime: now,
    lastTransitionTime: now,
  };
  try {
    await core.patchNodeStatus({ name: nodeName, body: { status: { conditions: [mark] } } }, strategicMergePatch);
  } catch (err) {
    if (!isNotFound(err)) throw err;
    // The node was just read, so this server routes no `status` subresource: CAPD's in-memory
    // API server (real CAPI tier), which stores status written through the object and merges
    // lists whole. Write the full list there; a real API server never gets here.
    const others = (node.status?.conditions ?? []).filter((c) => c.type !== UPDATE_FAILED_CONDITION);
    await core.patchNode({ name: nodeName, body: { status: { conditions: [...others, mark] } } }, mergePatch);
  }
  await core.patchNode(
    {
      name: nodeName,
      body: { metadata: { annotations: { [UPDATE_FAILED_ANNOTATION]: reason === undefined ? null : message } } },
    },
    mergePatch,
  );
}

/**
 * The Cluster's `pdb-force-drain-timeout`, `drain-skip-pod-selector` and pacing annotations, which override
 * the ExtensionConfig settings for that cluster (UpdateMachine carries no Cluster, so they are read here).
 */
async function clusterDrainPolicy(
  custom: CustomObjectsApi,
  namespace: string,
  name: string,
): Promise<Omit<PreflightResult, 'nodeName' | 'clusterName'>> {
  let cluster: { metadata?: { annotations?: Record<string, string> } };
  try {
    cluster = (await custom.getNamespacedCustomObject({
      group: CAPI_GROUP,
      version: CAPI_VERSION,
      plural: 'clusters',
      namespace,
      name,
    })) as typeof cluster;
  } catch (err) {
    if (isNotFound(err)) return {}; // the settings apply
    throw err;
  }
  const annotations = cluster.metadata?.annotations ?? {};
  const policy: Omit<PreflightResult, 'nodeName' | 'clusterName'> = clusterNodePacing(annotations, namespace, name);
  const pdbKey = policyKeys.pdbForceDrainTimeout.annotation;
  const pdbTooLong = valueOverLimit(
    `Cluster ${namespace}/${name} annotation ${pdbKey}`,
    policyKeys.pdbForceDrainTimeout.setting,
    annotations[pdbKey] ?? '',
  );
  if (pdbTooLong !== undefined) throw ApplicationFailure.nonRetryable(pdbTooLong, MACHINE_UPDATE_FAILURES.invalidInput);
  const pdb = annotations[pdbKey]?.trim();
  if (pdb) {
    const ms = parseGoDuration(pdb);
    if (ms === undefined)
      throw ApplicationFailure.nonRetryable(
        `Cluster ${namespace}/${name} annotation ${pdbKey}=${JSON.stringify(pdb)}: not a duration (use e.g. 30m, 2h)`,
        MACHINE_UPDATE_FAILURES.invalidInput,
      );
    policy.pdbForceDrainTimeoutMs = ms;
  }
  const skipKey = policyKeys.drainSkipPodSelector.annotation;
  const skip = annotations[skipKey]?.trim();
  if (skip) {
    const parsed = parseSkipPodSelector(`Cluster ${namespace}/${name} annotation ${skipKey}`, skip);
    if (!parsed.ok) throw ApplicationFailure.nonRetryable(parsed.message, MACHINE_UPDATE_FAILURES.invalidInput);
    policy.drainSkipPodSelector = skip;
  }
  return policy;
}
