// A fleet rollout's settings and waves, checked and computed before anything
// is touched: bad input is refused with a message naming the field; the
// selection is split into waves in a stable order (namespace, then name), and
// clusters already at or above the target are skipped with the reason.
// Pure module: no I/O.
import type { FleetRolloutInput, RolloutCluster, RolloutWave, SelectedCluster } from '../model/fleet-rollout.ts';
import { parseGoDuration } from './durations.ts';
import { compareVersions, tryParseVersion, versionForMessage } from './versions.ts';

/** More waves than this is a typo, not a plan. */
export const MAX_WAVES = 20;
export const DEFAULT_CLUSTER_DEADLINE_MS = 6 * 3_600_000;
const NAME = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

/** The input as the workflow uses it: durations in milliseconds, approvals as sets. */
export interface RolloutSettings {
  maxConcurrent: number;
  failureBudget: number;
  soakMs: number;
  clusterDeadlineMs: number;
  approveBefore: number[];
  approveAfter: number[];
}

export type Checked<T> = { ok: true; value: T } | { ok: false; message: string };

const refuse = (message: string): { ok: false; message: string } => ({ ok: false, message });

/** Checks everything that does not need the selection. */
export function checkRolloutInput(input: FleetRolloutInput): Checked<RolloutSettings> {
  if (!NAME.test(input.name ?? ''))
    return refuse(`name ${JSON.stringify(input.name)} must be a DNS-1123 label (lowercase, digits, '-', ≤ 63)`);
  if (!tryParseVersion(input.targetVersion ?? '').ok)
    return refuse(
      `targetVersion ${JSON.stringify(versionForMessage(String(input.targetVersion)))} is not a Kubernetes version`,
    );
  if (typeof input.selector?.labelSelector !== 'string')
    return refuse('selector.labelSelector is required (may be empty)');
  for (const ns of input.selector.namespaces ?? [])
    if (!NAME.test(ns)) return refuse(`selector.namespaces: ${JSON.stringify(ns)} is not a namespace name`);
  const waves = checkWaveSpecs(input.waves);
  if (!waves.ok) return waves;
  if (!Number.isInteger(input.maxConcurrent) || input.maxConcurrent < 1)
    return refuse(`maxConcurrent must be a whole number ≥ 1, got ${JSON.stringify(input.maxConcurrent)}`);
  if (!Number.isInteger(input.failureBudget) || input.failureBudget < 0)
    return refuse(`failureBudget must be a whole number ≥ 0, got ${JSON.stringify(input.failureBudget)}`);
  const soakMs = parseGoDuration(input.soak ?? '');
  if (soakMs === undefined) return refuse(`soak ${JSON.stringify(input.soak)} is not a duration like 30m or 0s`);
  const deadline =
    input.clusterDeadline === undefined ? DEFAULT_CLUSTER_DEADLINE_MS : parseGoDuration(input.clusterDeadline);
  if (deadline === undefined || deadline <= 0)
    return refuse(`clusterDeadline ${JSON.stringify(input.clusterDeadline)} is not a positive duration like 6h`);
  for (const [field, list] of [
    ['approveBefore', input.approveBefore],
    ['approveAfter', input.approveAfter],
  ] as const) {
    for (const w of list ?? [])
      if (!Number.isInteger(w) || w < 1 || w > input.waves.length)
        return refuse(`${field}: wave ${JSON.stringify(w)} does not exist (waves are 1 to ${input.waves.length})`);
  }
  return {
    ok: true,
    value: {
      maxConcurrent: input.maxConcurrent,
      failureBudget: input.failureBudget,
      soakMs,
      clusterDeadlineMs: deadline,
      approveBefore: [...new Set(input.approveBefore ?? [])].sort((a, b) => a - b),
      approveAfter: [...new Set(input.approveAfter ?? [])].sort((a, b) => a - b),
    },
  };
}

type WaveSpec = { count: number } | { percent: number };

function parseWave(text: string): WaveSpec | undefined {
  const t = text.trim();
  const pct = /^(\d{1,3}(?:\.\d+)?)%$/.exec(t);
  if (pct) {
    const percent = Number(pct[1]);
    return percent > 0 && percent <= 100 ? { percent } : undefined;
  }
  return /^[1-9]\d{0,5}$/.test(t) ? { count: Number(t) } : undefined;
}

function checkWaveSpecs(waves: unknown): Checked<WaveSpec[]> {
  if (!Array.isArray(waves) || waves.length === 0) return refuse('waves must list at least one wave, ending at 100%');
  if (waves.length > MAX_WAVES) return refuse(`waves: ${waves.length} waves, at most ${MAX_WAVES}`);
  const specs: WaveSpec[] = [];
  for (const [i, w] of waves.entries()) {
    const spec = typeof w === 'string' ? parseWave(w) : undefined;
    if (!spec)
      return refuse(`waves[${i}] ${JSON.stringify(w)} is not a count (e.g. 1) or a percentage (e.g. 10%) above 0`);
    specs.push(spec);
  }
  const last = specs[specs.length - 1];
  if (!last || !('percent' in last) || last.percent !== 100)
    return refuse(`waves must end at 100% (the last wave is ${JSON.stringify(waves[waves.length - 1])})`);
  return { ok: true, value: specs };
}

/** Cumulative wave sizes for `n` clusters: each at least one more than the one before, the last `n`. */
export function waveBoundaries(waves: string[], n: number): number[] {
  const specs = checkWaveSpecs(waves);
  if (!specs.ok) throw new Error(specs.message);
  const bounds: number[] = [];
  let previous = 0;
  for (const spec of specs.value) {
    const want = 'count' in spec ? spec.count : Math.ceil((spec.percent * n) / 100);
    const bound = Math.min(n, Math.max(want, previous));
    // A wave that adds nothing (10% of 5 after 1) is dropped rather than run empty.
    if (bound > previous) bounds.push(bound);
    previous = bound;
  }
  return bounds;
}

export interface RolloutPlan {
  clusters: RolloutCluster[];
  waves: RolloutWave[];
}

/**
 * The rollout's clusters and waves from what the selection found. Clusters at or above the target
 * are skipped (reported); a target below every cluster it could touch is refused, as is an empty
 * selection.
 */
export function planRollout(input: FleetRolloutInput, selected: SelectedCluster[]): Checked<RolloutPlan> {
  if (selected.length === 0)
    return refuse(`selector matched no clusters (${describeSelector(input)}): nothing to roll out`);
  const sorted = [...selected].sort((a, b) =>
    a.namespace === b.namespace ? (a.name < b.name ? -1 : 1) : a.namespace < b.namespace ? -1 : 1,
  );
  const clusters: RolloutCluster[] = [];
  const eligible: RolloutCluster[] = [];
  let above: SelectedCluster | undefined;
  for (const c of sorted) {
    if (c.skip) {
      clusters.push({ ...c, state: 'skipped', reason: c.skip });
      continue;
    }
    const parsed = tryParseVersion(c.version);
    if (!parsed.ok) {
      clusters.push({
        ...c,
        state: 'skipped',
        reason: `spec.topology.version ${JSON.stringify(versionForMessage(c.version))} is not a Kubernetes version`,
      });
      continue;
    }
    const cmp = compareVersions(c.version, input.targetVersion);
    if (cmp === 0) {
      clusters.push({ ...c, state: 'skipped', reason: `already at ${input.targetVersion}` });
    } else if (cmp === 1 || cmp === 2) {
      above ??= c;
      clusters.push({
        ...c,
        state: 'skipped',
        reason: `at ${c.version}, above or beside the target ${input.targetVersion}`,
      });
    } else {
      const entry: RolloutCluster = { ...c, state: 'pending' };
      clusters.push(entry);
      eligible.push(entry);
    }
  }
  if (eligible.length === 0 && above)
    return refuse(
      `targetVersion ${input.targetVersion} is below the version of cluster ${above.namespace}/${above.name} (${above.version}) and no selected cluster is below it: a rollout never downgrades`,
    );
  const bounds = waveBoundaries(input.waves, eligible.length);
  const waves: RolloutWave[] = bounds.map((bound, i) => ({
    wave: i + 1,
    size: bound - (bounds[i - 1] ?? 0),
    state: 'pending',
  }));
  bounds.forEach((bound, i) => {
    for (let k = bounds[i - 1] ?? 0; k < bound; k++) {
      const c = eligible[k];
      if (c) c.wave = i + 1;
    }
  });
  return { ok: true, value: { clusters, waves } };
}

function describeSelector(input: FleetRolloutInput): string {
  const parts = [`labelSelector ${JSON.stringify(input.selector.labelSelector)}`];
  if (input.selector.namespaces?.length) parts.push(`namespaces ${input.selector.namespaces.join(',')}`);
  if (input.selector.clusterClass) parts.push(`clusterClass ${input.selector.clusterClass}`);
  return parts.join(', ');
}

/** `1, 10%, 100%` with their sizes for `n` clusters: what `rollout start` prints before it starts. */
export function describeWaves(waves: string[], n: number): string {
  return waveBoundaries(waves, n)
    .map((b, i, all) => `wave ${i + 1}: ${b - (all[i - 1] ?? 0)}`)
    .join(', ');
}
