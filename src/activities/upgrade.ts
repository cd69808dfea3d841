// Activities of the cluster upgrade workflow: health checks against the
// workload cluster and capacity reservation through the Cluster API objects in
// the management cluster. Every activity is idempotent, and heartbeats so that
// the workflow's abort reaches it even while a Kubernetes call hangs.
import { createClusterEventActivities } from './cluster-events.ts';
import type { NotifierOptions } from './notifications.ts';
import {
  CoreV1Api,
  CustomObjectsApi,
  PatchStrategy,
  PolicyV1Api,
  setHeaderOptions,
  type KubeConfig,
  type V1LabelSelector,
  type V1Node,
  type V1Pod,
  type V1PodDisruptionBudget,
} from '@kubernetes/client-node';
import { ApplicationFailure } from '@temporalio/common';
import { compareIgnoringBuild, sameVersion, tryParseVersion } from '../domain/versions.ts';
import type { ClusterRef, ReservedCapacity } from '../model/cluster-upgrade.ts';
import { heartbeating } from './heartbeat.ts';
import { apiClient, isNotFound, isPreconditionFailed, workloadKubeConfig } from './kube.ts';
import type {
  CapacityInput,
  CapacityReadiness,
  HealthCheckInput,
  HealthReport,
  UpgradeActivities,
} from './upgrade-types.ts';

export interface UpgradeActivityDeps {
  /** The management cluster (Cluster API objects, `<cluster>-kubeconfig` Secrets). */
  management: KubeConfig;
  /** Where phase changes are POSTed as CloudEvents; unset = no notifications. */
  notifications?: NotifierOptions;
}

/** Cluster annotation recording a capacity reservation (JSON array of {@link RecordedCapacity}). */
export const RESERVED_CAPACITY_ANNOTATION = 'upgrades.capi-orchestrator.io/reserved-capacity';
export const CONTROL_PLANE_LABEL = 'node-role.kubernetes.io/control-plane';
/** Label the topology controller puts on the MachineDeployments it owns: the topology name. */
export const TOPOLOGY_DEPLOYMENT_NAME_LABEL = 'topology.cluster.x-k8s.io/deployment-name';
export const CLUSTER_NAME_LABEL = 'cluster.x-k8s.io/cluster-name';
/** Label Cluster API puts on control-plane Machines. */
export const MACHINE_CONTROL_PLANE_LABEL = 'cluster.x-k8s.io/control-plane';

const CAPI_GROUP = 'cluster.x-k8s.io';
const CAPI_VERSION = 'v1beta2';
/** How many names a summary lists before "+N more". */
const LIST_CAP = 5;

export function createUpgradeActivities(deps: UpgradeActivityDeps): UpgradeActivities {
  const custom = apiClient(deps.management, CustomObjectsApi);
  const capi = new CapiObjects(custom);
  return {
    ...createClusterEventActivities(deps.management, deps.notifications),
    async checkClusterHealth(input: HealthCheckInput): Promise<HealthReport> {
      return await heartbeating(async () => {
        const kc = await workloadKubeConfig(deps.management, input.cluster);
        const core = apiClient(kc, CoreV1Api);
        const needsPods = input.scope === 'pre' || input.scope === 'post';
        const [machines, nodes, pdbs] = await Promise.all([
          capi.listMachines(input.cluster),
          core.listNode().then((l) => l.items),
          input.scope === 'pre'
            ? apiClient(kc, PolicyV1Api)
                .listPodDisruptionBudgetForAllNamespaces()
                .then((l) => l.items)
            : Promise.resolve([]),
        ]);
        // Only the namespaces the checks read (critical ones, and those of PDBs that allow no
        // disruption): listing every pod of a large cluster on every probe is the expensive part.
        const namespaces = new Set(needsPods ? input.criticalNamespaces : []);
        for (const pdb of pdbs) {
          if ((pdb.status?.disruptionsAllowed ?? 0) === 0 && pdb.spec?.selector)
            namespaces.add(pdb.metadata?.namespace ?? '');
        }
        const pods = (
          await Promise.all(
            [...namespaces]
              .filter(Boolean)
              .map((namespace) => core.listNamespacedPod({ namespace }).then((l) => l.items)),
          )
        ).flat();
        return evaluateHealth(input, { machines, nodes, pods, pdbs });
      });
    },

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

// ---- health ---------------------------------------------------------------------

/** A Cluster API Machine as the health check needs it. */
export interface MachineInfo {
  name: string;
  controlPlane: boolean;
  /** status.nodeRef.name: unset while the machine is provisioning. */
  nodeName?: string;
}

export interface ClusterState {
  /** The cluster's Machines: their nodes are the nodes checked. None: every node of the workload cluster. */
  machines: MachineInfo[];
  nodes: V1Node[];
  pods: V1Pod[];
  pdbs: V1PodDisruptionBudget[];
}

/**
 * The health verdict for a cluster state: pure and deterministic (no clock, sorted output).
 *
 * The nodes checked are the ones the cluster's Machines name in status.nodeRef (Cluster API
 * upgrades those; nodes it does not manage never reach the target version), or every node when
 * the cluster has no Machines. Control-plane nodes carry the node-role label or belong to a
 * control-plane Machine. A PodDisruptionBudget blocks drains when it allows no disruptions and
 * covers a pod running on a checked node.
 */
export function evaluateHealth(input: HealthCheckInput, state: ClusterState): HealthReport {
  const { scope } = input;
  if (scope !== 'pre' && !input.version) {
    throw ApplicationFailure.nonRetryable(`health check scope ${scope} needs a version`, 'InvalidHealthCheck');
  }
  // Shown canonical (`1.32.4` → `v1.32.4`) so the summary does not depend on how the version was spelled.
  const version = scope === 'pre' || !input.version ? undefined : displayVersion(input.version);
  const findings: string[] = [];
  const warnings: string[] = [];
  const parts: string[] = [];

  // Which nodes belong to the cluster, and their roles.
  const byName = new Map(state.nodes.map((n) => [n.metadata?.name ?? '', n]));
  const expected = new Map<string, { controlPlane: boolean; machine?: string }>();
  const nodeless: MachineInfo[] = [];
  if (state.machines.length === 0) {
    warnings.push('the cluster has no Machines: every node of the workload cluster is checked');
    for (const name of byName.keys()) expected.set(name, { controlPlane: false });
  }
  for (const m of state.machines) {
    if (m.nodeName) expected.set(m.nodeName, { controlPlane: m.controlPlane, machine: m.name });
    else nodeless.push(m);
  }
  const isControlPlane = (name: string): boolean =>
    (expected.get(name)?.controlPlane ?? false) ||
    byName.get(name)?.metadata?.labels?.[CONTROL_PLANE_LABEL] !== undefined;
  const inScope = (controlPlane: boolean): boolean =>
    scope === 'control-plane' ? controlPlane : scope === 'workers' ? !controlPlane : true;
  const noun = scope === 'control-plane' ? 'control-plane nodes' : scope === 'workers' ? 'worker nodes' : 'nodes';

  const checked = new Set<string>();
  const nodeProblems: [string, string][] = [];
  let total = 0;
  for (const [name, { machine }] of expected) {
    if (!inScope(isControlPlane(name))) continue;
    total++;
    const node = byName.get(name);
    if (!node) {
      nodeProblems.push([name, `not found (Machine ${machine ?? '?'})`]);
      continue;
    }
    checked.add(name);
    const reasons: string[] = [];
    const ready = node.status?.conditions?.find((c) => c.type === 'Ready');
    if (!ready) reasons.push('no Ready condition');
    else if (ready.status === 'Unknown') reasons.push('Ready Unknown');
    else if (ready.status !== 'True') reasons.push('NotReady');
    const kubelet = node.status?.nodeInfo?.kubeletVersion ?? '';
    if (version && !kubeletMatches(kubelet, version)) reasons.push(`kubelet ${kubelet || 'unknown'}`);
    if (reasons.length > 0) nodeProblems.push([name, reasons.join(' and ')]);
    if (node.spec?.unschedulable) warnings.push(`node ${name}: cordoned`);
  }
  for (const m of nodeless) {
    if (!inScope(m.controlPlane)) continue;
    if (scope === 'pre') {
      warnings.push(`Machine ${m.name}: no node yet`);
    } else {
      total++;
      nodeProblems.push([`Machine ${m.name}`, 'no node yet']);
    }
  }
  nodeProblems.sort(byFirst);
  for (const [name, why] of nodeProblems) {
    const subject = name.startsWith('Machine ') ? name : `node ${name}`;
    findings.push(`${subject}: ${why}${version && why.includes('kubelet') ? `, want ${version}` : ''}`);
  }
  if (scope === 'control-plane' && total === 0) {
    // Hosted control planes have no control-plane nodes; CAPI checked the control plane's version already.
    warnings.push('no control-plane nodes: nothing to check on the workload cluster');
  }
  parts.push(
    `${total - nodeProblems.length} of ${total} ${noun} Ready${version ? ` at ${version}` : ''}` +
      details(nodeProblems),
  );

  if (scope === 'pre' || scope === 'post') {
    const critical = new Set(input.criticalNamespaces);
    const podProblems: [string, string][] = [];
    let pods = 0;
    for (const pod of state.pods) {
      const ns = pod.metadata?.namespace ?? '';
      if (!critical.has(ns)) continue;
      // Finished pods are fine; terminating ones are going away and their replacements count.
      if (pod.status?.phase === 'Succeeded' || pod.metadata?.deletionTimestamp) continue;
      pods++;
      const phase = pod.status?.phase ?? 'Unknown';
      const ready = pod.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;
      if (phase !== 'Running') podProblems.push([`${ns}/${pod.metadata?.name ?? ''}`, phase]);
      else if (!ready) podProblems.push([`${ns}/${pod.metadata?.name ?? ''}`, 'Running, not Ready']);
    }
    podProblems.sort(byFirst);
    for (const [name, why] of podProblems) findings.push(`pod ${name}: ${why}`);
    parts.push(`${pods - podProblems.length} of ${pods} critical pods Ready${details(podProblems)}`);
  }

  if (scope === 'pre') {
    const blocking: string[] = [];
    for (const pdb of state.pdbs) {
      if ((pdb.status?.disruptionsAllowed ?? 0) !== 0 || !pdb.spec?.selector) continue;
      const ns = pdb.metadata?.namespace ?? '';
      const covered = state.pods.filter(
        (p) =>
          p.metadata?.namespace === ns &&
          checked.has(p.spec?.nodeName ?? '') &&
          p.status?.phase !== 'Succeeded' &&
          p.status?.phase !== 'Failed' &&
          selectorMatches(pdb.spec?.selector, p.metadata?.labels ?? {}),
      ).length;
      if (covered === 0) continue;
      const name = `${ns}/${pdb.metadata?.name ?? ''}`;
      blocking.push(name);
      const line = `PodDisruptionBudget ${name} allows no disruptions (covers ${covered} ${covered === 1 ? 'pod' : 'pods'})`;
      (input.blockingPdbPolicy === 'fail' ? findings : warnings).push(line);
    }
    blocking.sort();
    if (blocking.length > 0) {
      const verb = blocking.length === 1 ? 'PodDisruptionBudget blocks' : 'PodDisruptionBudgets block';
      parts.push(`${blocking.length} ${verb} drains (${capList(blocking)})`);
    }
  }

  findings.sort();
  warnings.sort();
  return { healthy: findings.length === 0, summary: parts.join('; '), findings, warnings };
}

function displayVersion(v: string): string {
  const parsed = tryParseVersion(v);
  return parsed.ok ? parsed.version.canonical : v;
}

/** The kubelet runs `want`: a leading `v` is optional; build metadata counts only when `want` has some. */
export function kubeletMatches(kubelet: string, want: string): boolean {
  const k = tryParseVersion(kubelet);
  const w = tryParseVersion(want);
  if (!k.ok || !w.ok) return kubelet.trim() === want.trim();
  return w.version.build.length > 0
    ? sameVersion(k.version, w.version)
    : compareIgnoringBuild(k.version, w.version) === 0;
}

/** A label selector as the API server applies it (policy/v1: an empty selector matches every pod). */
export function selectorMatches(selector: V1LabelSelector | undefined, labels: Record<string, string>): boolean {
  if (!selector) return false;
  for (const [k, v] of Object.entries(selector.matchLabels ?? {})) {
    if (labels[k] !== v) return false;
  }
  for (const e of selector.matchExpressions ?? []) {
    const has = Object.hasOwn(labels, e.key);
    const value = labels[e.key];
    const values = e.values ?? [];
    switch (e.operator) {
      case 'In':
        if (!has || !values.includes(value ?? '')) return false;
        break;
      case 'NotIn':
        if (has && values.includes(value ?? '')) return false;
        break;
      case 'Exists':
        if (!has) return false;
        break;
      case 'DoesNotExist':
        if (has) return false;
        break;
      default:
        return false;
    }
  }
  return true;
}

function byFirst(a: [string, string], b: [string, string]): number {
  return a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0;
}

function capList(items: string[]): string {
  const shown = items.slice(0, LIST_CAP);
  if (items.length > LIST_CAP) shown.push(`+${items.length - LIST_CAP} more`);
  return shown.join(', ');
}

function details(problems: [string, string][]): string {
  return problems.length === 0 ? '' : ` (${capList(problems.map(([n, why]) => `${n}: ${why}`))})`;
}

// ---- capacity ---------------------------------------------------------------------

/** What the annotation records per entry: the public view plus where the replicas live. */
export interface RecordedCapacity extends ReservedCapacity {
  /** `topology`: Cluster spec.topology.workers.machineDeployments[name]; `machineDeployment`: the object. */
  scaledIn: 'topology' | 'machineDeployment';
}

interface ObjectMeta {
  name?: string;
  namespace?: string;
  resourceVersion?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

interface TopologyMachineDeployment {
  name: string;
  class: string;
  replicas?: number;
  [field: string]: unknown;
}

interface ClusterObject {
  metadata: ObjectMeta;
  spec?: { topology?: { version?: string; workers?: { machineDeployments?: TopologyMachineDeployment[] } } };
}

interface MachineObject {
  metadata: ObjectMeta;
  status?: { nodeRef?: { name?: string } };
}

interface MachineDeploymentObject {
  metadata: ObjectMeta;
  spec?: { replicas?: number };
  /** v1beta2: readyReplicas counts Machines whose Ready condition is true. */
  status?: { readyReplicas?: number };
}

function publicView(entries: RecordedCapacity[]): ReservedCapacity[] {
  return entries.map(({ machineDeployment, originalReplicas, reservedReplicas }) => ({
    machineDeployment,
    originalReplicas,
    reservedReplicas,
  }));
}

function readReservation(cluster: ClusterObject, ref: ClusterRef): RecordedCapacity[] | undefined {
  const raw = cluster.metadata.annotations?.[RESERVED_CAPACITY_ANNOTATION];
  if (raw === undefined) return undefined;
  try {
    const parsed: unknown = JSON.parse(raw);
    if (Array.isArray(parsed) && parsed.every(isRecordedCapacity)) return parsed;
  } catch {
    // fall through
  }
  throw ApplicationFailure.nonRetryable(
    `Cluster ${ref.namespace}/${ref.name}: annotation ${RESERVED_CAPACITY_ANNOTATION} is not a capacity record: ${raw}`,
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

async function retryOnConflict<T>(fn: () => Promise<T>, attempts = 5): Promise<T> {
  for (let i = 1; ; i++) {
    try {
      return await fn();
    } catch (err) {
      if (i >= attempts || !isPreconditionFailed(err)) throw err;
    }
  }
}

class CapiObjects {
  private readonly custom: CustomObjectsApi;

  constructor(custom: CustomObjectsApi) {
    this.custom = custom;
  }

  async getCluster(ref: ClusterRef): Promise<ClusterObject> {
    try {
      return (await this.custom.getNamespacedCustomObject({
        group: CAPI_GROUP,
        version: CAPI_VERSION,
        plural: 'clusters',
        namespace: ref.namespace,
        name: ref.name,
      })) as ClusterObject;
    } catch (err) {
      if (isNotFound(err)) {
        throw ApplicationFailure.nonRetryable(`Cluster ${ref.namespace}/${ref.name} not found`, 'ClusterNotFound');
      }
      throw err;
    }
  }

  async listMachines(ref: ClusterRef): Promise<MachineInfo[]> {
    const list = (await this.custom.listNamespacedCustomObject({
      group: CAPI_GROUP,
      version: CAPI_VERSION,
      plural: 'machines',
      namespace: ref.namespace,
      labelSelector: `${CLUSTER_NAME_LABEL}=${ref.name}`,
    })) as { items: MachineObject[] };
    return list.items.map((m) => ({
      name: m.metadata.name ?? '',
      controlPlane: m.metadata.labels?.[MACHINE_CONTROL_PLANE_LABEL] !== undefined,
      ...(m.status?.nodeRef?.name ? { nodeName: m.status.nodeRef.name } : {}),
    }));
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
        const names = mds.map((md) => md.metadata.name ?? '').sort();
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
      const topologyName = md.metadata.labels?.[TOPOLOGY_DEPLOYMENT_NAME_LABEL];
      if (topologyName !== undefined && cluster.spec?.topology) continue; // the topology's, handled above
      const replicas = md.spec?.replicas;
      if (typeof replicas !== 'number' || !md.metadata.name) continue;
      plan.push({
        machineDeployment: md.metadata.name,
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
        resourceVersion: cluster.metadata.resourceVersion,
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
