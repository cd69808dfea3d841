// The readiness check's own reads, all of them GET and LIST: the Cluster's
// version and policy annotations and its Machines (management cluster), and the
// workload cluster's nodes, pods and PodDisruptionBudgets for the drain simulation
// (domain/drain-simulation.ts decides). Nothing here writes: the readiness run
// must leave every object as it found it. With the survey, the other gates are
// read by their own readers, read-only as well: the capacity reservation's plan
// and shortfall (capacity.ts), the in-place hooks' node agent and node upgrader
// Leases (platform/kube/node-agents.ts, platform/kube/node-upgraders.ts) and the alert gate's
// checkAlerts (alerts.ts); domain/readiness-gates.ts decides.
import { CoreV1Api, CustomObjectsApi, PolicyV1Api, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { ApplicationFailure } from '@temporalio/common';
import { CONTROL_PLANE_LABEL } from '../domain/cluster-health.ts';
import { parseSkipPodSelector } from '../domain/drain.ts';
import { simulateDrain, type SimulatedPod } from '../domain/drain-simulation.ts';
import { ANNOTATION_PREFIX } from '../domain/policy-keys.ts';
import { CAPI_CORE } from '../platform/kube/capi-api.ts';
import { listPaged } from '../platform/kube/paged-list.ts';
import { listMachines } from './cluster-health.ts';
import { heartbeating } from './heartbeat.ts';
import { apiClient } from '../platform/kube/clients.ts';
import { isNotFound } from '../platform/kube/errors.ts';
import { workloadKubeConfig } from '../platform/kube/workload-clusters.ts';
import type { ClusterObject } from '../platform/kube/capi-api.ts';
import type { DrainSurvey, DrainSurveyInput, ReadinessActivities, ReadinessTarget } from './readiness-types.ts';
import { createNodeAgentCheck } from '../platform/kube/node-agents.ts';
import { createNodeUpgraderCheck } from '../platform/kube/node-upgraders.ts';
import type { MachineInfo } from '../domain/cluster-health.ts';
import { allowedForExecutor, DEFAULT_ALLOWED_PATHS, parseDeclaredPaths } from '../domain/in-place-policy.ts';
import { alertsCheck, capacityCheck, inPlaceCheck, type InPlaceSurvey } from '../domain/readiness-gates.ts';
import { unknownCheck, type ReadinessCheck, type ReadinessCheckName } from '../domain/readiness.ts';
import { DEFAULT_NODE_UPGRADER_NAMESPACE } from '../model/machine-update.ts';
import { stableError } from '../platform/kube/stable-error.ts';
import { createAlertActivities } from './alerts.ts';
import { previewCapacityReservation } from './capacity.ts';
import { DEFAULT_WORKLOAD_NAMESPACE } from './machine-update.ts';

/** Only what the simulation reads of a pod: a large cluster's pods are not held whole. */
function slim(p: V1Pod): SimulatedPod {
  const m = p.metadata;
  return {
    metadata: {
      name: m?.name,
      namespace: m?.namespace,
      labels: m?.labels,
      annotations: m?.annotations,
      ownerReferences: m?.ownerReferences?.map((o) => ({ kind: o.kind, name: o.name, controller: o.controller })),
      deletionTimestamp: m?.deletionTimestamp,
    },
    spec: {
      nodeName: p.spec?.nodeName,
      volumes: p.spec?.volumes?.map((v) => ({ name: v.name, emptyDir: v.emptyDir })),
    },
    status: {
      phase: p.status?.phase,
      conditions: p.status?.conditions?.map((c) => ({ type: c.type, status: c.status })),
    },
  };
}

/** How many Leases the in-place check reads at once. */
const LEASE_READS = 8;

async function mapBounded<T, R>(items: readonly T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array<R>(items.length);
  let next = 0;
  const run = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i] as T);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, run));
  return out;
}

/** `fn`'s check, or Unknown naming what could not be read (one gate's failure is not the survey's). */
async function guarded(name: ReadinessCheckName, fn: () => Promise<ReadinessCheck>): Promise<ReadinessCheck> {
  try {
    return await fn();
  } catch (err) {
    return unknownCheck(name, `could not read: ${stableError(err).message}`);
  }
}

export interface ReadinessActivityOptions {
  /** Where the management executor's node upgraders keep their Leases; default capi-upgrade-orchestrator-system. */
  nodeUpgraderNamespace?: string;
}

export function createReadinessActivities(
  management: KubeConfig,
  opts: ReadinessActivityOptions = {},
): ReadinessActivities {
  const custom = apiClient(management, CustomObjectsApi);
  const alerts = createAlertActivities(management);
  // The in-place hooks' own Lease checks, without their cache: the report says what is true now.
  const nodeAgents = createNodeAgentCheck({ management, namespace: DEFAULT_WORKLOAD_NAMESPACE, cacheMs: 0 });
  const nodeUpgraders = createNodeUpgraderCheck({
    management,
    namespace: opts.nodeUpgraderNamespace ?? DEFAULT_NODE_UPGRADER_NAMESPACE,
    cacheMs: 0,
  });
  const versionPath = parseDeclaredPaths(DEFAULT_ALLOWED_PATHS[0], 'the version path');

  /** What CanUpdate* would find for these nodes and machines now. */
  async function inPlaceSurvey(
    input: NonNullable<NonNullable<DrainSurveyInput['gates']>['inPlace']>,
    cluster: DrainSurveyInput['cluster'],
    nodes: string[],
    machines: MachineInfo[],
  ): Promise<InPlaceSurvey> {
    const survey: InPlaceSurvey = { ...input, checked: 0, missing: [], unreadable: [] };
    if (!input.enabled || input.executor === 'job') return survey;
    const sort = (lines: string[]) => lines.sort();
    if (input.executor === 'delegate') {
      const answers = await mapBounded(nodes, LEASE_READS, (node) => nodeAgents.missing(cluster, node));
      survey.checked = nodes.length;
      for (const a of answers)
        if (a !== undefined) (a.startsWith('cannot check') ? survey.unreadable : survey.missing).push(a);
    } else {
      const kinds = [...new Set(machines.flatMap((m) => (m.infrastructureKind ? [m.infrastructureKind] : [])))].sort();
      survey.checked = kinds.length;
      for (const kind of kinds) {
        const answer = await nodeUpgraders.declared(kind);
        if (!answer.ok)
          (answer.reason.startsWith('cannot check') ? survey.unreadable : survey.missing).push(answer.reason);
        else if (
          allowedForExecutor({ enabled: true, allowedPaths: versionPath }, 'management', answer.paths).allowedPaths
            .length === 0
        )
          survey.missing.push(
            `the node upgrader for ${kind} does not apply Machine /spec/version (Lease ${answer.lease})`,
          );
      }
    }
    sort(survey.missing);
    sort(survey.unreadable);
    return survey;
  }

  /** capacity, in-place and alerts, each by its gate's reader; undefined when the input asks for none. */
  async function gateChecks(
    input: DrainSurveyInput,
    nodes: string[],
    machines: MachineInfo[],
  ): Promise<ReadinessCheck[] | undefined> {
    const g = input.gates;
    if (!g) return undefined;
    const inPlace = g.inPlace;
    return await Promise.all([
      guarded('capacity', async () =>
        capacityCheck(
          g.capacityReservation,
          g.capacityReservation > 0
            ? await previewCapacityReservation(management, input.cluster, g.capacityReservation)
            : undefined,
        ),
      ),
      ...(inPlace
        ? [guarded('in-place', async () => inPlaceCheck(await inPlaceSurvey(inPlace, input.cluster, nodes, machines)))]
        : []),
      guarded('alerts', async () => {
        if (!g.alerts?.prometheusUrl) return alertsCheck(g.targetVersion, undefined);
        // As the gate: a source that cannot be read (or configured) is a report, not a failure.
        const report = await alerts
          .checkAlerts({ cluster: input.cluster, policy: g.alerts })
          .catch((err: unknown) => ({ reachable: false as const, cause: stableError(err).message }));
        return alertsCheck(g.targetVersion, report);
      }),
    ]);
  }
  return {
    async readinessTarget({ cluster }): Promise<ReadinessTarget> {
      return await heartbeating(async () => {
        let object: ClusterObject;
        try {
          object = (await custom.getNamespacedCustomObject({
            ...CAPI_CORE,
            plural: 'clusters',
            namespace: cluster.namespace,
            name: cluster.name,
          })) as ClusterObject;
        } catch (err) {
          if (isNotFound(err))
            throw ApplicationFailure.nonRetryable(
              `Cluster ${cluster.namespace}/${cluster.name} not found`,
              'ClusterNotFound',
            );
          throw err;
        }
        const annotations = Object.fromEntries(
          Object.entries(object.metadata?.annotations ?? {}).filter(([k]) => k.startsWith(ANNOTATION_PREFIX)),
        );
        return {
          ...(object.metadata?.uid ? { uid: object.metadata.uid } : {}),
          ...(object.spec?.topology?.version ? { version: object.spec.topology.version } : {}),
          annotations,
        };
      });
    },

    async surveyDrain(input): Promise<DrainSurvey> {
      const skip = parseSkipPodSelector('drainSkipPodSelector', input.skipPodSelector?.trim() ?? '');
      if (!skip.ok) throw ApplicationFailure.nonRetryable(skip.message, 'InvalidReadinessInput');
      return await heartbeating(async () => {
        const kc = await workloadKubeConfig(management, input.cluster);
        const core = apiClient(kc, CoreV1Api);
        const policy = apiClient(kc, PolicyV1Api);
        const [machines, allNodes, pods, pdbs] = await Promise.all([
          listMachines(custom, input.cluster),
          listPaged(kc, 'nodes', (page) => core.listNode(page)),
          listPaged(kc, 'pods', (page) => core.listPodForAllNamespaces(page), { keep: slim }),
          listPaged(kc, 'PodDisruptionBudgets', (page) => policy.listPodDisruptionBudgetForAllNamespaces(page)),
        ]);
        // The nodes of the Cluster's Machines are the ones Cluster API drains (every node when it has none).
        const managed = new Set(machines.flatMap((m) => (m.nodeName ? [m.nodeName] : [])));
        const nodes = machines.length === 0 ? allNodes : allNodes.filter((n) => managed.has(n.metadata?.name ?? ''));
        const names = nodes.map((n) => n.metadata?.name ?? '').filter(Boolean);
        const gates = await gateChecks(input, names, machines);
        return {
          ...(gates ? { gates } : {}),
          kubelets: nodes.map((n) => ({
            node: n.metadata?.name ?? '',
            version: n.status?.nodeInfo?.kubeletVersion ?? '',
            controlPlane: n.metadata?.labels?.[CONTROL_PLANE_LABEL] !== undefined,
          })),
          simulation: simulateDrain(names, pods, pdbs, {
            deleteEmptyDirData: input.deleteEmptyDirData,
            force: input.force,
            skipSelector: skip.selector,
          }),
        };
      });
    },
  };
}
