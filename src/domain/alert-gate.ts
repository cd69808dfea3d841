// The alert gate's pure rules: which alerts hold an upgrade, what the
// gate says (deterministic: sorted names, capped, no timestamps or values), the filter's safety
// checks, and the Alertmanager silence's matchers and comment.
import { ALERT_GATE_ID, ALERT_NAMES_KEPT, type AlertPolicy, type SilenceMatcher } from '../model/alerts.ts';

/** Longest alertFilter accepted. */
export const MAX_ALERT_FILTER_LENGTH = 256;

/**
 * Why `pattern` is refused as alertFilter, or undefined. JavaScript's engine backtracks, so
 * patterns that can take exponential time are refused up front: backreferences, lookarounds,
 * and a group under an unbounded quantifier (`*`, `+`, `{n,}`) holding a quantifier or `|`
 * (`(a+)+`, `(a|aa)*`). The activity also matches in a worker thread with a deadline and on capped
 * text, so a pattern that slips through costs a bounded moment, never the worker.
 */
export function checkAlertFilter(pattern: string): string | undefined {
  if (pattern.length > MAX_ALERT_FILTER_LENGTH) return `longer than ${MAX_ALERT_FILTER_LENGTH} characters`;
  try {
    new RegExp(pattern, 'u');
  } catch (err) {
    return `not a regular expression (${err instanceof Error ? err.message.replace(/^Invalid regular expression: /, '') : 'invalid'})`;
  }
  if (/\\[1-9]|\\k</.test(pattern)) return 'backreferences are not allowed';
  if (/\(\?<?[=!]/.test(pattern)) return 'lookarounds are not allowed';
  // A scan over groups: does an unbounded quantifier follow a group holding a quantifier or `|`?
  const stack: { risky: boolean }[] = [{ risky: false }];
  let inClass = false;
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === '\\') {
      i++;
      continue;
    }
    if (inClass) {
      if (c === ']') inClass = false;
      continue;
    }
    const top = stack[stack.length - 1] as { risky: boolean };
    if (c === '[') inClass = true;
    else if (c === '(') {
      stack.push({ risky: false });
      // `(?:` and `(?<name>` open a group; their `?` is no quantifier.
      if (pattern[i + 1] === '?') i = pattern[i + 2] === '<' ? pattern.indexOf('>', i) : i + 2;
    } else if (c === '|') top.risky = true;
    else if (c === '*' || c === '+' || c === '?' || c === '{') top.risky = true;
    else if (c === ')') {
      const group = stack.pop() as { risky: boolean };
      const next = pattern.slice(i + 1);
      const unbounded = /^(\*|\+|\{\d*,\})/.test(next);
      if (group.risky && unbounded) return 'a repeated group may hold neither a quantifier nor | (e.g. (a+)+)';
      const parent = stack[stack.length - 1] as { risky: boolean };
      if (group.risky || /^[*+?{]/.test(next)) parent.risky = true;
    }
  }
  return undefined;
}

/** One alert of Prometheus's `GET /api/v1/alerts`, as far as the gate reads it. */
export interface PrometheusAlert {
  labels: Record<string, string>;
  state: string;
}

/** Text the filter is matched against: `name{label="value",…}` with labels sorted, capped. */
export function alertText(alert: PrometheusAlert): string {
  const { alertname = '', ...rest } = alert.labels;
  const labels = Object.keys(rest)
    .sort()
    .map((k) => `${k}=${JSON.stringify(rest[k])}`)
    .join(',');
  return `${alertname}{${labels}}`.slice(0, MAX_ALERT_TEXT);
}
export const MAX_ALERT_TEXT = 1024;

/** The value of the cluster label for this cluster. */
export const clusterLabelValue = (cluster: { namespace: string; name: string }) =>
  `${cluster.namespace}/${cluster.name}`;

/**
 * Alerts that may hold, before the filter: firing (or pending too), not ignored, and not about
 * another cluster (an alert with the cluster label and another value).
 */
export function candidateAlerts(
  alerts: readonly PrometheusAlert[],
  policy: Pick<AlertPolicy, 'firingOnly' | 'ignore' | 'clusterLabel'>,
  cluster: { namespace: string; name: string },
): PrometheusAlert[] {
  const own = clusterLabelValue(cluster);
  return alerts.filter((a) => {
    if (a.state !== 'firing' && (policy.firingOnly || a.state !== 'pending')) return false;
    const name = a.labels.alertname ?? '';
    if (name === '' || policy.ignore.includes(name)) return false;
    const about = a.labels[policy.clusterLabel];
    return about === undefined || about === own;
  });
}

/** Sorted distinct names, the first ALERT_NAMES_KEPT kept, and how many there were. */
export function holdingNames(alerts: readonly PrometheusAlert[]): { firing: string[]; firingCount: number } {
  const names = [...new Set(alerts.map((a) => (a.labels.alertname ?? '').slice(0, 128)))].sort();
  return { firing: names.slice(0, ALERT_NAMES_KEPT), firingCount: names.length };
}

/** Names in a message: at most this many, then "and N more". */
const NAMES_IN_MESSAGE = 3;

function alertList(firing: readonly string[], count: number): string {
  const shown = firing.slice(0, NAMES_IN_MESSAGE);
  const more = count - shown.length;
  return `${count === 1 ? 'alert' : 'alerts'} ${shown.join(', ')}${more > 0 ? ` and ${more} more` : ''}`;
}

/** The gate while alerts fire: `upgrade to v1.35.0 held: alert KubeNodeNotReady firing in prometheus (gate alerts)`. */
export function alertsHeldMessage(target: string, firing: readonly string[], count: number): string {
  return `upgrade to ${target} held: ${alertList(firing, count)} firing in prometheus (gate ${ALERT_GATE_ID})`;
}

/** The gate while Prometheus cannot be read. */
export function alertSourceUnreachableMessage(target: string, cause: string): string {
  return `upgrade to ${target} held: the alert source prometheus is unreachable: ${cause} (gate ${ALERT_GATE_ID})`;
}

/** The failure once the hold timeout has passed. */
export function alertTimeoutCause(
  report: { firing: readonly string[]; firingCount: number } | { cause: string },
  timeout: string,
): string {
  if ('cause' in report)
    return `the alert source prometheus was unreachable for ${timeout}: ${report.cause} (gate ${ALERT_GATE_ID})`;
  return `${alertList(report.firing, report.firingCount)} still firing in prometheus after ${timeout} (gate ${ALERT_GATE_ID})`;
}

const MATCHER = /^\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*(?:,|$)/;
export const MAX_SILENCE_MATCHERS = 16;

/** `alertname=~"KubeNode.*",severity!="info"`: Alertmanager's matchers (values quoted). */
export function parseSilenceMatchers(
  text: string,
): { ok: true; value: SilenceMatcher[] } | { ok: false; reason: string } {
  const out: SilenceMatcher[] = [];
  let rest = text.trim();
  while (rest !== '') {
    const m = MATCHER.exec(rest);
    if (!m)
      return {
        ok: false,
        reason: `expected name="value", name=~"regexp", name!="value" or name!~"regexp" at ${JSON.stringify(rest.slice(0, 40))}`,
      };
    const [whole, name, op, raw] = m as unknown as [string, string, string, string];
    const value = JSON.parse(`"${raw}"`) as string;
    if (value.length > 256) return { ok: false, reason: `the value of ${name} is longer than 256 characters` };
    if (op.endsWith('~')) {
      try {
        new RegExp(value, 'u');
      } catch {
        return { ok: false, reason: `the value of ${name} is not a regular expression` };
      }
    }
    out.push({ name, value, isRegex: op.endsWith('~'), isEqual: op.startsWith('=') });
    // Counted as they are read: each step copies the rest, so the count bounds the work.
    if (out.length > MAX_SILENCE_MATCHERS) return { ok: false, reason: `at most ${MAX_SILENCE_MATCHERS} matchers` };
    rest = rest.slice(whole.length).trim();
  }
  if (out.length === 0) return { ok: false, reason: 'no matcher' };
  return { ok: true, value: out };
}

/** The silence's matchers: the configured ones and, always, the cluster's own label. */
export function silenceMatchers(
  policy: Pick<AlertPolicy, 'silenceMatchers' | 'clusterLabel'>,
  cluster: { namespace: string; name: string },
): SilenceMatcher[] {
  return [
    ...policy.silenceMatchers.filter((m) => m.name !== policy.clusterLabel),
    { name: policy.clusterLabel, value: clusterLabelValue(cluster), isRegex: false, isEqual: true },
  ];
}

export const SILENCE_CREATED_BY = 'capi-upgrade-orchestrator';

/** Names the silence of one step of one upgrade: a retried activity finds it by this. */
export function silenceComment(workflowId: string, target: string, step: string): string {
  return `capi-upgrade-orchestrator: upgrade to ${target}, step ${step} (workflow ${workflowId})`;
}
