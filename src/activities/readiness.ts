// The readiness check's own reads, all of them GET and LIST: the Cluster's
// version and policy annotations and its Machines (management cluster), and the
// workload cluster's nodes, pods and PodDisruptionBudgets for the drain simulation
// (domain/drain-simulation.ts decides). Nothing here writes: the readiness run
// must leave every object as it found it. With the survey, the other gates are
// read by their own readers (readiness-gate-reads.ts), read-only as well.
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
import type { DrainSurvey, ReadinessActivities, ReadinessTarget } from './readiness-types.ts';
import { createGateReads, type ReadinessActivityOptions } from './readiness-gate-reads.ts';

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

export type { ReadinessActivityOptions };

export function createReadinessActivities(
  management: KubeConfig,
  opts: ReadinessActivityOptions = {},
): ReadinessActivities {
  const custom = apiClient(management, CustomObjectsApi);
  const gateReads = createGateReads(management, opts);
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
        const gates = await gateReads.gateChecks(input, names, machines);
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
