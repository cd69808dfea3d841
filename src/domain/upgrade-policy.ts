// Upgrade policy for one cluster: built-in defaults ← ExtensionConfig
// settings ← Cluster annotations, except where the platform binds a setting
// (policy-keys.ts): then an annotation adds to it (freezes, always; critical
// namespaces), may only tighten it, or is refused. Plain JSON (it travels into
// workflows; the type is model/cluster-upgrade.ts).
// A bad value is an error naming the annotation or setting and the value.
import { canonicalJson, fnv1a64 } from './canonical-json.ts';
import { parseGoDuration } from './durations.ts';
import { resolveAlertPolicy } from './alert-policy.ts';
import { parseFreezes, parseTimeZone, parseWindows, windowsText } from './calendar.ts';
import { authorizeGateOverride, parseGateOverride } from './gate-overrides.ts';
import { MAX_READINESS_INTERVAL_MS, MIN_READINESS_INTERVAL_MS } from './readiness-recheck.ts';
import {
  lookupPolicy,
  lookupPolicyBoth,
  PolicyError,
  policyKeys,
  rankedTighter,
  type FoundValue,
  type PolicyKey,
  type PolicySources,
  type Tighter,
} from './policy-keys.ts';
import type { Freeze, UpgradePolicy } from '../model/cluster-upgrade.ts';

export const DEFAULT_UPGRADE_POLICY: UpgradePolicy = {
  capacityReservation: 0,
  capacityReadyTimeoutMs: 15 * 60_000,
  criticalNamespaces: ['kube-system'],
  blockingPdbPolicy: 'warn',
  healthCheckTimeoutMs: 30 * 60_000,
};

const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:\d{2})$/i;

/** A DNS-1123 label, checked without a regular expression that could backtrack. */
export function isNamespaceName(n: string): boolean {
  if (n.length === 0 || n.length > 63 || n.startsWith('-') || n.endsWith('-')) return false;
  for (let i = 0; i < n.length; i++) {
    const c = n.charCodeAt(i);
    if (!((c >= 97 && c <= 122) || (c >= 48 && c <= 57) || c === 45)) return false;
  }
  return true;
}

/** The platform's and the Cluster's freezes together: identical ones once, in order of start. */
function mergeFreezes(freezes: readonly Freeze[]): Freeze[] {
  const seen = new Set<string>();
  return freezes
    .filter((f) => {
      const id = `${f.from}/${f.to} ${f.reason}`;
      return seen.has(id) ? false : (seen.add(id), true);
    })
    .sort((a, b) => Date.parse(a.from) - Date.parse(b.from));
}

export type UpgradePolicyResult = { ok: true; policy: UpgradePolicy } | { ok: false; message: string };

interface Problem {
  problem: string;
}
const problem = (text: string): Problem => ({ problem: text });
const isProblem = (v: unknown): v is Problem => typeof v === 'object' && v !== null && 'problem' in v;

type Parse<T> = (value: string) => T | Problem;

/** Reads keys from the sources, parsed; a bad value throws a PolicyError naming where it came from. */
interface PolicyReader {
  read<T>(k: PolicyKey, parse: Parse<T>, tighter?: Tighter): T | undefined;
  /** A list key whose binding setting an annotation adds to (union); unbound, the annotation wins. */
  readUnion<T>(k: PolicyKey, parse: Parse<T[]>): T[] | undefined;
}

function policyReader(sources: PolicySources): PolicyReader {
  const parseFound = <T>(found: FoundValue, parse: Parse<T>): T => {
    const parsed = parse(found.value.trim());
    if (isProblem(parsed)) throw new PolicyError(`${found.name}=${JSON.stringify(found.value)}: ${parsed.problem}`);
    return parsed;
  };
  return {
    read: (k, parse, tighter) => {
      const found = lookupPolicy(sources, k, tighter);
      return found ? parseFound(found, parse) : undefined;
    },
    readUnion: (k, parse) => {
      const both = lookupPolicyBoth(sources, k);
      const fromAnnotation = both.annotation ? parseFound(both.annotation, parse) : undefined;
      const fromSetting = both.setting ? parseFound(both.setting, parse) : undefined;
      if (fromAnnotation && fromSetting && both.binding) return [...fromSetting, ...fromAnnotation];
      return fromAnnotation ?? fromSetting;
    },
  };
}

const duration = (allowZero: boolean) => (v: string) => {
  const ms = parseGoDuration(v);
  if (ms === undefined) return problem('not a duration (use e.g. 30m, 2h, 1h30m)');
  if (!allowZero && ms === 0) return problem('must be greater than zero');
  return ms;
};

/** When the upgrade may run: start time, maintenance window and zone, freezes, delay and deadline. */
function readSchedule({ read, readUnion }: PolicyReader, policy: UpgradePolicy): void {
  const upgradeAt = read(
    policyKeys.upgradeAt,
    (v) => {
      // RFC 3339 with an explicit zone: a bare local time would depend on the server's zone.
      if (!RFC3339.test(v)) return problem('not an RFC 3339 time such as 2026-12-01T02:00:00Z');
      const ms = Date.parse(v);
      return Number.isNaN(ms) ? problem('not a valid date') : ms;
    },
    // Bound: the annotation may only start it later.
    (a, s) => !(Date.parse(a) < Date.parse(s)),
  );
  if (upgradeAt !== undefined) policy.upgradeAtMs = upgradeAt;
  const window = read(policyKeys.maintenanceWindow, (v) => {
    const w = parseWindows(v);
    return w.ok ? windowsText(w.value) : problem(w.reason);
  });
  if (window !== undefined) policy.maintenanceWindow = window;
  const zone = read(policyKeys.maintenanceTimeZone, (v) => {
    const z = parseTimeZone(v);
    return z.ok ? z.value : problem(z.reason);
  });
  if (zone !== undefined) policy.maintenanceTimeZone = zone;
  // Always binding: the platform's freezes hold whatever the Cluster's annotation says.
  const freezes = readUnion(policyKeys.maintenanceFreezes, (v) => {
    const f = parseFreezes(v);
    return f.ok ? f.value : problem(f.reason);
  });
  if (freezes !== undefined && freezes.length > 0) policy.maintenanceFreezes = mergeFreezes(freezes);
  const delayed = read(policyKeys.delayedAfter, duration(false));
  if (delayed !== undefined) policy.delayedAfterMs = delayed;
  const commence = read(policyKeys.commenceWithin, duration(false));
  if (commence !== undefined) policy.commenceWithinMs = commence;
}

/** Spare capacity reserved for the upgrade, and how long a drain waits on a PodDisruptionBudget. */
function readCapacity({ read }: PolicyReader, policy: UpgradePolicy): void {
  const reserve = read(policyKeys.capacityReservation, (v) => {
    if (/^(true|yes)$/i.test(v)) return 1;
    if (/^(false|no)$/i.test(v)) return 0;
    const n = Number(v);
    return Number.isInteger(n) && n >= 0 && n <= 100
      ? n
      : problem('expected true, false or a machine count from 0 to 100');
  });
  if (reserve !== undefined) policy.capacityReservation = reserve;
  const reserveReady = read(policyKeys.capacityReadyTimeout, duration(false));
  if (reserveReady !== undefined) policy.capacityReadyTimeoutMs = reserveReady;
  const pdb = read(policyKeys.pdbForceDrainTimeout, duration(true));
  if (pdb !== undefined) policy.pdbForceDrainTimeoutMs = pdb;
}

/** What the health, removed-API and readiness checks look at, and how strictly. */
function readChecks({ read, readUnion }: PolicyReader, policy: UpgradePolicy): void {
  const namespaces = readUnion(policyKeys.criticalNamespaces, (v) => {
    const list = v
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean);
    const bad = list.find((n) => !isNamespaceName(n));
    return bad === undefined ? list : problem(`${JSON.stringify(bad)} is not a namespace name`);
  });
  if (namespaces !== undefined) policy.criticalNamespaces = [...new Set(namespaces)];
  const pdbPolicy = read(
    policyKeys.blockingPdbPolicy,
    (v) => (v === 'fail' || v === 'warn' ? v : problem('expected fail or warn')),
    rankedTighter(['warn', 'fail']),
  );
  if (pdbPolicy !== undefined) policy.blockingPdbPolicy = pdbPolicy;
  const hc = read(policyKeys.healthCheckTimeout, duration(false));
  if (hc !== undefined) policy.healthCheckTimeoutMs = hc;
  const removedApis = read(
    policyKeys.removedApiPolicy,
    (v) => (v === 'fail' || v === 'warn' || v === 'off' ? v : problem('expected fail, warn or off')),
    rankedTighter(['off', 'warn', 'fail']),
  );
  if (removedApis !== undefined) policy.removedApiPolicy = removedApis;
  const readiness = read(policyKeys.readinessInterval, (v) => {
    if (v === 'off' || v === '0') return 0;
    const ms = parseGoDuration(v);
    if (ms === undefined || ms < MIN_READINESS_INTERVAL_MS || ms > MAX_READINESS_INTERVAL_MS)
      return problem('expected off or a duration from 10s to 24h, e.g. 15m');
    return ms;
  });
  if (readiness !== undefined) policy.readinessIntervalMs = readiness;
}

export function resolveUpgradePolicy(sources: PolicySources): UpgradePolicyResult {
  const policy: UpgradePolicy = {
    ...DEFAULT_UPGRADE_POLICY,
    criticalNamespaces: [...DEFAULT_UPGRADE_POLICY.criticalNamespaces],
  };
  const reader = policyReader(sources);
  try {
    readSchedule(reader, policy);
    readCapacity(reader, policy);
    readChecks(reader, policy);
    const override = parseGateOverride(sources.annotations);
    if (!override.ok) throw new PolicyError(override.message);
    if (override.value) policy.gateOverride = authorizeGateOverride(override.value, sources);
    const alerts = resolveAlertPolicy(sources);
    if (!alerts.ok) return alerts;
    if (alerts.policy) policy.alerts = alerts.policy;
  } catch (err) {
    if (err instanceof PolicyError) return { ok: false, message: err.message };
    throw err;
  }
  return { ok: true, policy };
}

/** Identifies a resolved policy: the api signals a running upgrade only when this changes. */
export function policyHash(policy: UpgradePolicy): string {
  return fnv1a64(canonicalJson(policy));
}
