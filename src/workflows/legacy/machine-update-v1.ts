// The machine update workflow as it was before v2 (no `machine-update-v2`
// marker in history), kept verbatim so executions started by earlier releases
// replay and finish on the code that started them. Nothing new starts here.
// Delete it once visibility shows no open run without the v2 marker, e.g.
//   temporal workflow list --query 'WorkflowType="machineUpdateWorkflow" AND ExecutionStatus="Running" AND TemporalChangeVersion!="machine-update-v2" AND TemporalChangeVersion!="machine-update-all-changes-1"'
import {
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  isCancellation,
  proxyActivities,
  setHandler,
  upsertMemo,
  upsertSearchAttributes,
} from '@temporalio/workflow';
import type { DrainOptions, MachineUpdateActivities } from '../../activities/machine-update-types.ts';
import { abortSignal, forceDrainSignal, machineUpdateStatusQuery, skipDrainSignal } from '../messages.ts';
import {
  MACHINE_UPDATE_MEMO_KEY,
  machineUpdateMessage,
  type MachineUpdateInput,
  type MachineUpdateMemo,
  type MachineUpdatePhase,
  type MachineUpdateStatus,
  type MachineUpdateStep,
} from '../../model/machine-update.ts';
import { NodeName, UpgradePhase } from '../search-attributes.ts';

const retry = { initialInterval: '2 seconds', backoffCoefficient: 2, maximumInterval: '1 minute', maximumAttempts: 10 };
const quick = proxyActivities<MachineUpdateActivities>({ startToCloseTimeout: '1 minute', retry });

class Aborted extends Error {}

export async function machineUpdateWorkflowV1(input: MachineUpdateInput): Promise<MachineUpdateStatus> {
  const who = `machine ${input.machine.namespace}/${input.machine.name}`;
  const status: MachineUpdateStatus = {
    machine: input.machine,
    version: input.version,
    phase: 'Updating',
    step: 'Preflight',
    message: machineUpdateMessage(input.machine, input.version, 'preflight checks'),
    upgraded: false,
    steps: [],
  };
  let abortReason: string | undefined;
  let skipDrain = false;
  let forceDrain = false;
  let lastMemo = '';
  let lastPhase: MachineUpdatePhase | undefined;
  const publish = () => {
    const text = JSON.stringify(status);
    if (text !== lastMemo) {
      const memo: MachineUpdateMemo = {
        phase: status.phase,
        step: status.step,
        message: status.message,
        ...(status.reason ? { reason: status.reason } : {}),
        ...(status.abortRequested ? { abortRequested: status.abortRequested } : {}),
      };
      upsertMemo({ [MACHINE_UPDATE_MEMO_KEY]: memo });
      lastMemo = text;
    }
    if (lastPhase !== status.phase) {
      upsertSearchAttributes([{ key: UpgradePhase, value: status.phase }]);
      lastPhase = status.phase;
    }
  };
  const now = () => new Date().toISOString();
  const enter = (step: MachineUpdateStep, message: string) => {
    const prev = status.steps.at(-1);
    if (prev && prev.status === 'Unknown') {
      prev.status = 'True';
      prev.completeTime = now();
      prev.lastTransitionTime = prev.completeTime;
    }
    status.step = step;
    status.message = machineUpdateMessage(input.machine, input.version, message);
    if (step !== 'Done')
      status.steps.push({
        type: step,
        status: 'Unknown',
        reason: 'InProgress',
        message,
        startTime: now(),
        lastTransitionTime: now(),
      });
    publish();
  };

  // Drains run in their own scope so on-call signals can stop or restart them.
  let drainScope: CancellationScope | undefined;
  setHandler(abortSignal, (arg) => {
    abortReason = arg?.reason?.trim() || 'aborted by operator';
    status.abortRequested = abortReason;
    drainScope?.cancel();
    publish();
  });
  setHandler(skipDrainSignal, () => {
    skipDrain = true;
    drainScope?.cancel();
  });
  setHandler(forceDrainSignal, () => {
    forceDrain = true;
    drainScope?.cancel();
  });
  setHandler(machineUpdateStatusQuery, () => status);
  const checkpoint = () => {
    if (abortReason !== undefined) throw new Aborted(abortReason);
  };

  // Heartbeats carry cancellation (skipDrain, forceDrain, abort) to the drain:
  // a short timeout keeps that prompt (the SDK sends them at 80% of it).
  const drainActivities = proxyActivities<MachineUpdateActivities>({
    startToCloseTimeout: input.drainTimeoutMs + 60_000,
    heartbeatTimeout: '20 seconds',
    retry,
  });
  const upgradeActivities = proxyActivities<MachineUpdateActivities>({
    startToCloseTimeout: input.nodeUpgradeTimeoutMs + 60_000,
    heartbeatTimeout: '1 minute',
    retry,
  });

  let cluster = { namespace: input.machine.namespace, name: input.clusterName };
  let cordonedByUs = false;
  try {
    publish();
    const pre = await quick.preflight({ machine: input.machine });
    status.nodeName = pre.nodeName;
    cluster = { namespace: input.machine.namespace, name: pre.clusterName };
    upsertSearchAttributes([{ key: NodeName, value: pre.nodeName }]);
    checkpoint();

    enter('Cordon', `cordoning node ${pre.nodeName}`);
    const { wasUnschedulable } = await quick.cordon({ cluster, nodeName: pre.nodeName });
    status.wasCordoned = wasUnschedulable;
    cordonedByUs = !wasUnschedulable;
    checkpoint();

    enter('Drain', `draining node ${pre.nodeName}`);
    for (;;) {
      if (skipDrain) break;
      const options: DrainOptions = {
        deleteEmptyDirData: input.deleteEmptyDirData,
        force: input.forceDrainUnmanagedPods,
        timeoutMs: input.drainTimeoutMs,
        ...(input.pdbForceDrainTimeoutMs !== undefined ? { pdbForceDrainTimeoutMs: input.pdbForceDrainTimeoutMs } : {}),
        ...(forceDrain ? { forceNow: true } : {}),
      };
      drainScope = new CancellationScope();
      try {
        await drainScope.run(() => drainActivities.drain({ cluster, nodeName: pre.nodeName, options }));
        break;
      } catch (err) {
        // A cancelled drain is an on-call decision (skip, force) or an abort.
        if (!isCancellation(err)) throw err;
        checkpoint();
      } finally {
        drainScope = undefined;
      }
    }
    checkpoint();

    enter('UpgradeNode', `upgrading node ${pre.nodeName} (${input.executor} executor)`);
    await upgradeActivities.upgradeNode({
      cluster,
      machine: input.machine,
      nodeName: pre.nodeName,
      version: input.version,
      files: input.files ?? [],
      executor: input.executor,
      requestName: `${input.machine.name}-${input.specHash}`.slice(0, 63).replace(/-+$/, ''),
      timeoutMs: input.nodeUpgradeTimeoutMs,
    });
    status.upgraded = true;

    enter('WaitForNode', `waiting for node ${pre.nodeName} to report ${input.version} and Ready`);
    await upgradeActivities.waitForNodeVersion({
      cluster,
      nodeName: pre.nodeName,
      version: input.version,
      timeoutMs: input.nodeUpgradeTimeoutMs,
    });

    if (cordonedByUs) {
      enter('Uncordon', `uncordoning node ${pre.nodeName}`);
      await quick.uncordon({ cluster, nodeName: pre.nodeName });
      cordonedByUs = false;
    }
    status.phase = 'Succeeded';
    enter('Done', 'done');
    status.message = `${who} updated to ${input.version}`;
    publish();
    return status;
  } catch (err) {
    if (err instanceof Aborted) {
      // Not yet upgraded: give the node back. Upgraded: it is at the new version; give it back too.
      if (cordonedByUs && status.nodeName) await quick.uncordon({ cluster, nodeName: status.nodeName });
      status.phase = 'Aborted';
      status.reason = err.message;
      status.message = `update of ${who} to ${input.version} aborted: ${err.message}`;
      publish();
      return status;
    }
    const reason = failureReason(err);
    status.phase = 'Failed';
    status.reason = reason;
    status.message = `update of ${who} to ${input.version} failed at ${status.step}: ${reason}`;
    const current = status.steps.at(-1);
    if (current) {
      current.status = 'False';
      current.reason = 'Failed';
      current.message = reason;
    }
    // Left cordoned on purpose: the node is in an unknown state; remediation decides.
    if (status.nodeName)
      await quick.markNodeFailed({ cluster, nodeName: status.nodeName, reason: status.message }).catch(() => undefined);
    publish();
    return status;
  }
}

/** The innermost failure message: deterministic, no stack. */
function failureReason(err: unknown): string {
  let e: unknown = err;
  while (e instanceof ActivityFailure && e.cause) e = e.cause;
  if (e instanceof ApplicationFailure) return e.message;
  return e instanceof Error ? e.message : String(e);
}
