// Superseding: a new desired spec for a machine stops the updates of its older specs first. Each
// older run still running is asked once to abort (not again while it says it was asked), and the
// new run starts only once none is left, so two updates never work on one machine.
import type { Client } from '@temporalio/client';
import { workflowTypes } from '../../../model/workflow-types.ts';
import { ClusterNamespace, MachineName } from '../../../model/search-attributes.ts';
import { machineUpdateMemo, readMemo } from '../../../platform/temporal/memo.ts';
import { abortSignal } from '../../../workflows/messages.ts';

/**
 * Asks every running update of `machine` other than `workflowId` to abort (superseded by the spec
 * `hash`); returns how many there were: above 0, the caller waits for them to stop.
 */
export async function supersedeOlderMachineUpdates(
  client: Client,
  machine: { namespace: string; name: string },
  workflowId: string,
  hash: string,
): Promise<number> {
  const query = [
    `${ClusterNamespace.name} = ${JSON.stringify(machine.namespace)}`,
    `${MachineName.name} = ${JSON.stringify(machine.name)}`,
    `WorkflowType = "${workflowTypes.machineUpdate}"`,
    'ExecutionStatus = "Running"',
  ].join(' AND ');
  let older = 0;
  for await (const wf of client.workflow.list({ query })) {
    if (wf.workflowId === workflowId) continue;
    older++;
    const memo = readMemo(machineUpdateMemo, wf.memo);
    if (!memo?.abortRequested)
      await client.workflow
        .getHandle(wf.workflowId)
        .signal(abortSignal, { reason: `superseded by a newer desired spec (${hash})` });
  }
  return older;
}
