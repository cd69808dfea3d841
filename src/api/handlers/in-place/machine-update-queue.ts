// A machine update under maxConcurrentMachineUpdates is not started by the api:
// it is queued with its cluster's slots workflow, which starts the run when it
// lets it in. 200 machines asked at once are 200 signals to one workflow, not
// 200 runs that would only wait (and slow the first ones down).
import type { Client } from '@temporalio/client';
import {
  machineUpdateSlotsWorkflowId,
  type MachineUpdateInput,
  type MachineUpdateSlotsInput,
  type MachineUpdateSlotsStatus,
} from '../../../model/machine-update.ts';
import { acquireSlotSignal, machineUpdateSlotsQuery } from '../../../workflows/messages.ts';
import { ClusterName, ClusterNamespace } from '../../../model/search-attributes.ts';
import { workflowTypes } from '../../../model/workflow-types.ts';

/** How long a hook waits for the slots workflow to answer where an update is (it needs a worker). */
const QUEUE_QUERY_MS = 2_000;

function slotsIdOf(input: MachineUpdateInput): string {
  return machineUpdateSlotsWorkflowId({ namespace: input.machine.namespace, name: input.clusterName });
}

/**
 * Queues the update with its cluster's slots workflow, starting that workflow if none
 * runs. Asking again for an update already in line changes nothing there.
 * `restart`: an earlier run with this id ended without an answer, a new one may reuse it.
 */
export async function queueMachineUpdate(
  client: Client,
  taskQueue: string,
  update: { workflowId: string; input: MachineUpdateInput; restart?: boolean },
): Promise<void> {
  const { input } = update;
  const limit = input.maxConcurrentMachineUpdates ?? 0;
  const cluster = { namespace: input.machine.namespace, name: input.clusterName };
  const initial: MachineUpdateSlotsInput = { cluster, limit, holders: [], waiting: [] };
  await client.workflow.signalWithStart(workflowTypes.machineUpdateSlots, {
    workflowId: slotsIdOf(input),
    taskQueue,
    args: [initial],
    signal: acquireSlotSignal,
    signalArgs: [{ workflowId: update.workflowId, limit, start: input, ...(update.restart ? { restart: true } : {}) }],
    typedSearchAttributes: [
      { key: ClusterNamespace, value: cluster.namespace },
      { key: ClusterName, value: cluster.name },
    ],
  });
}

/**
 * Where the slots workflow has the update: waiting its turn, let in (its run being
 * started), or unknown (not there, no slots workflow, or no worker answered in time:
 * queueing it again is harmless).
 */
export async function queuedMachineUpdate(
  client: Client,
  input: MachineUpdateInput,
  workflowId: string,
  deadline: number,
): Promise<'waiting' | 'letIn' | undefined> {
  let slots: MachineUpdateSlotsStatus;
  try {
    slots = await client.connection.withDeadline(Math.min(deadline, Date.now() + QUEUE_QUERY_MS), () =>
      client.workflow.getHandle(slotsIdOf(input)).query(machineUpdateSlotsQuery),
    );
  } catch {
    return undefined;
  }
  if (slots.waiting.includes(workflowId)) return 'waiting';
  if (slots.holders.includes(workflowId)) return 'letIn';
  return undefined;
}
