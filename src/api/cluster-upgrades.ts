// Lifecycle hooks backed by the cluster upgrade workflow. A call reads the
// workflow's memo (describe: no history, no worker needed) and answers from
// the gate it finds; only a call that brings something new reaches the
// workflow, as a `recordHook` update whose validator rejects repeats.
// Every Temporal call runs under the hook's own deadline.
import {
  WorkflowExecutionAlreadyStartedError,
  WorkflowNotFoundError,
  WorkflowUpdateFailedError,
  type Client,
  type WorkflowExecutionDescription,
} from '@temporalio/client';
import { resolveUpgradePolicy, type UpgradePolicy } from '../domain/upgrade-policy.ts';
import { tryParseVersion } from '../domain/versions.ts';
import {
  abortSignal,
  CLUSTER_UPGRADE_MEMO_KEY,
  clusterUpgradeWorkflowId,
  gateKey,
  queuedGate,
  recordHookUpdate,
  type ClusterRef,
  type ClusterUpgradeInput,
  type ClusterUpgradeMemo,
  type Gate,
  type HookCall,
  type UpgradeHook,
} from '../workflows/messages.ts';
import { ClusterName, ClusterNamespace, TargetVersion, UpgradePhase } from '../workflows/search-attributes.ts';
import type { Cluster } from './contract.ts';
import { HookFailure } from './errors.ts';
import type { HookContext, HookImplementation } from './hook-route.ts';
import type { LifecycleHandlers } from './routes/lifecycle.ts';
import { withinDeadline } from './temporal-calls.ts';

export interface ClusterUpgradeBackendOptions {
  client: Client;
  taskQueue: string;
}

type RetryResult = { status: 'Success' | 'Failure'; message?: string; retryAfterSeconds: number };

function clusterRef(cluster: Cluster): ClusterRef {
  return { namespace: cluster.metadata.namespace, name: cluster.metadata.name };
}

function answer(gate: Gate): RetryResult {
  if (gate.state === 'Open') return { status: 'Success', message: gate.message, retryAfterSeconds: 0 };
  if (gate.state === 'Failed') return { status: 'Failure', message: gate.message, retryAfterSeconds: 0 };
  return { status: 'Success', message: gate.message, retryAfterSeconds: Math.max(1, gate.retryAfterSeconds) };
}

function requireVersion(field: string, value: string): string {
  if (!tryParseVersion(value).ok)
    throw new HookFailure(`${field} ${JSON.stringify(value)} is not a Kubernetes version`);
  return value;
}

export function createClusterUpgradeHandlers(opts: ClusterUpgradeBackendOptions): LifecycleHandlers {
  const { client, taskQueue } = opts;

  const readMemo = async (workflowId: string): Promise<{ memo?: ClusterUpgradeMemo; running: boolean } | undefined> => {
    let description: WorkflowExecutionDescription;
    try {
      description = await client.workflow.getHandle(workflowId).describe();
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) return undefined;
      throw err;
    }
    const memo = description.memo?.[CLUSTER_UPGRADE_MEMO_KEY] as ClusterUpgradeMemo | undefined;
    return { ...(memo ? { memo } : {}), running: description.status.name === 'RUNNING' };
  };

  const start = async (cluster: ClusterRef, call: HookCall): Promise<Gate> => {
    const input: ClusterUpgradeInput = { cluster, firstCall: call };
    await client.workflow.start('clusterUpgradeWorkflow', {
      workflowId: clusterUpgradeWorkflowId(cluster),
      taskQueue,
      args: [input],
      // Two api replicas seeing the same first call start one workflow.
      workflowIdConflictPolicy: 'USE_EXISTING',
      typedSearchAttributes: [
        { key: ClusterNamespace, value: cluster.namespace },
        { key: ClusterName, value: cluster.name },
        { key: TargetVersion, value: call.targetVersion },
        { key: UpgradePhase, value: 'Pending' },
      ],
    });
    return queuedGate(call);
  };

  const upgradeHook = async (cluster: ClusterRef, call: HookCall, ctx: HookContext): Promise<RetryResult> =>
    await withinDeadline(client, ctx, async () => {
      const workflowId = clusterUpgradeWorkflowId(cluster);
      const key = gateKey(call.hook, call.version);
      const found = await readMemo(workflowId);
      const memo = found?.memo;
      if (memo && memo.targetVersion === call.targetVersion) {
        const gate = memo.gates[key];
        if (gate) return answer(gate);
        if (!found.running && memo.phase === 'Upgraded') {
          return { status: 'Success', message: `upgrade to ${memo.targetVersion} completed`, retryAfterSeconds: 0 };
        }
      }
      if (!found?.running) return answer(await start(cluster, call));
      try {
        const gate = await client.workflow.getHandle(workflowId).executeUpdate(recordHookUpdate, { args: [call] });
        return answer(gate);
      } catch (err) {
        // Rejected as a repeat: another replica recorded it first. The memo has it (or soon will).
        if (err instanceof WorkflowUpdateFailedError) {
          const again = (await readMemo(workflowId))?.memo?.gates[key];
          return answer(again ?? queuedGate(call));
        }
        throw err;
      }
    });

  const policyFor = (request: { cluster: Cluster }, ctx: HookContext): UpgradePolicy => {
    const resolved = resolveUpgradePolicy({
      settings: ctx.settings,
      annotations: request.cluster.metadata.annotations,
    });
    if (!resolved.ok) throw new HookFailure(resolved.message);
    return resolved.policy;
  };
  const targetOf = (cluster: Cluster, fallback: string): string =>
    requireVersion('cluster.spec.topology.version', cluster.spec?.topology?.version ?? fallback);
  const steps = (list?: { version: string }[]) => (list ?? []).map((s) => s.version);

  /** The fields of the upgrade hooks' requests (schema-validated: Before* carry from/to, After* a version). */
  interface UpgradeHookRequest {
    cluster: Cluster;
    fromKubernetesVersion?: string;
    toKubernetesVersion?: string;
    kubernetesVersion?: string;
    controlPlaneUpgrades?: { version: string }[];
    workersUpgrades?: { version: string }[];
  }

  const upgradeHookHandler =
    <H extends UpgradeHook>(hook: H): HookImplementation<H> =>
    async (request, ctx) => {
      const r = request as unknown as UpgradeHookRequest;
      const before = hook.startsWith('Before');
      const version = before
        ? requireVersion('toKubernetesVersion', r.toKubernetesVersion ?? '')
        : requireVersion('kubernetesVersion', r.kubernetesVersion ?? '');
      if (before) requireVersion('fromKubernetesVersion', r.fromKubernetesVersion ?? '');
      // The cluster-wide hooks name the whole upgrade's target; step hooks take it from the Cluster.
      const target =
        hook === 'BeforeClusterUpgrade' || hook === 'AfterClusterUpgrade' ? version : targetOf(r.cluster, version);
      const call: HookCall = {
        hook,
        version,
        targetVersion: target,
        ...(before && r.fromKubernetesVersion ? { fromVersion: r.fromKubernetesVersion } : {}),
        controlPlaneUpgrades: steps(r.controlPlaneUpgrades),
        workersUpgrades: steps(r.workersUpgrades),
        policy: policyFor(r, ctx),
      };
      return (await upgradeHook(clusterRef(r.cluster), call, ctx)) as Awaited<ReturnType<HookImplementation<H>>>;
    };

  /** Best effort: a lifecycle event is history, never a reason to hold a cluster back. */
  const recordEvent = async (hook: string, cluster: Cluster, ctx: HookContext): Promise<void> => {
    const ref = clusterRef(cluster);
    try {
      await withinDeadline(client, ctx, () =>
        client.workflow.start('clusterEventWorkflow', {
          workflowId: `cluster-event/${ref.namespace}/${ref.name}/${hook}/${(cluster.metadata as { uid?: string }).uid ?? 'no-uid'}`,
          taskQueue,
          args: [
            {
              cluster: ref,
              hook,
              ...(cluster.spec?.topology?.version ? { kubernetesVersion: cluster.spec.topology.version } : {}),
            },
          ],
          workflowIdReusePolicy: 'REJECT_DUPLICATE',
          typedSearchAttributes: [
            { key: ClusterNamespace, value: ref.namespace },
            { key: ClusterName, value: ref.name },
          ],
        }),
      );
    } catch (err) {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError))
        ctx.log.warn({ hook, err: String(err) }, 'could not record cluster event');
    }
  };

  const beforeClusterDelete: HookImplementation<'BeforeClusterDelete'> = async (request, ctx) => {
    const ref = clusterRef(request.cluster);
    return await withinDeadline(client, ctx, async () => {
      const query = `${ClusterNamespace.name} = ${JSON.stringify(ref.namespace)} AND ${ClusterName.name} = ${JSON.stringify(ref.name)} AND ExecutionStatus = "Running"`;
      const running: string[] = [];
      for await (const wf of client.workflow.list({ query })) {
        running.push(wf.workflowId);
        const memo = Object.values(wf.memo ?? {})[0] as { abortRequested?: string } | undefined;
        // Signal once: the memo shows an abort already on its way.
        if (memo?.abortRequested !== 'cluster is being deleted') {
          await client.workflow
            .getHandle(wf.workflowId)
            .signal(abortSignal, { reason: 'cluster is being deleted', final: true });
        }
      }
      if (running.length === 0) return { status: 'Success', retryAfterSeconds: 0 };
      running.sort();
      return {
        status: 'Success',
        message: `waiting for ${running.length} workflow(s) of this cluster to wind down: ${running.join(', ')}`,
        retryAfterSeconds: 10,
      };
    });
  };

  return {
    BeforeClusterCreate: async (request, ctx) => {
      await recordEvent('BeforeClusterCreate', request.cluster, ctx);
      return { status: 'Success', retryAfterSeconds: 0 };
    },
    AfterControlPlaneInitialized: async (request, ctx) => {
      await recordEvent('AfterControlPlaneInitialized', request.cluster, ctx);
      return { status: 'Success' };
    },
    BeforeClusterUpgrade: upgradeHookHandler('BeforeClusterUpgrade'),
    BeforeControlPlaneUpgrade: upgradeHookHandler('BeforeControlPlaneUpgrade'),
    AfterControlPlaneUpgrade: upgradeHookHandler('AfterControlPlaneUpgrade'),
    BeforeWorkersUpgrade: upgradeHookHandler('BeforeWorkersUpgrade'),
    AfterWorkersUpgrade: upgradeHookHandler('AfterWorkersUpgrade'),
    AfterClusterUpgrade: upgradeHookHandler('AfterClusterUpgrade'),
    BeforeClusterDelete: beforeClusterDelete,
  };
}
