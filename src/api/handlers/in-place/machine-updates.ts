// UpdateMachine starts or reads the machine's update workflow; like the lifecycle hooks, a poll
// that brings nothing new only reads the memo. Anything that starts, queues or signals first
// passes the call's request check (request-checks.ts), once per call. The request's mapping is
// machine-update-call.ts, superseding older specs supersede-machine-updates.ts, and
// CanUpdateMachine / CanUpdateMachineSet are can-update.ts.
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { retrySignal } from '../../../workflows/messages.ts';
import {
  machineUpdateFailure,
  machineUpdateMessage,
  machineUpdateQueuedDetail,
  type MachineUpdateMemo,
} from '../../../model/machine-update.ts';
import { machineUpdateSearchAttributes } from '../../../model/search-attributes.ts';
import { workflowTypes } from '../../../model/workflow-types.ts';
import { queuedMachineUpdate, queueMachineUpdate } from './machine-update-queue.ts';
import { withinDeadline } from '../temporal-calls.ts';
import type { HookResult } from '../../hooks/contract.ts';
import type { HookImplementation } from '../../hooks/hook-route.ts';
import type { NodeAgentCheck } from '../../../platform/kube/node-agents.ts';
import type { NodeUpgraderCheck } from '../../../platform/kube/node-upgraders.ts';
import type { InPlaceHandlers } from './routes.ts';
import type { RequestChecks } from '../request-checks.ts';
import { machineUpdateMemo, readMemo } from '../../../platform/temporal/memo.ts';
import { createCanUpdateHandlers } from './can-update.ts';
import { machineUpdateCall, type MachineUpdateCall } from './machine-update-call.ts';
import { supersedeOlderMachineUpdates } from './supersede-machine-updates.ts';

const RETRY_AFTER_SECONDS = 10;

/** UpdateMachine is a retry hook: every answer says when to call again. */
type Answer = HookResult<'UpdateMachine'> & { retryAfterSeconds: number };

/** What a run's memo answers; a failed run CAPI still wants, whose backoff has passed, is asked to retry. */
async function memoAnswer(
  client: Client,
  call: MachineUpdateCall,
  memo: MachineUpdateMemo,
  running: boolean,
  checked: () => Promise<void>,
): Promise<Answer> {
  const { machine, version, workflowId } = call;
  if (memo.phase === 'Succeeded') return { status: 'Success' as const, message: memo.message, retryAfterSeconds: 0 };
  const retryDue = memo.retryNotBefore !== undefined && Date.parse(memo.retryNotBefore) <= Date.now();
  // A run that ended (a failure nobody retried for days) can't be signalled: it answers as it ended.
  if (running && memo.phase === 'Failed' && (memo.retryRequested || retryDue)) {
    // CAPI still wants this update and the backoff has passed: start over (signalled once).
    if (!memo.retryRequested) {
      await checked();
      await client.workflow.getHandle(workflowId).signal(retrySignal);
    }
    return {
      status: 'Success' as const,
      message: `${machineUpdateFailure(machine, version, memo.step, memo.reason ?? 'unknown')}; retrying`,
      retryAfterSeconds: RETRY_AFTER_SECONDS,
    };
  }
  if (memo.phase === 'Failed' || memo.phase === 'Aborted')
    return { status: 'Failure' as const, message: memo.message, retryAfterSeconds: 0 };
  return { status: 'Success' as const, message: memo.message, retryAfterSeconds: RETRY_AFTER_SECONDS };
}

const waiting = (call: MachineUpdateCall, detail: string): Answer => ({
  status: 'Success',
  message: machineUpdateMessage(call.machine, call.version, detail),
  retryAfterSeconds: RETRY_AFTER_SECONDS,
});

/**
 * The run of this desired spec, if one answers: a running one, or one that ended final (a success
 * or an abort). `restart` when an earlier run with this id ended without an answer (terminated,
 * failed, timed out, a failure nobody retried for days): a new run may reuse the id.
 */
async function existingRun(
  client: Client,
  call: MachineUpdateCall,
  checked: () => Promise<void>,
): Promise<{ answer: Answer } | { restart: boolean }> {
  try {
    const description = await client.workflow.getHandle(call.workflowId).describe();
    const memo = readMemo(machineUpdateMemo, description.memo);
    const running = description.status.name === 'RUNNING';
    const final = memo?.phase === 'Succeeded' || memo?.phase === 'Aborted';
    if (!running && !final) return { restart: true };
    if (memo) return { answer: await memoAnswer(client, call, memo, running, checked) };
    return { answer: waiting(call, 'preflight checks') };
  } catch (err) {
    if (!(err instanceof WorkflowNotFoundError)) throw err;
    return { restart: false };
  }
}

/** Starts (or queues) the update of this desired spec, or answers from the run that already has it. */
async function updateOrRead(
  client: Client,
  taskQueue: string,
  call: MachineUpdateCall,
  deadline: number,
  checked: () => Promise<void>,
): Promise<Answer> {
  const { input, workflowId, limit } = call;
  const existing = await existingRun(client, call, checked);
  if ('answer' in existing) return existing.answer;
  const queuedMessage = machineUpdateMessage(
    call.machine,
    call.version,
    machineUpdateQueuedDetail(call.clusterName, limit),
  );
  const queued = limit > 0 ? await queuedMachineUpdate(client, input, workflowId, deadline) : undefined;
  if (queued !== undefined)
    return queued === 'waiting'
      ? { status: 'Success', message: queuedMessage, retryAfterSeconds: RETRY_AFTER_SECONDS }
      : waiting(call, 'preflight checks');
  // Nothing runs or waits for this desired spec: what follows writes, so the request must hold up.
  await checked();
  // An older desired spec for the same machine: stop it first, and wait until it has.
  if ((await supersedeOlderMachineUpdates(client, call.machine, workflowId, call.hash)) > 0)
    return waiting(call, 'waiting for the previous update of this machine to stop');
  if (limit > 0) {
    // The cluster's slots workflow starts the run when its turn comes.
    await queueMachineUpdate(client, taskQueue, { workflowId, input, restart: existing.restart });
    return { status: 'Success', message: queuedMessage, retryAfterSeconds: RETRY_AFTER_SECONDS };
  }
  await client.workflow.start(workflowTypes.machineUpdate, {
    workflowId,
    taskQueue,
    args: [input],
    workflowIdConflictPolicy: 'USE_EXISTING',
    typedSearchAttributes: machineUpdateSearchAttributes(input),
  });
  return waiting(call, 'preflight checks');
}

export function createInPlaceHandlers(opts: {
  client: Client;
  taskQueue: string;
  /** Checked against the management cluster before anything starts or is signalled (or explicitly off). */
  checks: RequestChecks;
  /** Node agent Leases in workload clusters (delegate executor); unset = cannot check, so not in place. */
  nodeAgents?: NodeAgentCheck;
  /** Node upgrader Leases in the management cluster (management executor); unset = not in place. */
  nodeUpgraders?: NodeUpgraderCheck;
}): InPlaceHandlers {
  const { client, taskQueue } = opts;
  const updateMachine: HookImplementation<'UpdateMachine'> = async (request, ctx) => {
    const call = machineUpdateCall(request, ctx.settings);
    const checked = opts.checks.before(ctx, call.rule);
    return await withinDeadline(client, ctx, () => updateOrRead(client, taskQueue, call, ctx.deadline, checked));
  };
  return { ...createCanUpdateHandlers(opts.nodeAgents, opts.nodeUpgraders), UpdateMachine: updateMachine };
}
