// The fleet rollout's activities: select Clusters in the management cluster,
// move their spec.topology.version (test-and-set, never overwriting someone
// else's change), follow each cluster's upgrade through its cluster-upgrade
// workflow in Temporal, re-check health after a soak, abort what is in flight.
import { CustomObjectsApi, PatchStrategy, setHeaderOptions, type KubeConfig } from '@kubernetes/client-node';
import { ApplicationFailure } from '@temporalio/common';
import { clusterUpgradeWorkflowId } from '../model/cluster-upgrade.ts';
import { capiDeferral } from '../domain/capi-pacing.ts';
import {
  FLEET_ROLLOUT_ANNOTATION,
  type ClusterSelector,
  type ClusterUpgradeProgress,
  type SelectedCluster,
} from '../model/fleet-rollout.ts';
import type { FleetActivities, SetVersionResult } from './fleet-types.ts';
import { checkClustersReadiness } from './fleet-readiness.ts';
import { heartbeating } from './heartbeat.ts';
import { createEventRecorder } from './kube-events.ts';
import { apiClient } from '../platform/kube/clients.ts';
import { readCapiObject } from '../platform/kube/capi-read.ts';
import { statusCode } from '../platform/kube/errors.ts';
import { retryOnConflict } from '../platform/kube/retry-on-conflict.ts';
import { clusterUpgradeMemo, readMemo } from '../platform/temporal/memo.ts';
import type { WorkflowPort } from '../platform/temporal/workflows.ts';
import type { UpgradeActivities } from './upgrade-types.ts';
import { CAPI_GROUP, CAPI_VERSION, type ClusterObject } from '../platform/kube/capi-api.ts';
import { abortSignal } from '../workflows/messages.ts';

const jsonPatch = setHeaderOptions('Content-Type', PatchStrategy.JsonPatch);
/** How often a wait on the clusters reads their upgrades. */
const FOLLOW_POLL_MS = 2_000;

export interface FleetActivityDeps {
  management: KubeConfig;
  /** The workflow service the cluster upgrades run in (unset: following them fails, saying so). */
  temporal?: WorkflowPort;
  checkClusterHealth: UpgradeActivities['checkClusterHealth'];
}

const escapePointer = (s: string) => s.replace(/~/g, '~0').replace(/\//g, '~1');

/** What every fleet activity works with: the management cluster, its Events, the workflow service. */
interface Fleet {
  custom: CustomObjectsApi;
  recordEvent: ReturnType<typeof createEventRecorder>;
  temporal(): WorkflowPort;
}

function fleetOf(deps: FleetActivityDeps): Fleet {
  return {
    custom: apiClient(deps.management, CustomObjectsApi),
    recordEvent: createEventRecorder(deps.management),
    temporal: () => {
      if (!deps.temporal)
        throw ApplicationFailure.nonRetryable(
          'this worker has no Temporal client for fleet rollouts',
          'NoTemporalClient',
        );
      return deps.temporal;
    },
  };
}

function getCluster(fleet: Fleet, c: SelectedCluster): Promise<ClusterObject | undefined> {
  return readCapiObject<ClusterObject>(fleet.custom, 'clusters', c);
}

/** Clusters matching the selector in one namespace (undefined: all), each as selected or with why to skip it. */
async function selectIn(
  fleet: Fleet,
  selector: ClusterSelector,
  namespace: string | undefined,
): Promise<SelectedCluster[]> {
  const common = {
    group: CAPI_GROUP,
    version: CAPI_VERSION,
    plural: 'clusters',
    ...(selector.labelSelector ? { labelSelector: selector.labelSelector } : {}),
  };
  let list: { items?: ClusterObject[] };
  try {
    list = (
      namespace
        ? await fleet.custom.listNamespacedCustomObject({ ...common, namespace })
        : await fleet.custom.listClusterCustomObject(common)
    ) as { items?: ClusterObject[] };
  } catch (err) {
    if (statusCode(err) === 400)
      throw ApplicationFailure.nonRetryable(
        `selector.labelSelector ${JSON.stringify(selector.labelSelector)} is not a valid label selector`,
        'InvalidRolloutInput',
      );
    throw err;
  }
  const found: SelectedCluster[] = [];
  for (const item of list.items ?? []) {
    const topology = item.spec?.topology;
    const clusterClass = topology?.classRef?.name ?? topology?.class;
    if (selector.clusterClass && clusterClass !== selector.clusterClass) continue;
    const skip = item.metadata?.deletionTimestamp
      ? 'being deleted'
      : !topology?.version
        ? 'has no spec.topology.version (not a ClusterClass cluster)'
        : undefined;
    found.push({
      namespace: item.metadata?.namespace ?? '',
      name: item.metadata?.name ?? '',
      uid: item.metadata?.uid ?? '',
      version: topology?.version ?? '',
      ...(skip ? { skip } : {}),
    });
  }
  return found;
}

/**
 * One try of setVersion: read, then a JSON patch that tests resourceVersion (optimistic
 * concurrency; a 422 is a race that retryOnConflict tries again). undefined: patched now.
 */
async function trySetVersion(
  fleet: Fleet,
  rollout: string,
  target: string,
  c: SelectedCluster,
): Promise<SetVersionResult | undefined> {
  const now = await getCluster(fleet, c);
  if (!now || now.metadata?.uid !== c.uid) return { uid: c.uid, outcome: 'gone' };
  const found = now.spec?.topology?.version ?? '';
  const annotations = now.metadata?.annotations;
  // Our own earlier try (a retried activity) set both.
  if (found === target && annotations?.[FLEET_ROLLOUT_ANNOTATION] === rollout)
    return { uid: c.uid, outcome: 'already' };
  if (found !== c.version) return { uid: c.uid, outcome: 'changed', found };
  // CAPI would move the control plane but hold these workers: the upgrade could not complete.
  const deferral = capiDeferral(now.spec?.topology);
  if (deferral) {
    await fleet.recordEvent({
      kind: 'Cluster',
      namespace: c.namespace,
      name: c.name,
      reason: 'FleetRolloutDeferred',
      type: 'Normal',
      message: `fleet rollout ${rollout} leaves spec.topology.version at ${c.version}: ${deferral.message}`,
      key: `fleet-rollout/${rollout}/${c.uid}/deferred/${deferral.message}`,
    });
    return { uid: c.uid, outcome: 'deferred', deferredBy: deferral.message };
  }
  try {
    await fleet.custom.patchNamespacedCustomObject(
      {
        group: CAPI_GROUP,
        version: CAPI_VERSION,
        plural: 'clusters',
        namespace: c.namespace,
        name: c.name,
        body: [
          { op: 'test', path: '/metadata/resourceVersion', value: now.metadata?.resourceVersion },
          { op: 'test', path: '/spec/topology/version', value: c.version },
          { op: 'replace', path: '/spec/topology/version', value: target },
          annotations
            ? { op: 'add', path: `/metadata/annotations/${escapePointer(FLEET_ROLLOUT_ANNOTATION)}`, value: rollout }
            : { op: 'add', path: '/metadata/annotations', value: { [FLEET_ROLLOUT_ANNOTATION]: rollout } },
        ],
      },
      jsonPatch,
    );
    return undefined;
  } catch (err) {
    if (statusCode(err) === 404) return { uid: c.uid, outcome: 'gone' };
    // 422: the Cluster changed between the read and the patch; retryOnConflict reads again.
    throw err;
  }
}

/** Moves one cluster's version (retried on a race) and records an Event when it did. */
async function setVersion(
  fleet: Fleet,
  rollout: string,
  target: string,
  c: SelectedCluster,
): Promise<SetVersionResult> {
  const early = await retryOnConflict(() => trySetVersion(fleet, rollout, target, c));
  if (early) return early;
  await fleet.recordEvent({
    kind: 'Cluster',
    namespace: c.namespace,
    name: c.name,
    reason: 'FleetRolloutVersionSet',
    type: 'Normal',
    message: `fleet rollout ${rollout} set spec.topology.version ${c.version} → ${target}`,
    key: `fleet-rollout/${rollout}/${c.uid}/${target}`,
  });
  return { uid: c.uid, outcome: 'set' };
}

/** What the cluster-upgrade workflow says about this cluster's upgrade to `target`. */
async function progressOf(fleet: Fleet, c: SelectedCluster, target: string): Promise<ClusterUpgradeProgress> {
  const workflowId = clusterUpgradeWorkflowId({ namespace: c.namespace, name: c.name, uid: c.uid });
  const d = await fleet.temporal().describe(workflowId);
  const memo = readMemo(clusterUpgradeMemo, d?.memo);
  if (!d || !memo || memo.targetVersion !== target)
    return { uid: c.uid, state: 'upgrading', message: 'waiting for Cluster API to begin the upgrade' };
  const running = d.status === 'RUNNING';
  if (memo.phase === 'Upgraded') return { uid: c.uid, state: 'done', message: `upgraded to ${target}` };
  if (memo.halted) return { uid: c.uid, state: 'failed', message: memo.halted };
  if (!running && memo.phase === 'Aborted')
    return { uid: c.uid, state: 'failed', message: memo.reason ?? 'the upgrade was aborted' };
  // CAPI keeps deferred workers at their version and calls no AfterWorkersUpgrade meanwhile: say so.
  const deferral = capiDeferral((await getCluster(fleet, c))?.spec?.topology);
  if (deferral) return { uid: c.uid, state: 'upgrading', message: deferral.message };
  // Any other close is replaced by a fresh run on CAPI's next hook call: still upgrading.
  return { uid: c.uid, state: 'upgrading', message: `upgrade ${memo.phase.toLowerCase()}` };
}

/** Polls the clusters' upgrades until one of them changes state from what the caller knows, or `waitMs` ends. */
async function awaitChange(
  fleet: Fleet,
  target: string,
  clusters: Parameters<FleetActivities['awaitClusterUpgrades']>[0]['clusters'],
  waitMs: number,
): Promise<ClusterUpgradeProgress[]> {
  const end = Date.now() + waitMs;
  for (;;) {
    const now = await Promise.all(clusters.map((c) => progressOf(fleet, c.cluster, target)));
    if (now.some((p, i) => p.state !== clusters[i]?.known) || Date.now() >= end) return now;
    await new Promise((r) => setTimeout(r, Math.min(FOLLOW_POLL_MS, Math.max(0, end - Date.now()))));
  }
}

export function createFleetActivities(deps: FleetActivityDeps): FleetActivities {
  const fleet = fleetOf(deps);
  return {
    selectClusters: ({ selector }) =>
      heartbeating(async () => {
        const namespaces = selector.namespaces?.length ? selector.namespaces : [undefined];
        const found: SelectedCluster[] = [];
        for (const namespace of namespaces) found.push(...(await selectIn(fleet, selector, namespace)));
        return found;
      }),

    setClusterVersions: ({ rollout, target, clusters }) =>
      heartbeating(async () => {
        const results: SetVersionResult[] = [];
        for (const c of clusters) results.push(await setVersion(fleet, rollout, target, c));
        return results;
      }),

    awaitClusterUpgrades: ({ target, clusters, waitMs }) =>
      heartbeating(() => awaitChange(fleet, target, clusters, waitMs)),

    // A wave's clusters one after another can take longer than the caller's heartbeat timeout:
    // heartbeats say it is alive (and let an abort cancel it) however many clusters it checks.
    checkClustersHealth: ({ clusters, version, scope = 'post' }) =>
      heartbeating(async () => {
        const unhealthy: { uid: string; summary: string }[] = [];
        for (const c of clusters) {
          const report = await deps.checkClusterHealth({
            cluster: { namespace: c.namespace, name: c.name, uid: c.uid },
            // Before the upgrade its nodes are not at the target yet: the gate's check, which checks no version.
            ...(scope === 'pre' ? { scope } : { scope, version }),
            criticalNamespaces: ['kube-system'],
            blockingPdbPolicy: 'warn',
          });
          if (!report.healthy) unhealthy.push({ uid: c.uid, summary: report.summary });
        }
        return unhealthy;
      }),

    checkClustersReadiness: checkClustersReadiness(() => fleet.temporal()),

    // An upgrade that is gone needs no abort.
    async abortClusterUpgrades({ clusters, reason }) {
      for (const c of clusters) {
        const id = clusterUpgradeWorkflowId({ namespace: c.namespace, name: c.name, uid: c.uid });
        await fleet.temporal().signal(id, abortSignal, { reason });
      }
    },
  };
}
