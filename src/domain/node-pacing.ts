// Node pacing of in-place updates, as kured's
// --blocking-pod-selector and system-upgrade-controller's postCompleteDelay:
// a node's update holds before its cordon while pods matching a label selector
// run on it (up to a timeout, then the update fails with the node untouched),
// and after each node is given back the update waits a while before it reports
// done and gives its place to the next machine. ExtensionConfig settings, the
// Machine's Cluster annotations winning key by key (read by the preflight).
//
// Pure module: no I/O.
import { formatDuration, parseGoDuration } from './durations.ts';
import { parsePolicyPodSelector } from './label-selector.ts';
import { key, valueOverLimit, type PolicyKey } from './policy-keys.ts';

export const nodePacingKeys = {
  blockingPodSelector: key('blockingPodSelector', 'blocking-pod-selector'),
  blockingPodTimeout: key('blockingPodTimeout', 'blocking-pod-timeout'),
  postUpdateDelay: key('postUpdateDelay', 'post-update-delay'),
} as const;

/** Failure type of a hold that outlasted blockingPodTimeout (the node untouched). */
export const BLOCKING_PODS_RUNNING = 'BlockingPodsRunning';

/** How long a node's update holds for blocking pods when no timeout is set. */
export const DEFAULT_BLOCKING_POD_TIMEOUT_MS = 30 * 60_000;
/** Longest hold and longest delay accepted: a node's update keeps its place meanwhile. */
export const NODE_PACING_MAX_MS = 24 * 3_600_000;

/** The pacing of one source (settings, or a Cluster's annotations); unset = not set there. */
export interface NodePacing {
  /** Label selector of pods whose presence on the node holds its update (validated). */
  blockingPodSelector?: string;
  blockingPodTimeoutMs?: number;
  /** Wait after the node is given back, before the update reports done and frees its place. */
  postUpdateDelayMs?: number;
}

export type NodePacingResult = { ok: true; pacing: NodePacing } | { ok: false; message: string };

/**
 * Reads the pacing keys from one source: `values` by setting name (`from: 'setting'`) or by
 * annotation (`from: 'annotation'`); `prefix` goes before what a message names (e.g. `Cluster ns/c `).
 */
export function parseNodePacing(
  values: Readonly<Record<string, string>>,
  from: 'setting' | 'annotation',
  prefix = '',
): NodePacingResult {
  const problems: string[] = [];
  const pacing: NodePacing = {};
  const read = (k: PolicyKey) => {
    const name = from === 'setting' ? k.setting : k.annotation;
    const tooLong = valueOverLimit(`${prefix}${from} ${name}`, k.setting, values[name] ?? '');
    if (tooLong !== undefined) {
      problems.push(tooLong);
      return undefined;
    }
    const v = values[name]?.trim();
    return v === undefined || v === '' ? undefined : { name: `${prefix}${from} ${name}`, value: v };
  };
  const duration = (k: PolicyKey): number | undefined => {
    const v = read(k);
    if (v === undefined) return undefined;
    const ms = parseGoDuration(v.value);
    if (ms === undefined) problems.push(`${v.name}=${JSON.stringify(v.value)}: not a duration (use e.g. 30m, 2h)`);
    else if (ms > NODE_PACING_MAX_MS)
      problems.push(`${v.name}=${JSON.stringify(v.value)}: at most ${formatDuration(NODE_PACING_MAX_MS)}`);
    else return ms;
    return undefined;
  };
  const selector = read(nodePacingKeys.blockingPodSelector);
  if (selector !== undefined) {
    const parsed = parsePolicyPodSelector(
      selector.name,
      selector.value,
      'a blocking selector',
      'holds the node for every pod without that label',
    );
    if (parsed.ok) pacing.blockingPodSelector = selector.value;
    else problems.push(parsed.message);
  }
  const timeout = duration(nodePacingKeys.blockingPodTimeout);
  if (timeout !== undefined) pacing.blockingPodTimeoutMs = timeout;
  const delay = duration(nodePacingKeys.postUpdateDelay);
  if (delay !== undefined) pacing.postUpdateDelayMs = delay;
  return problems.length ? { ok: false, message: problems.join('; ') } : { ok: true, pacing };
}

/** Pods matching the selector on the node, as the hold reports them. */
export interface BlockingPods {
  count: number;
  /** `namespace/name` of the first (by namespace, then name). */
  first?: string;
}

/** The selector as a message quotes it, with where it came from. */
export function blockingSelectorText(selector: string, fromAnnotation: boolean): string {
  const k = nodePacingKeys.blockingPodSelector;
  return `${JSON.stringify(selector)} (${fromAnnotation ? `annotation ${k.annotation}` : `setting ${k.setting}`})`;
}

/** What a held update says: deterministic for the pods it found. */
export function blockingPodsDetail(nodeName: string, selectorText: string, found: BlockingPods): string {
  const first = found.first !== undefined ? `, first ${found.first}` : '';
  return `${found.count} pod(s) matching blocking pod selector ${selectorText} run on node ${nodeName}${first}`;
}
