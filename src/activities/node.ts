// The machine update activities that act on the Node object itself: preflight
// (the Cluster API Machine and its Node), cordon and uncordon (undoing only our
// own cordon, told apart by an annotation), the wait for the new kubelet, and
// the annotation a failed update leaves on the node. The preflight's checks are
// in node-preflight.ts, the Machine and Node reads they share in node-reads.ts.
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
import { apiClient } from '../platform/kube/clients.ts';
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
import type { MachineUpdateActivities, PreflightResult } from './machine-update-types.ts';
import { preflightMachine } from './node-preflight.ts';
import { describeReady, readMachine, readNodeOrFail, readyCondition } from './node-reads.ts';
import { kubeletMatches } from '../domain/cluster-health.ts';

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
      return await preflightMachine(custom, workload, machine);
    },

    async cordon({ cluster, nodeName }): Promise<{ wasUnschedulable: boolean }> {
      return await cordonNode(apiClient(await workload(cluster), CoreV1Api), nodeName);
    },

    async uncordon({ cluster, nodeName }): Promise<void> {
      await uncordonNode(apiClient(await workload(cluster), CoreV1Api), nodeName);
    },

    async waitForNodeVersion(input): Promise<void> {
      await waitForKubelet(apiClient(await workload(input.cluster), CoreV1Api), input, pollMs);
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

/** Cordons the node, marked as ours; whether it was unschedulable before (by someone else). */
async function cordonNode(core: CoreV1Api, nodeName: string): Promise<{ wasUnschedulable: boolean }> {
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
}

/** Undoes our own cordon; someone else's, or a node that is gone, is left alone. */
async function uncordonNode(core: CoreV1Api, nodeName: string): Promise<void> {
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
}

/** Polls the node until its kubelet reports `version` and Ready, heartbeating what it sees; fails after timeoutMs. */
async function waitForKubelet(
  core: CoreV1Api,
  { nodeName, version, timeoutMs }: Parameters<MachineUpdateActivities['waitForNodeVersion']>[0],
  pollMs: number,
): Promise<void> {
  const ctx = Context.current();
  const startedAtMs = waitCheckpoint(ctx.info.heartbeatDetails)?.startedAtMs ?? Date.now();
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
