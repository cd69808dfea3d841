// The lifecycle hooks around an upgrade that no upgrade workflow answers:
// BeforeClusterCreate and AfterControlPlaneInitialized are recorded off the
// request path (a workflow per event, never waited on), and BeforeClusterDelete
// aborts every running workflow of the cluster for good, then waits for them.
import { WorkflowExecutionAlreadyStartedError, WorkflowNotFoundError, type Client } from '@temporalio/client';
import type { ClusterRef } from '../../../model/cluster-upgrade.ts';
import { abortSignal } from '../../../workflows/messages.ts';
import { ClusterName, ClusterNamespace } from '../../../model/search-attributes.ts';
import { workflowTypes } from '../../../model/workflow-types.ts';
import type { BackgroundRecorder } from '../../hooks/background-recorder.ts';
import type { Cluster } from '../../hooks/contract.ts';
import { HttpError } from '../../hooks/errors.ts';
import type { HookImplementation } from '../../hooks/hook-route.ts';
import type { LifecycleHandlers } from './routes.ts';
import { withinDeadline } from '../temporal-calls.ts';
import { clusterDeleteRule, type RequestChecks } from '../request-checks.ts';
import type { UpgradeViews } from './upgrade-views.ts';

/** The identity an upgrade is keyed by: namespace, name and uid (a recreated cluster is another one). */
export function clusterRef(cluster: Cluster): Required<ClusterRef> {
  const uid = cluster.metadata.uid;
  if (!uid)
    throw new HttpError(400, 'cluster.metadata.uid is required: the upgrade is keyed by it', 'cluster.metadata.uid');
  return { namespace: cluster.metadata.namespace, name: cluster.metadata.name, uid };
}

export interface ClusterLifecycleOptions {
  client: Client;
  taskQueue: string;
  checks: RequestChecks;
  recorder: BackgroundRecorder;
  /** The upgrade views: a signalled run is read fresh by the next call. */
  views: UpgradeViews;
}

/**
 * BeforeClusterDelete's use case: every running workflow of the cluster is asked to abort for good
 * (once: not while its memo shows the abort on its way); returns the ids still running, sorted.
 */
async function abortClusterWorkflows(
  client: Client,
  views: UpgradeViews,
  ref: { namespace: string; name: string },
  checked: () => Promise<void>,
): Promise<string[]> {
  const query = `${ClusterNamespace.name} = ${JSON.stringify(ref.namespace)} AND ${ClusterName.name} = ${JSON.stringify(ref.name)} AND ExecutionStatus = "Running"`;
  const running: string[] = [];
  for await (const wf of client.workflow.list({ query })) {
    const memo = Object.values(wf.memo ?? {})[0] as { abortRequested?: string } | undefined;
    // Signal unless the memo shows an abort on its way (inside visibility's lag a call may signal again: a second abort changes nothing).
    if (memo?.abortRequested !== 'cluster is being deleted') {
      await checked();
      views.invalidate(wf.workflowId);
      try {
        await client.workflow
          .getHandle(wf.workflowId)
          .signal(abortSignal, { reason: 'cluster is being deleted', final: true });
      } catch (err) {
        // Ended since the List saw it (visibility lags): nothing left to abort or wait for.
        if (err instanceof WorkflowNotFoundError) continue;
        throw err;
      }
    }
    running.push(wf.workflowId);
  }
  return running.sort();
}

export function createClusterLifecycleHandlers(
  opts: ClusterLifecycleOptions,
): Pick<LifecycleHandlers, 'BeforeClusterCreate' | 'AfterControlPlaneInitialized' | 'BeforeClusterDelete'> {
  const { client, taskQueue, checks, recorder, views } = opts;

  /** Off the request path: a lifecycle event is history, never a reason to hold a cluster back. */
  const recordEvent = (hook: string, cluster: Cluster): void => {
    const ref = clusterRef(cluster);
    const workflowId = `cluster-event/${ref.namespace}/${ref.name}/${hook}/${ref.uid}`;
    recorder.record(workflowId, async (deadline) => {
      try {
        await client.connection.withDeadline(deadline, () =>
          client.workflow.start(workflowTypes.clusterEvent, {
            workflowId,
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
        if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
      }
    });
  };

  const beforeClusterDelete: HookImplementation<'BeforeClusterDelete'> = async (request, ctx) => {
    const ref = { namespace: request.cluster.metadata.namespace, name: request.cluster.metadata.name };
    // Aborting is for good: only for a Cluster that is really going away.
    const checked = checks.before(ctx, clusterDeleteRule(ref));
    return await withinDeadline(client, ctx, async () => {
      const running = await abortClusterWorkflows(client, views, ref, checked);
      if (running.length === 0) return { status: 'Success', retryAfterSeconds: 0 };
      return {
        status: 'Success',
        message: `waiting for ${running.length} workflow(s) of this cluster to wind down: ${running.join(', ')}`,
        retryAfterSeconds: 10,
      };
    });
  };

  return {
    BeforeClusterCreate: async (request) => {
      recordEvent('BeforeClusterCreate', request.cluster);
      return { status: 'Success', retryAfterSeconds: 0 };
    },
    AfterControlPlaneInitialized: async (request) => {
      recordEvent('AfterControlPlaneInitialized', request.cluster);
      return { status: 'Success' };
    },
    BeforeClusterDelete: beforeClusterDelete,
  };
}
