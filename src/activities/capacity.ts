// Capacity reservation for a cluster upgrade: extra machines per
// MachineDeployment before the workers roll, released afterwards. What was
// scaled is recorded on the Cluster (one annotation), so every step is
// idempotent and a crash between two writes is finished by the next attempt.
import { CustomObjectsApi, PatchStrategy, setHeaderOptions, type KubeConfig } from '@kubernetes/client-node';
import { ApplicationFailure } from '@temporalio/common';
import type { ClusterRef, ReservedCapacity } from '../model/cluster-upgrade.ts';
import { heartbeating } from './heartbeat.ts';
import { apiClient } from '../platform/kube/clients.ts';
import { readCapiObject } from '../platform/kube/capi-read.ts';
import { isNotFound } from '../platform/kube/errors.ts';
import { retryOnConflict } from '../platform/kube/retry-on-conflict.ts';
import type { CapacityInput, CapacityReadiness, UpgradeActivities } from './upgrade-types.ts';
import type { CapacityPreview } from '../domain/readiness-gates.ts';
import {
  CAPI_GROUP,
  CAPI_VERSION,
  CLUSTER_NAME_LABEL,
  TOPOLOGY_DEPLOYMENT_NAME_LABEL,
  type ClusterObject,
  type MachineDeploymentObject,
  type TopologyMachineDeployment,
} from '../platform/kube/capi-api.ts';

/** Cluster annotation recording a capacity reservation (JSON array of {@link RecordedCapacity}). */
export const RESERVED_CAPACITY_ANNOTATION = 'upgrades.capi-orchestrator.io/reserved-capacity';

export function createCapacityActivities(
  management: KubeConfig,
): Pick<UpgradeActivities, 'reserveCapacity' | 'checkReservedCapacity' | 'releaseCapacity'> {
  const capi = new CapiObjects(apiClient(management, CustomObjectsApi));
  return {
    async reserveCapacity(input: CapacityInput): Promise<ReservedCapacity[]> {
      if (!Number.isInteger(input.count) || input.count < 1) {
        throw ApplicationFailure.nonRetryable(
          `capacity reservation count must be a positive integer, got ${input.count}`,
          'InvalidCapacityCount',
        );
      }
      return await heartbeating(() =>
        retryOnConflict(async () => {
          const cluster = await capi.getCluster(input.cluster);
          const recorded = readReservation(cluster, input.cluster);
          if (recorded) {
            // Already reserved: finish what a crash may have interrupted, never scale twice.
            await capi.applyMachineDeploymentScaling(input.cluster, recorded, 'reserve');
            return publicView(recorded);
          }
          const plan = await capi.planReservation(cluster, input);
          if (plan.length === 0) return [];
          // One patch records the reservation and scales the topology: atomic, resourceVersion-guarded.
          await capi.patchCluster(input.cluster, cluster, plan, 'reserve');
          // MachineDeployments outside the topology are scaled after the record exists.
          await capi.applyMachineDeploymentScaling(input.cluster, plan, 'reserve');
          return publicView(plan);
        }),
      );
    },

    async checkReservedCapacity(input: { cluster: ClusterRef }): Promise<CapacityReadiness> {
      return await heartbeating(async () => {
        const recorded = readReservation(await capi.getCluster(input.cluster), input.cluster);
        if (!recorded) return { ready: true, pending: [] };
        const pending = await capi.reservationShortfall(input.cluster, recorded);
        return { ready: pending.length === 0, pending };
      });
    },

    async releaseCapacity(input: { cluster: ClusterRef }): Promise<ReservedCapacity[]> {
      return await heartbeating(() =>
        retryOnConflict(async () => {
          let cluster: ClusterObject;
          try {
            cluster = await capi.getCluster(input.cluster);
          } catch (err) {
            // A deleted Cluster has nothing left to scale back.
            if (err instanceof ApplicationFailure && err.type === 'ClusterNotFound') return [];
            throw err;
          }
          const recorded = readReservation(cluster, input.cluster);
          if (!recorded) return [];
          // MachineDeployments first: the record stays until they are restored, so a crash repeats this.
          await capi.applyMachineDeploymentScaling(input.cluster, recorded, 'release');
          // One patch restores the topology replicas and removes the record.
          await capi.patchCluster(input.cluster, cluster, recorded, 'release');
          return publicView(recorded);
        }),
      );
    },
  };
}

/**
 * What reserveCapacity would do now, read without writing (the readiness check): the recorded
 * reservation or the plan it would make, and the MachineDeployments whose machines are not all
 * Ready (checkReservedCapacity's own shortfall, against the replicas they have now when nothing
 * is reserved yet). A record the step cannot read is the step's own failure message.
 */
export async function previewCapacityReservation(
  management: KubeConfig,
  ref: ClusterRef,
  count: number,
): Promise<CapacityPreview> {
  const capi = new CapiObjects(apiClient(management, CustomObjectsApi));
  const cluster = await capi.getCluster(ref);
  let recorded: RecordedCapacity[] | undefined;
  try {
    recorded = readReservation(cluster, ref);
  } catch (err) {
    if (err instanceof ApplicationFailure && err.type === 'InvalidCapacityRecord')
      return { invalidRecord: err.message };
    throw err;
  }
  const entries = recorded ?? (await capi.planReservation(cluster, { cluster: ref, count }));
  const now = recorded ?? entries.map((e) => ({ ...e, reservedReplicas: e.originalReplicas }));
  return {
    recorded: recorded !== undefined,
    entries: publicView(entries),
    notReady: await capi.reservationShortfall(ref, now),
  };
}

/** What the annotation records per entry: the public view plus where the replicas live. */
export interface RecordedCapacity extends ReservedCapacity {
  /** `topology`: Cluster spec.topology.workers.machineDeployments[name]; `machineDeployment`: the object. */
  scaledIn: 'topology' | 'machineDeployment';
}

function publicView(entries: RecordedCapacity[]): ReservedCapacity[] {
  return entries.map(({ machineDeployment, originalReplicas, reservedReplicas }) => ({
    machineDeployment,
    originalReplicas,
    reservedReplicas,
  }));
}

function readReservation(cluster: ClusterObject, ref: ClusterRef): RecordedCapacity[] | undefined {
  const raw = cluster.metadata?.annotations?.[RESERVED_CAPACITY_ANNOTATION];
  if (raw === undefined) return undefined;
  try {
    const parsed: unknown = JSON.parse(raw);
    if (Array.isArray(parsed) && parsed.every(isRecordedCapacity)) return parsed;
  } catch {
    // fall through
  }
  throw ApplicationFailure.nonRetryable(
    // Not quoted: whoever may annotate the Cluster chose it (up to 256 KiB).
    `Cluster ${ref.namespace}/${ref.name}: annotation ${RESERVED_CAPACITY_ANNOTATION} is not a capacity record (${raw.length} characters)`,
    'InvalidCapacityRecord',
  );
}

function isRecordedCapacity(v: unknown): v is RecordedCapacity {
  if (typeof v !== 'object' || v === null) return false;
  const r = v as Record<string, unknown>;
  return (
    typeof r.machineDeployment === 'string' &&
    Number.isInteger(r.originalReplicas) &&
    Number.isInteger(r.reservedReplicas) &&
    (r.scaledIn === 'topology' || r.scaledIn === 'machineDeployment')
  );
}

/**
 * Replicas after a step, from what they are now. Reserve moves `original` to `reserved` and
 * leaves anything else alone (already done, or someone else scaled since). Release takes the
 * extra machines away again without going below the original count.
 */
export function scaledReplicas(current: number, entry: ReservedCapacity, step: 'reserve' | 'release'): number {
  const extra = entry.reservedReplicas - entry.originalReplicas;
  if (step === 'reserve') return current === entry.originalReplicas ? entry.reservedReplicas : current;
  return current > entry.originalReplicas ? Math.max(entry.originalReplicas, current - extra) : current;
}

class CapiObjects {
  private readonly custom: CustomObjectsApi;

  constructor(custom: CustomObjectsApi) {
    this.custom = custom;
  }

  async getCluster(ref: ClusterRef): Promise<ClusterObject> {
    const cluster = await readCapiObject<ClusterObject>(this.custom, 'clusters', ref);
    if (!cluster)
      throw ApplicationFailure.nonRetryable(`Cluster ${ref.namespace}/${ref.name} not found`, 'ClusterNotFound');
    return cluster;
  }

  async listMachineDeployments(ref: ClusterRef): Promise<MachineDeploymentObject[]> {
    const list = (await this.custom.listNamespacedCustomObject({
      group: CAPI_GROUP,
      version: CAPI_VERSION,
      plural: 'machinedeployments',
      namespace: ref.namespace,
      labelSelector: `${CLUSTER_NAME_LABEL}=${ref.name}`,
    })) as { items: MachineDeploymentObject[] };
    return list.items;
  }

  /**
   * One line per recorded entry whose MachineDeployment has fewer than `reservedReplicas` Ready
   * machines (or is gone), sorted. Topology entries name the topology, so their objects are found
   * by the label the topology controller sets; the others name the object.
   */
  async reservationShortfall(ref: ClusterRef, entries: RecordedCapacity[]): Promise<string[]> {
    const lines = await Promise.all(
      entries.map(async (entry) => {
        const mds = await this.reservedMachineDeployments(ref, entry);
        if (mds.length === 0) return `MachineDeployment ${entry.machineDeployment}: not found`;
        // The topology controller keeps one object per topology name; during a hand-over count them together.
        const ready = mds.reduce((sum, md) => sum + (md.status?.readyReplicas ?? 0), 0);
        if (ready >= entry.reservedReplicas) return undefined;
        const names = mds.map((md) => md.metadata?.name ?? '').sort();
        return `MachineDeployment ${names.join(', ')}: ${ready} of ${entry.reservedReplicas} machines Ready`;
      }),
    );
    return lines.filter((l): l is string => l !== undefined).sort();
  }

  private async reservedMachineDeployments(
    ref: ClusterRef,
    entry: RecordedCapacity,
  ): Promise<MachineDeploymentObject[]> {
    if (entry.scaledIn === 'topology') {
      const list = (await this.custom.listNamespacedCustomObject({
        group: CAPI_GROUP,
        version: CAPI_VERSION,
        plural: 'machinedeployments',
        namespace: ref.namespace,
        labelSelector: `${TOPOLOGY_DEPLOYMENT_NAME_LABEL}=${entry.machineDeployment},${CLUSTER_NAME_LABEL}=${ref.name}`,
      })) as { items: MachineDeploymentObject[] };
      return list.items;
    }
    try {
      return [
        (await this.custom.getNamespacedCustomObject({
          group: CAPI_GROUP,
          version: CAPI_VERSION,
          plural: 'machinedeployments',
          namespace: ref.namespace,
          name: entry.machineDeployment,
        })) as MachineDeploymentObject,
      ];
    } catch (err) {
      if (isNotFound(err)) return [];
      throw err;
    }
  }

  /**
   * What to scale: every topology MachineDeployment with replicas (the topology controller owns
   * the objects' replicas), and every MachineDeployment of the cluster outside the topology.
   * Topology entries without replicas belong to an autoscaler and are left alone.
   */
  async planReservation(cluster: ClusterObject, input: CapacityInput): Promise<RecordedCapacity[]> {
    const topology = cluster.spec?.topology?.workers?.machineDeployments ?? [];
    const plan: RecordedCapacity[] = [];
    for (const md of topology) {
      if (typeof md.replicas !== 'number') continue;
      plan.push({
        machineDeployment: md.name,
        originalReplicas: md.replicas,
        reservedReplicas: md.replicas + input.count,
        scaledIn: 'topology',
      });
    }
    for (const md of await this.listMachineDeployments(input.cluster)) {
      const topologyName = md.metadata?.labels?.[TOPOLOGY_DEPLOYMENT_NAME_LABEL];
      if (topologyName !== undefined && cluster.spec?.topology) continue; // the topology's, handled above
      const replicas = md.spec?.replicas;
      if (typeof replicas !== 'number' || !md.metadata?.name) continue;
      plan.push({
        machineDeployment: md.metadata?.name,
        originalReplicas: replicas,
        reservedReplicas: replicas + input.count,
        scaledIn: 'machineDeployment',
      });
    }
    return plan.sort((a, b) => (a.machineDeployment < b.machineDeployment ? -1 : 1));
  }

  /**
   * One merge patch on the Cluster, guarded by its resourceVersion: on reserve it writes the
   * record and the reserved topology replicas; on release it restores the topology replicas and
   * removes the record.
   */
  async patchCluster(
    ref: ClusterRef,
    cluster: ClusterObject,
    entries: RecordedCapacity[],
    step: 'reserve' | 'release',
  ): Promise<void> {
    const patch: {
      metadata: { resourceVersion?: string; annotations: Record<string, string | null> };
      spec?: { topology: { workers: { machineDeployments: TopologyMachineDeployment[] } } };
    } = {
      metadata: {
        resourceVersion: cluster.metadata?.resourceVersion,
        annotations: { [RESERVED_CAPACITY_ANNOTATION]: step === 'reserve' ? JSON.stringify(entries) : null },
      },
    };
    const topology = cluster.spec?.topology?.workers?.machineDeployments;
    const byName = new Map(entries.filter((e) => e.scaledIn === 'topology').map((e) => [e.machineDeployment, e]));
    if (topology && byName.size > 0) {
      let changed = false;
      const machineDeployments = topology.map((md) => {
        const entry = byName.get(md.name);
        if (!entry || typeof md.replicas !== 'number') return md;
        const replicas = scaledReplicas(md.replicas, entry, step);
        if (replicas === md.replicas) return md;
        changed = true;
        return { ...md, replicas };
      });
      // A merge patch replaces the list whole; the resourceVersion makes that safe.
      if (changed) patch.spec = { topology: { workers: { machineDeployments } } };
    }
    await this.custom.patchNamespacedCustomObject(
      {
        group: CAPI_GROUP,
        version: CAPI_VERSION,
        plural: 'clusters',
        namespace: ref.namespace,
        name: ref.name,
        body: patch,
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
  }

  /** Scales the MachineDeployments outside the topology (JSON patch with a `test` of the replicas read). */
  async applyMachineDeploymentScaling(
    ref: ClusterRef,
    entries: RecordedCapacity[],
    step: 'reserve' | 'release',
  ): Promise<void> {
    for (const entry of entries) {
      if (entry.scaledIn !== 'machineDeployment') continue;
      let md: MachineDeploymentObject;
      try {
        md = (await this.custom.getNamespacedCustomObject({
          group: CAPI_GROUP,
          version: CAPI_VERSION,
          plural: 'machinedeployments',
          namespace: ref.namespace,
          name: entry.machineDeployment,
        })) as MachineDeploymentObject;
      } catch (err) {
        if (isNotFound(err)) continue; // deleted since: nothing to scale
        throw err;
      }
      const current = md.spec?.replicas;
      if (typeof current !== 'number') continue;
      const replicas = scaledReplicas(current, entry, step);
      if (replicas === current) continue;
      await this.custom.patchNamespacedCustomObject(
        {
          group: CAPI_GROUP,
          version: CAPI_VERSION,
          plural: 'machinedeployments',
          namespace: ref.namespace,
          name: entry.machineDeployment,
          body: [
            { op: 'test', path: '/spec/replicas', value: current },
            { op: 'replace', path: '/spec/replicas', value: replicas },
          ],
        },
        setHeaderOptions('Content-Type', PatchStrategy.JsonPatch),
      );
    }
  }
}
