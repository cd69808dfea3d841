// The alert gate's policy: built-in default (off) ← ExtensionConfig
// setting ← Cluster annotation, like every policy. A bad value is an error naming the annotation
// or setting and the value, never echoing a secret (a token is only ever named by its Secret).
import { parseGoDuration } from './durations.ts';
import { checkAlertFilter, parseSilenceMatchers } from './alert-gate.ts';
import { trimTrailing } from './strings.ts';
import {
  checkedValue,
  key,
  lookupPolicy,
  PolicyError,
  type PolicyKey,
  type PolicySources,
  type Tighter,
} from './policy-keys.ts';
import type { AlertPolicy, ObjectKeyRef } from '../model/alerts.ts';

export const alertPolicyKeys = {
  prometheusUrl: key('alertPrometheusUrl', 'alert-prometheus-url'),
  tokenSecret: key('alertTokenSecret', 'alert-token-secret'),
  ca: key('alertCa', 'alert-ca'),
  filter: key('alertFilter', 'alert-filter'),
  firingOnly: key('alertFiringOnly', 'alert-firing-only'),
  ignore: key('alertIgnore', 'alert-ignore'),
  holdTimeout: key('alertHoldTimeout', 'alert-hold-timeout'),
  clusterLabel: key('alertClusterLabel', 'alert-cluster-label'),
  alertmanagerUrl: key('alertmanagerUrl', 'alertmanager-url'),
  silenceMatchers: key('alertSilenceMatchers', 'alert-silence-matchers'),
  silenceDuration: key('alertSilenceDuration', 'alert-silence-duration'),
} as const;

/**
 * Settings-only: the base URLs (comma-separated) a Cluster annotation may choose for
 * `alert-prometheus-url` or `alertmanager-url`, besides the settings' own URLs. The worker sends
 * requests (and the platform's token) wherever these point, so a tenant who may annotate a
 * Cluster must never be able to name an address of their own choosing (SSRF).
 */
export const ALERT_ALLOWED_URLS_SETTING = 'alertAllowedUrls';
const MAX_ALLOWED_URLS = 32;

export const DEFAULT_ALERT_IGNORE = ['Watchdog', 'InfoInhibitor'];
export const DEFAULT_ALERT_HOLD_TIMEOUT_MS = 60 * 60_000;
export const DEFAULT_SILENCE_DURATION_MS = 2 * 60 * 60_000;
export const MAX_SILENCE_DURATION_MS = 24 * 60 * 60_000;
const MAX_URL_LENGTH = 2048;
const MAX_IGNORED = 64;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]{0,127}$/;
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const CONFIG_KEY = /^[-._a-zA-Z0-9]{1,253}$/;

type Parsed<T> = { ok: true; value: T } | { ok: false; reason: string };
const bad = (reason: string): { ok: false; reason: string } => ({ ok: false, reason });

/** An http(s) URL without credentials, query or fragment; returned without a trailing `/`. */
export function parseAlertUrl(text: string): Parsed<string> {
  if (text.length > MAX_URL_LENGTH) return bad(`longer than ${MAX_URL_LENGTH} characters`);
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return bad('not a URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return bad('must be an http or https URL');
  // Credentials in a URL end up in logs, memos and messages: a token goes in a Secret instead.
  if (url.username !== '' || url.password !== '') return bad('must not hold credentials (use alertTokenSecret)');
  if (url.search !== '' || url.hash !== '') return bad('must not hold a query or a fragment');
  return { ok: true, value: trimTrailing(url.href, '/') };
}

/**
 * `[<namespace>/]<name>/<key>` (a Secret's, or with `Secret/` or `ConfigMap/` in front for the CA).
 * An annotation may name only the Cluster's own namespace: whoever may annotate a Cluster must
 * not make the worker send another namespace's Secret to a URL of their choosing.
 */
export function parseObjectKeyRef(
  text: string,
  opts: { fromAnnotation: boolean; kinds: readonly ObjectKeyRef['kind'][] },
): Parsed<ObjectKeyRef> {
  let parts = text.split('/');
  let kind: ObjectKeyRef['kind'] = 'Secret';
  if (opts.kinds.includes(parts[0] as ObjectKeyRef['kind']) && parts.length >= 3) {
    kind = parts[0] as ObjectKeyRef['kind'];
    parts = parts.slice(1);
  }
  const kinds = opts.kinds.length > 1 ? `${opts.kinds.join(' or ')}/` : '';
  const shape = `expected ${kinds}[<namespace>/]<name>/<key>`;
  if (parts.length !== 2 && parts.length !== 3) return bad(shape);
  const [namespace, name, k] = parts.length === 3 ? parts : [undefined, ...parts];
  if (namespace !== undefined && opts.fromAnnotation)
    return bad(`an annotation may only name a ${kind} in the Cluster's namespace: use <name>/<key>`);
  if (namespace !== undefined && !DNS_LABEL.test(namespace))
    return bad(`${JSON.stringify(namespace)} is not a namespace name`);
  if (!name || !DNS_SUBDOMAIN.test(name)) return bad(`${JSON.stringify(name ?? '')} is not a ${kind} name`);
  if (!k || !CONFIG_KEY.test(k)) return bad(`${JSON.stringify(k ?? '')} is not a key`);
  return { ok: true, value: { kind, ...(namespace !== undefined ? { namespace } : {}), name, key: k } };
}

/** alertIgnore: distinct alert names, sorted. */
function ignoreList(v: string): Parsed<string[]> {
  const names = [
    ...new Set(
      v
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean),
    ),
  ];
  if (names.length > MAX_IGNORED) return bad(`at most ${MAX_IGNORED} alert names`);
  const wrong = names.find((n) => !LABEL_NAME.test(n));
  return wrong === undefined ? { ok: true, value: names.sort() } : bad(`${JSON.stringify(wrong)} is not an alert name`);
}

/** Bound alertIgnore: an annotation may ignore fewer alerts than the setting, never others. */
const ignoresNoMore: Tighter = (a, s) => {
  const [mine, platform] = [ignoreList(a), ignoreList(s)];
  return !mine.ok || !platform.ok || mine.value.every((n) => platform.value.includes(n));
};

/** The URLs an annotation may name: both settings' URLs and the allow-list setting's. */
function allowedAnnotationUrls(settings: PolicySources['settings']): Set<string> {
  const allowed = new Set<string>();
  const name = `setting ${ALERT_ALLOWED_URLS_SETTING}`;
  const listed = checkedValue(name, ALERT_ALLOWED_URLS_SETTING, settings?.[ALERT_ALLOWED_URLS_SETTING] ?? '')
    .split(',')
    .map((u) => u.trim())
    .filter(Boolean);
  if (listed.length > MAX_ALLOWED_URLS) throw new PolicyError(`${name}: at most ${MAX_ALLOWED_URLS} URLs`);
  for (const text of [
    ...listed,
    settings?.[alertPolicyKeys.prometheusUrl.setting]?.trim() ?? '',
    settings?.[alertPolicyKeys.alertmanagerUrl.setting]?.trim() ?? '',
  ]) {
    if (text === '') continue;
    const parsed = parseAlertUrl(text);
    // The settings' own URLs are reported by their own keys below.
    if (parsed.ok) allowed.add(parsed.value);
    else if (listed.includes(text)) throw new PolicyError(`${name}: ${JSON.stringify(text)}: ${parsed.reason}`);
  }
  return allowed;
}

type Read = <T>(
  k: PolicyKey,
  parse: (value: string, fromAnnotation: boolean) => Parsed<T>,
  tighter?: Tighter,
) => T | undefined;

/** Reads one key from the sources, parsed; a bad value throws a PolicyError naming where it came from. */
function readerOf(sources: PolicySources): Read {
  return (k, parse, tighter) => {
    const found = lookupPolicy(sources, k, tighter);
    if (!found) return undefined;
    const parsed = parse(found.value.trim(), found.name.startsWith('annotation '));
    if (!parsed.ok) throw new PolicyError(`${found.name}=${JSON.stringify(found.value)}: ${parsed.reason}`);
    return parsed.value;
  };
}

const duration = (max: number) => (v: string) => {
  const ms = parseGoDuration(v);
  if (ms === undefined) return bad('not a duration (use e.g. 30m, 2h, 1h30m)');
  if (ms <= 0) return bad('must be greater than zero');
  return ms > max ? bad(`must be at most ${max / 3_600_000}h`) : { ok: true as const, value: ms };
};

/** A URL parser that lets an annotation name only one of the `allowed` URLs. */
function allowedUrl(allowed: Set<string>): (v: string, fromAnnotation: boolean) => Parsed<string> {
  return (v, fromAnnotation) => {
    const parsed = parseAlertUrl(v);
    if (!parsed.ok || !fromAnnotation || allowed.has(parsed.value)) return parsed;
    return bad(
      `an annotation may only name a URL the ExtensionConfig allows (alertPrometheusUrl, alertmanagerUrl or ${ALERT_ALLOWED_URLS_SETTING})`,
    );
  };
}

/** The token Secret and the CA, into `policy`. */
function readCredentials(read: Read, sources: PolicySources, policy: AlertPolicy): void {
  const token = read(alertPolicyKeys.tokenSecret, (v, fromAnnotation) =>
    parseObjectKeyRef(v, { fromAnnotation, kinds: ['Secret'] }),
  );
  if (token) policy.tokenSecret = token;
  const ca = read(alertPolicyKeys.ca, (v, fromAnnotation) =>
    parseObjectKeyRef(v, { fromAnnotation, kinds: ['Secret', 'ConfigMap'] }),
  );
  // The platform's token (named by the setting) is sent only to a server the platform's CA
  // vouches for: an annotation's CA would let whoever wrote it stand in for that server.
  const caSource = lookupPolicy(sources, alertPolicyKeys.ca);
  const tokenSource = lookupPolicy(sources, alertPolicyKeys.tokenSecret);
  if (caSource?.name.startsWith('annotation ') && tokenSource?.name.startsWith('setting '))
    throw new PolicyError(
      `${caSource.name}=${JSON.stringify(caSource.value)}: an annotation may not replace the CA while the token comes from ${tokenSource.name}`,
    );
  if (ca) policy.ca = ca;
}

/** What the gate holds on (filter, pending alerts, ignored names, timeout, label), into `policy`. */
function readGate(read: Read, policy: AlertPolicy): void {
  const filter = read(alertPolicyKeys.filter, (v) => {
    const problem = checkAlertFilter(v);
    return problem === undefined ? { ok: true, value: v } : bad(problem);
  });
  if (filter !== undefined) policy.filter = filter;
  const firingOnly = read(
    alertPolicyKeys.firingOnly,
    (v) =>
      /^(true|false)$/i.test(v) ? { ok: true, value: v.toLowerCase() === 'true' } : bad('expected true or false'),
    // Bound: pending alerts may be added to what holds, never taken away.
    (a) => a.toLowerCase() !== 'true',
  );
  if (firingOnly !== undefined) policy.firingOnly = firingOnly;
  const ignore = read(alertPolicyKeys.ignore, ignoreList, ignoresNoMore);
  if (ignore !== undefined) policy.ignore = ignore;
  const timeout = read(alertPolicyKeys.holdTimeout, duration(7 * 24 * 3_600_000));
  if (timeout !== undefined) policy.holdTimeoutMs = timeout;
  const label = read(alertPolicyKeys.clusterLabel, (v) =>
    LABEL_NAME.test(v) ? { ok: true, value: v } : bad('not a Prometheus label name'),
  );
  if (label !== undefined) policy.clusterLabel = label;
}

/** The silences set while the upgrade runs, into `policy`. */
function readSilences(read: Read, policy: AlertPolicy): void {
  const matchers = read(alertPolicyKeys.silenceMatchers, (v) => {
    const m = parseSilenceMatchers(v);
    return m.ok ? m : bad(m.reason);
  });
  if (matchers !== undefined) policy.silenceMatchers = matchers;
  const silenceFor = read(alertPolicyKeys.silenceDuration, duration(MAX_SILENCE_DURATION_MS));
  if (silenceFor !== undefined) policy.silenceDurationMs = silenceFor;
}

/** The alert policy, or undefined when neither URL is set (the gate and silences are off). */
export function resolveAlertPolicy(
  sources: PolicySources,
): { ok: true; policy: AlertPolicy | undefined } | { ok: false; message: string } {
  const read = readerOf(sources);
  try {
    const url = allowedUrl(allowedAnnotationUrls(sources.settings));
    const prometheusUrl = read(alertPolicyKeys.prometheusUrl, url);
    const alertmanagerUrl = read(alertPolicyKeys.alertmanagerUrl, url);
    if (prometheusUrl === undefined && alertmanagerUrl === undefined) return { ok: true, policy: undefined };
    const policy: AlertPolicy = {
      firingOnly: true,
      ignore: [...DEFAULT_ALERT_IGNORE],
      holdTimeoutMs: DEFAULT_ALERT_HOLD_TIMEOUT_MS,
      clusterLabel: 'cluster',
      silenceMatchers: [],
      silenceDurationMs: DEFAULT_SILENCE_DURATION_MS,
    };
    if (prometheusUrl !== undefined) policy.prometheusUrl = prometheusUrl;
    if (alertmanagerUrl !== undefined) policy.alertmanagerUrl = alertmanagerUrl;
    readCredentials(read, sources, policy);
    readGate(read, policy);
    readSilences(read, policy);
    return { ok: true, policy };
  } catch (err) {
    if (err instanceof PolicyError) return { ok: false, message: err.message };
    throw err;
  }
}
