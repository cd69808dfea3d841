// Which pods a node drain evicts, leaves alone, or cannot proceed past:
// kubectl-drain semantics (k8s.io/kubectl/pkg/drain/filters.go) plus Cluster
// API's `cluster.x-k8s.io/drain: skip` label. Checked in this order, the first
// match deciding:
//   1. being deleted (deletionTimestamp set)      → skip ("already terminating")
//   2. controlled by a DaemonSet                  → skip
//   3. mirror pod (kubernetes.io/config.mirror)   → skip
//   4. labelled cluster.x-k8s.io/drain=skip       → skip
//   4b. matching the skip selector (drainSkipPodSelector) → skip
//   5. phase Succeeded or Failed                  → evict (finished pods may always go)
//   6. emptyDir volumes without deleteEmptyDirData, and/or no controller
//      without force                              → blocker (all reasons named)
//   7. otherwise                                  → evict (with a warning when
//      emptyDir data is deleted or a pod without controller is forced out)
// Every list is sorted by namespace, then name (UTF-16 code units).
//
// Pure module: no I/O. The pod type is a structural subset of V1Pod, so
// @kubernetes/client-node pods can be passed as they are.

import { parsePolicyPodSelector, selectorMatches, type LabelRequirement } from './label-selector.ts';

export interface DrainOwnerReference {
  readonly kind: string;
  readonly name: string;
  readonly controller?: boolean | undefined;
}

export interface DrainPod {
  readonly metadata?:
    | {
        readonly name?: string | undefined;
        readonly namespace?: string | undefined;
        readonly annotations?: Readonly<Record<string, string>> | undefined;
        readonly labels?: Readonly<Record<string, string>> | undefined;
        readonly ownerReferences?: readonly DrainOwnerReference[] | undefined;
        readonly deletionTimestamp?: Date | string | null | undefined;
      }
    | undefined;
  readonly spec?:
    | {
        readonly nodeName?: string | undefined;
        readonly terminationGracePeriodSeconds?: number | undefined;
        readonly volumes?:
          readonly { readonly name: string; readonly emptyDir?: object | null | undefined }[] | undefined;
      }
    | undefined;
  readonly status?: { readonly phase?: string | undefined } | undefined;
}

export interface DrainOptions {
  /** Evict pods with emptyDir volumes (their data is lost); otherwise they block the drain. */
  readonly deleteEmptyDirData: boolean;
  /** Evict pods that declare no controller (they are not recreated); otherwise they block the drain. */
  readonly force: boolean;
  /** Pods carrying this label value are left alone (default `cluster.x-k8s.io/drain: skip`). */
  readonly skipLabel?: { readonly key: string; readonly value: string } | undefined;
  /** Pods matching this selector are left alone too (an empty one matches none). */
  readonly skipSelector?: readonly LabelRequirement[] | undefined;
}

/**
 * A skip selector (drainSkipPodSelector) from its text; `name` is what the message names, as in
 * `setting drainSkipPodSelector` or `Cluster ns/c annotation …`. Blank = skip nothing. Refused: no
 * label selector, too long, or only `!=`/`notin`/`!key` (those would skip nearly every pod).
 */
export function parseSkipPodSelector(
  name: string,
  text: string,
): { ok: true; selector: LabelRequirement[] } | { ok: false; message: string } {
  return parsePolicyPodSelector(name, text, 'a skip selector', 'skips every pod without that label');
}

export const DEFAULT_SKIP_LABEL = { key: 'cluster.x-k8s.io/drain', value: 'skip' } as const;
export const MIRROR_POD_ANNOTATION = 'kubernetes.io/config.mirror';

export interface PodVerdict<P extends DrainPod = DrainPod> {
  readonly pod: P;
  readonly reason: string;
}

export interface DrainFilterResult<P extends DrainPod = DrainPod> {
  /** Pods to evict through the Eviction API. */
  readonly evict: readonly P[];
  /** Pods the drain leaves alone. */
  readonly skip: readonly PodVerdict<P>[];
  /** Pods that stop the drain under the given options. */
  readonly blockers: readonly PodVerdict<P>[];
  /** Evicted pods worth a note (emptyDir data deleted, no controller). */
  readonly warnings: readonly PodVerdict<P>[];
}

export const DRAIN_REASONS = {
  terminating: 'already terminating',
  daemonSet: 'DaemonSet-managed',
  mirror: 'mirror pod',
  skipLabel: 'labelled to skip drain',
  skipSelector: 'matches the drain skip selector',
  emptyDir: 'has emptyDir volumes (local data)',
  noController: 'declares no controller',
} as const;

/** `namespace/name` of a pod. */
export function podKey(pod: DrainPod): string {
  return `${pod.metadata?.namespace ?? ''}/${pod.metadata?.name ?? ''}`;
}

function comparePods(a: DrainPod, b: DrainPod): number {
  const na = a.metadata?.namespace ?? '';
  const nb = b.metadata?.namespace ?? '';
  if (na !== nb) return na < nb ? -1 : 1;
  const ma = a.metadata?.name ?? '';
  const mb = b.metadata?.name ?? '';
  return ma === mb ? 0 : ma < mb ? -1 : 1;
}

function controllerOf(pod: DrainPod): DrainOwnerReference | undefined {
  return pod.metadata?.ownerReferences?.find((o) => o.controller === true);
}

function hasEmptyDir(pod: DrainPod): boolean {
  return (pod.spec?.volumes ?? []).some((v) => v.emptyDir !== undefined && v.emptyDir !== null);
}

function hasOwn(record: Readonly<Record<string, string>> | undefined, key: string): boolean {
  return record !== undefined && Object.hasOwn(record, key);
}

/** Sorts a node's pods into evict / skip / blockers (and warnings) with kubectl-drain rules. */
export function filterPodsForDrain<P extends DrainPod>(
  pods: readonly P[],
  options: DrainOptions,
): DrainFilterResult<P> {
  const skipLabel = options.skipLabel ?? DEFAULT_SKIP_LABEL;
  const evict: P[] = [];
  const skip: PodVerdict<P>[] = [];
  const blockers: PodVerdict<P>[] = [];
  const warnings: PodVerdict<P>[] = [];
  for (const pod of [...pods].sort(comparePods)) {
    const meta = pod.metadata;
    const controller = controllerOf(pod);
    if (meta?.deletionTimestamp !== undefined && meta.deletionTimestamp !== null) {
      skip.push({ pod, reason: DRAIN_REASONS.terminating });
    } else if (controller?.kind === 'DaemonSet') {
      skip.push({ pod, reason: DRAIN_REASONS.daemonSet });
    } else if (hasOwn(meta?.annotations, MIRROR_POD_ANNOTATION)) {
      skip.push({ pod, reason: DRAIN_REASONS.mirror });
    } else if (hasOwn(meta?.labels, skipLabel.key) && meta?.labels?.[skipLabel.key] === skipLabel.value) {
      skip.push({ pod, reason: DRAIN_REASONS.skipLabel });
    } else if (options.skipSelector && selectorMatches(options.skipSelector, meta?.labels)) {
      skip.push({ pod, reason: DRAIN_REASONS.skipSelector });
    } else if (pod.status?.phase === 'Succeeded' || pod.status?.phase === 'Failed') {
      evict.push(pod);
    } else {
      const problems: string[] = [];
      if (hasEmptyDir(pod)) problems.push(DRAIN_REASONS.emptyDir);
      if (controller === undefined) problems.push(DRAIN_REASONS.noController);
      const blocking = problems.filter(
        (p) =>
          (p === DRAIN_REASONS.emptyDir && !options.deleteEmptyDirData) ||
          (p === DRAIN_REASONS.noController && !options.force),
      );
      if (blocking.length > 0) {
        blockers.push({ pod, reason: blocking.join(', ') });
      } else {
        evict.push(pod);
        if (problems.length > 0) warnings.push({ pod, reason: problems.join(', ') });
      }
    }
  }
  return { evict, skip, blockers, warnings };
}

/** An eviction refused (HTTP 429) because of a PodDisruptionBudget in the pod's namespace. */
export interface PdbBlock {
  readonly namespace: string;
  readonly pod: string;
  readonly pdb: string;
}

export const SUMMARY_LIMIT = 5;

function listWithMore(items: readonly string[], limit: number): string {
  const shown = items.slice(0, limit).join(', ');
  return items.length > limit ? `${shown} and ${items.length - limit} more` : shown;
}

/**
 * A stable one-line status of a drain: counts, then up to five blocking pods
 * (filter blockers and PDB-refused evictions, sorted) with their reasons, then
 * up to five PDBs. Same input → same text; no timestamps or per-call values.
 */
export function summarizeDrain(result: DrainFilterResult, pdbBlocked: readonly PdbBlock[] = []): string {
  const blocking = new Map<string, string[]>();
  const add = (key: string, reason: string) => {
    const reasons = blocking.get(key) ?? [];
    if (!reasons.includes(reason)) reasons.push(reason);
    blocking.set(key, reasons);
  };
  for (const b of result.blockers) add(podKey(b.pod), b.reason);
  const pdbs = new Set<string>();
  for (const b of pdbBlocked) {
    add(`${b.namespace}/${b.pod}`, `PDB ${b.pdb}`);
    pdbs.add(`${b.namespace}/${b.pdb}`);
  }
  const head = `drain: ${result.evict.length} to evict, ${result.skip.length} skipped`;
  if (blocking.size === 0) return `${head}, none blocking`;
  const pods = [...blocking.keys()].sort().map((k) => `${k} (${[...(blocking.get(k) ?? [])].sort().join('; ')})`);
  let line = `${head}, ${blocking.size} blocking: ${listWithMore(pods, SUMMARY_LIMIT)}`;
  if (pdbs.size > 0) line += `; PDBs: ${listWithMore([...pdbs].sort(), SUMMARY_LIMIT)}`;
  return line;
}
