// Cluster API's own pacing annotations (v1.14, core/v1beta2 common_types.go). They sit on the
// worker topologies of a Cluster (`spec.topology.workers.machineDeployments[].metadata.annotations`,
// the same for machinePools), never on the Cluster itself:
//  - defer-upgrade: that one MachineDeployment/MachinePool keeps its version;
//  - hold-upgrade-sequence: that one and every one after it in the list keep their version.
// CAPI still moves the control plane and the other workers, but does not call AfterWorkersUpgrade or
// AfterClusterUpgrade while any worker is deferred: the cluster's upgrade cannot complete.
// Pure: the fleet rollout's activities and the docs build on it.

export const CAPI_DEFER_UPGRADE_ANNOTATION = 'topology.cluster.x-k8s.io/defer-upgrade';
export const CAPI_HOLD_UPGRADE_SEQUENCE_ANNOTATION = 'topology.cluster.x-k8s.io/hold-upgrade-sequence';
/** On the Cluster: how many MachineDeployments/MachinePools CAPI upgrades at once (default 1). */
export const CAPI_UPGRADE_CONCURRENCY_ANNOTATION = 'topology.cluster.x-k8s.io/upgrade-concurrency';

/** The prefix of every message about a deferral: the rollout's status, memo and CLI show it as is. */
export const DEFERRED_PREFIX = 'deferred by CAPI annotation';

export interface WorkerTopology {
  name?: string;
  metadata?: { annotations?: Record<string, string> };
}

/** The part of a Cluster this reads: its worker topologies. */
export interface PacedTopology {
  workers?: { machineDeployments?: WorkerTopology[]; machinePools?: WorkerTopology[] };
}

export interface CapiDeferral {
  /** The annotation that defers (the first found, defer-upgrade before hold-upgrade-sequence). */
  annotation: string;
  /** Kind and name of each worker topology CAPI keeps at its version, in topology order. */
  deferred: string[];
  /** One line, deterministic, e.g. `deferred by CAPI annotation topology.cluster.x-k8s.io/defer-upgrade (MachineDeployment md-1)`. */
  message: string;
}

const has = (t: WorkerTopology, annotation: string) => t.metadata?.annotations?.[annotation] !== undefined;

/** The names CAPI defers in one list (isMachineDeploymentDeferred / isMachinePoolDeferred), and why. */
function deferredIn(list: WorkerTopology[]): { name: string; annotation: string }[] {
  const out: { name: string; annotation: string }[] = [];
  let held = false;
  for (const t of list) {
    held ||= has(t, CAPI_HOLD_UPGRADE_SEQUENCE_ANNOTATION);
    const annotation = has(t, CAPI_DEFER_UPGRADE_ANNOTATION)
      ? CAPI_DEFER_UPGRADE_ANNOTATION
      : held
        ? CAPI_HOLD_UPGRADE_SEQUENCE_ANNOTATION
        : undefined;
    if (annotation) out.push({ name: t.name ?? '', annotation });
  }
  return out;
}

/** Whether CAPI would keep some worker of this topology at its version; undefined when none. */
export function capiDeferral(topology: PacedTopology | undefined): CapiDeferral | undefined {
  const found = [
    ...deferredIn(topology?.workers?.machineDeployments ?? []).map((d) => ({ ...d, kind: 'MachineDeployment' })),
    ...deferredIn(topology?.workers?.machinePools ?? []).map((d) => ({ ...d, kind: 'MachinePool' })),
  ];
  if (found.length === 0) return undefined;
  const annotations = [CAPI_DEFER_UPGRADE_ANNOTATION, CAPI_HOLD_UPGRADE_SEQUENCE_ANNOTATION].filter((a) =>
    found.some((d) => d.annotation === a),
  );
  const deferred = found.map((d) => `${d.kind} ${d.name}`);
  const shown = deferred.length > 3 ? [...deferred.slice(0, 3), `${deferred.length - 3} more`] : deferred;
  return {
    annotation: annotations[0] ?? CAPI_DEFER_UPGRADE_ANNOTATION,
    deferred,
    message: `${DEFERRED_PREFIX} ${annotations.join(' and ')} (${shown.join(', ')})`,
  };
}

export function isDeferralMessage(message: string | undefined): boolean {
  return message?.startsWith(DEFERRED_PREFIX) === true;
}
