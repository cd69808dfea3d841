// In-place hooks. CanUpdateMachine/CanUpdateMachineSet are pure (patches for
// what we can apply in place). UpdateMachine starts or reads the machine's
// update workflow; like the lifecycle hooks, a poll that brings nothing new
// only reads the memo. Anything that starts, queues or signals first passes the
// call's request check (request-checks.ts), once per call.
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import {
  computeMachinePatches,
  computeMachineSetPatches,
  decodeJsonPatch,
  specHash,
  type Declined,
  type JsonPatch,
} from '../../../domain/in-place.ts';
import { allowedForExecutor, resolveInPlacePolicy, type InPlacePolicy } from '../../../domain/in-place-policy.ts';
import { resolveMachineUpdatePolicy } from '../../../domain/machine-update-policy.ts';
import { tryParseVersion } from '../../../domain/versions.ts';
import { abortSignal, retrySignal } from '../../../workflows/messages.ts';
import {
  machineUpdateFailure,
  machineUpdateMessage,
  machineUpdateQueuedDetail,
  machineUpdateWorkflowId,
  type MachineObjectRefs,
  type MachineUpdateInput,
  type MachineUpdateMemo,
  type TypedObjectRef,
} from '../../../model/machine-update.ts';
import type { RawObject } from '../../hooks/contract.ts';
import { ClusterNamespace, MachineName, machineUpdateSearchAttributes } from '../../../model/search-attributes.ts';
import { workflowTypes } from '../../../model/workflow-types.ts';
import { queuedMachineUpdate, queueMachineUpdate } from './machine-update-queue.ts';
import { withinDeadline } from '../temporal-calls.ts';
import { HookFailure } from '../../hooks/errors.ts';
import type { HookImplementation } from '../../hooks/hook-route.ts';
import type { NodeAgentCheck } from '../../../platform/kube/node-agents.ts';
import {
  machineKindOfTemplate,
  type NodeUpgraderCheck,
  type UpgraderAnswer,
} from '../../../platform/kube/node-upgraders.ts';
import type { InPlaceHandlers } from './routes.ts';
import { updateMachineRule, type RequestChecks } from '../request-checks.ts';
import { CLUSTER_NAME_LABEL } from '../../../platform/kube/capi-api.ts';
import { machineUpdateMemo, readMemo } from '../../../platform/temporal/memo.ts';

const RETRY_AFTER_SECONDS = 10;

const NOT_IN_PLACE = 'not in place (rolled out instead)';

function declinedMessage(declined: readonly Declined[]): { message?: string } {
  if (declined.length === 0) return {};
  return {
    message: `${NOT_IN_PLACE}: ${declined.map((d) => `${d.object} ${d.path}: ${d.reason}`).join('; ')}`,
  };
}

/** The in-place allow-list from the settings, cut to what the configured executor applies (management: later, by its upgrader). */
function inPlacePolicyFor(settings: Readonly<Record<string, string>>) {
  const policy = resolveInPlacePolicy(settings);
  if (!policy.ok) throw new HookFailure(policy.message);
  const updates = resolveMachineUpdatePolicy(settings);
  if (!updates.ok) throw new HookFailure(updates.message);
  const executor = updates.policy.executor;
  return { policy: executor === 'management' ? policy.policy : allowedForExecutor(policy.policy, executor), executor };
}

/** What one CanUpdate* call computes, for any allow-list. */
type Compute<P extends Record<string, JsonPatch | undefined>> = (policy: InPlacePolicy) => {
  patches: P;
  declined: readonly Declined[];
};

/** Ops of `full` that `cut` leaves out, as declined differences (`machinePatch` → object `machine`). */
function undeclared(full: object, cut: object, reason: string): Declined[] {
  const declined: Declined[] = [];
  const paths = (patch: unknown) => (patch ? decodeJsonPatch(patch as JsonPatch).map((op) => op.path) : []);
  for (const [field, patch] of Object.entries(full)) {
    const kept = new Set(paths((cut as Record<string, unknown>)[field]));
    for (const path of paths(patch))
      if (!kept.has(path)) declined.push({ object: field.replace(/Patch$/, ''), path, reason });
  }
  return declined;
}

/**
 * CanUpdateMachine / CanUpdateMachineSet: pure patches for what the executor applies in place.
 * Under `delegate` nothing is claimed unless a node agent is alive to apply it (`nodeAgents`;
 * without one the api cannot tell, and says so): a request nobody serves would stall the rollout.
 * Under `management` the same holds for the infrastructure kind's node upgrader (`nodeUpgraders`),
 * and only what it declares it applies is claimed.
 */
export function createCanUpdateHandlers(
  nodeAgents: NodeAgentCheck | undefined,
  nodeUpgraders?: NodeUpgraderCheck,
): Pick<InPlaceHandlers, 'CanUpdateMachine' | 'CanUpdateMachineSet'> {
  const agentMissing = async (
    cluster: { namespace: string; name: string | undefined },
    nodeName: string | undefined,
  ): Promise<string | undefined> => {
    if (!nodeAgents)
      return 'nodeUpgradeExecutor=delegate, and this api has no management cluster access to check for node agents (MANAGEMENT_KUBECONFIG)';
    if (!cluster.name) return 'nodeUpgradeExecutor=delegate, and the request names no cluster to check for node agents';
    return await nodeAgents.missing({ namespace: cluster.namespace, name: cluster.name }, nodeName);
  };
  const upgraderOf = async (kind: string | undefined): Promise<UpgraderAnswer & { kind?: string }> => {
    if (!nodeUpgraders)
      return {
        ok: false,
        reason:
          'nodeUpgradeExecutor=management, and this api has no management cluster access to check for node upgraders (MANAGEMENT_KUBECONFIG)',
      };
    if (!kind)
      return { ok: false, reason: 'nodeUpgradeExecutor=management, and the request names no infrastructure kind' };
    return { ...(await nodeUpgraders.declared(kind)), kind };
  };
  /** The patches, unless the executor has nobody to apply them (then a message saying why). */
  const answer = async <P extends Record<string, JsonPatch | undefined>>(
    settings: Readonly<Record<string, string>>,
    compute: Compute<P>,
    cluster: { namespace: string; name: string | undefined },
    nodeName: string | undefined,
    infrastructureKind: string | undefined,
  ) => {
    const { policy, executor } = inPlacePolicyFor(settings);
    const computed = compute(policy);
    const claims = Object.keys(computed.patches).length > 0;
    if (claims && executor === 'delegate') {
      const missing = await agentMissing(cluster, nodeName);
      if (missing) return { status: 'Success' as const, message: `${NOT_IN_PLACE}: ${missing}` };
    }
    if (claims && executor === 'management') {
      const upgrader = await upgraderOf(infrastructureKind);
      if (!upgrader.ok) return { status: 'Success' as const, message: `${NOT_IN_PLACE}: ${upgrader.reason}` };
      const cut = compute(allowedForExecutor(policy, 'management', upgrader.paths));
      const reason = `not among the paths the node upgrader for ${upgrader.kind} applies (Lease ${upgrader.lease})`;
      const declined = [...cut.declined, ...undeclared(computed.patches, cut.patches, reason)];
      return { status: 'Success' as const, ...cut.patches, ...declinedMessage(declined) };
    }
    return { status: 'Success' as const, ...computed.patches, ...declinedMessage(computed.declined) };
  };
  return {
    CanUpdateMachine: async (request, ctx) => {
      const { metadata, spec, status } = request.current.machine;
      return await answer(
        ctx.settings,
        (policy) => computeMachinePatches(request.current, request.desired, policy),
        { namespace: metadata.namespace, name: spec.clusterName ?? metadata.labels?.[CLUSTER_NAME_LABEL] },
        status?.nodeRef?.name,
        request.current.infrastructureMachine.kind,
      );
    },
    CanUpdateMachineSet: async (request, ctx) => {
      const { metadata, spec } = request.current.machineSet;
      const template = request.current.infrastructureMachineTemplate.kind;
      return await answer(
        ctx.settings,
        (policy) => computeMachineSetPatches(request.current, request.desired, policy),
        {
          namespace: metadata.namespace,
          name: spec.clusterName ?? spec.template.spec.clusterName ?? metadata.labels?.[CLUSTER_NAME_LABEL],
        },
        undefined,
        template === undefined ? undefined : machineKindOfTemplate(template),
      );
    },
  };
}

/** `{apiVersion, kind, name}` of an object CAPI sent, when it names all three. */
function typedRef(obj: RawObject | undefined): TypedObjectRef | undefined {
  const name = obj?.metadata?.name;
  return obj?.apiVersion && obj.kind && name ? { apiVersion: obj.apiVersion, kind: obj.kind, name } : undefined;
}

/** What the management executor's request names besides the Machine (desired: CAPI applied it before the call). */
function objectRefsOf(desired: { infrastructureMachine?: RawObject; bootstrapConfig?: RawObject }): MachineObjectRefs {
  const infrastructureMachine = typedRef(desired.infrastructureMachine);
  const bootstrapConfig = typedRef(desired.bootstrapConfig);
  return {
    ...(infrastructureMachine ? { infrastructureMachine } : {}),
    ...(bootstrapConfig ? { bootstrapConfig } : {}),
  };
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
  const answer = async (
    workflowId: string,
    machine: { namespace: string; name: string },
    version: string,
    memo: MachineUpdateMemo,
    running: boolean,
    checked: () => Promise<void>,
  ) => {
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
  };
  const runningQuery = (filters: string[]) =>
    [...filters, `WorkflowType = "${workflowTypes.machineUpdate}"`, 'ExecutionStatus = "Running"'].join(' AND ');

  const updateMachine: HookImplementation<'UpdateMachine'> = async (request, ctx) => {
    const inPlace = resolveInPlacePolicy(ctx.settings);
    if (inPlace.ok && !inPlace.policy.enabled) {
      throw new HookFailure(
        'in-place updates are disabled by the setting inPlaceUpdates; no machine update was started',
      );
    }
    const resolved = resolveMachineUpdatePolicy(ctx.settings);
    if (!resolved.ok) throw new HookFailure(resolved.message);
    const policy = resolved.policy;
    const machine = {
      namespace: request.desired.machine.metadata.namespace,
      name: request.desired.machine.metadata.name,
    };
    const version = request.desired.machine.spec.version;
    if (!version || !tryParseVersion(version).ok)
      throw new HookFailure(
        `desired.machine.spec.version ${JSON.stringify(version ?? '')} is not a Kubernetes version`,
      );
    const clusterName =
      request.desired.machine.spec.clusterName ?? request.desired.machine.metadata.labels?.[CLUSTER_NAME_LABEL];
    if (!clusterName) throw new HookFailure('desired.machine.spec.clusterName is missing');
    const hash = specHash(request.desired);
    const workflowId = machineUpdateWorkflowId(machine, hash);
    // Files are read from the KubeadmConfig by the activities: their contents (often
    // secrets) never enter workflow history. CAPI applied the desired one before this call.
    const configRef = request.desired.machine.spec.bootstrap?.configRef;
    const bootstrapConfigName = configRef?.name ?? request.desired.bootstrapConfig?.metadata?.name;
    const checked = opts.checks.before(
      ctx,
      updateMachineRule({
        ...machine,
        clusterName,
        version,
        ...(configRef ? { bootstrapConfigRef: configRef as { apiGroup?: string; kind?: string; name?: string } } : {}),
      }),
    );

    const input: MachineUpdateInput = {
      machine,
      clusterName,
      version,
      ...(bootstrapConfigName ? { bootstrapConfig: { namespace: machine.namespace, name: bootstrapConfigName } } : {}),
      specHash: hash,
      executor: policy.executor,
      ...(policy.executor === 'management' ? { objectRefs: objectRefsOf(request.desired) } : {}),
      deleteEmptyDirData: policy.deleteEmptyDirData,
      forceDrainUnmanagedPods: policy.forceDrainUnmanagedPods,
      drainTimeoutMs: policy.drainTimeoutMs,
      nodeUpgradeTimeoutMs: policy.nodeUpgradeTimeoutMs,
      retryBackoffMs: policy.retryBackoffMs,
      preflightTimeoutMs: policy.preflightTimeoutMs,
      // Held by the cluster's slots workflow: a hard limit across api replicas (a count here would race).
      maxConcurrentMachineUpdates: policy.maxConcurrentMachineUpdates,
      ...(policy.pdbForceDrainTimeoutMs !== undefined ? { pdbForceDrainTimeoutMs: policy.pdbForceDrainTimeoutMs } : {}),
      ...(policy.drainSkipPodSelector !== undefined ? { drainSkipPodSelector: policy.drainSkipPodSelector } : {}),
      // Only the keys set: runs without pacing keep their input (and their commands) as before.
      ...policy.pacing,
    };
    const limit = policy.maxConcurrentMachineUpdates;
    const queuedMessage = machineUpdateMessage(machine, version, machineUpdateQueuedDetail(clusterName, limit));

    return await withinDeadline(client, ctx, async () => {
      // An earlier run with this id ended without an answer (terminated, timed out): a new run may reuse the id.
      let restart = false;
      try {
        const description = await client.workflow.getHandle(workflowId).describe();
        const memo = readMemo(machineUpdateMemo, description.memo);
        const running = description.status.name === 'RUNNING';
        // Closed runs: a success or an abort is final for this desired spec; anything else
        // (terminated, failed, timed out, a failure nobody retried for days) starts a new run below.
        const final = memo?.phase === 'Succeeded' || memo?.phase === 'Aborted';
        if (running || final) {
          if (memo) return await answer(workflowId, machine, version, memo, running, checked);
          return {
            status: 'Success',
            message: machineUpdateMessage(machine, version, 'preflight checks'),
            retryAfterSeconds: RETRY_AFTER_SECONDS,
          };
        }
        restart = true;
      } catch (err) {
        if (!(err instanceof WorkflowNotFoundError)) throw err;
      }
      const queued = limit > 0 ? await queuedMachineUpdate(client, input, workflowId, ctx.deadline) : undefined;
      if (queued !== undefined) {
        return {
          status: 'Success',
          message: queued === 'waiting' ? queuedMessage : machineUpdateMessage(machine, version, 'preflight checks'),
          retryAfterSeconds: RETRY_AFTER_SECONDS,
        };
      }
      // Nothing runs or waits for this desired spec: what follows writes, so the request must hold up.
      await checked();
      // An older desired spec for the same machine: stop it first, and wait until it has.
      const older: string[] = [];
      for await (const wf of client.workflow.list({
        query: runningQuery([
          `${ClusterNamespace.name} = ${JSON.stringify(machine.namespace)}`,
          `${MachineName.name} = ${JSON.stringify(machine.name)}`,
        ]),
      })) {
        if (wf.workflowId === workflowId) continue;
        older.push(wf.workflowId);
        const memo = readMemo(machineUpdateMemo, wf.memo);
        if (!memo?.abortRequested)
          await client.workflow
            .getHandle(wf.workflowId)
            .signal(abortSignal, { reason: `superseded by a newer desired spec (${hash})` });
      }
      if (older.length > 0) {
        return {
          status: 'Success',
          message: machineUpdateMessage(machine, version, 'waiting for the previous update of this machine to stop'),
          retryAfterSeconds: RETRY_AFTER_SECONDS,
        };
      }
      if (limit > 0) {
        // The cluster's slots workflow starts the run when its turn comes.
        await queueMachineUpdate(client, taskQueue, { workflowId, input, restart });
        return { status: 'Success', message: queuedMessage, retryAfterSeconds: RETRY_AFTER_SECONDS };
      }
      await client.workflow.start(workflowTypes.machineUpdate, {
        workflowId,
        taskQueue,
        args: [input],
        workflowIdConflictPolicy: 'USE_EXISTING',
        typedSearchAttributes: machineUpdateSearchAttributes(input),
      });
      return {
        status: 'Success',
        message: machineUpdateMessage(machine, version, 'preflight checks'),
        retryAfterSeconds: RETRY_AFTER_SECONDS,
      };
    });
  };

  return { ...createCanUpdateHandlers(opts.nodeAgents, opts.nodeUpgraders), UpdateMachine: updateMachine };
}
