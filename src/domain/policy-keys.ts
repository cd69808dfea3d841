// Where users set policy: ExtensionConfig `spec.settings` keys (for every
// cluster) and Cluster annotations under one prefix (per cluster, winning
// over settings unless the platform binds the setting). The names are part of
// the public interface; docs/configuration.md documents each, with its limits
// (test/unit/docs-configuration.test.ts checks).
//
// A tenant who may write Clusters in its namespace writes these annotations,
// up to Kubernetes' 256 KiB: every value is measured against its key's limit
// before anything parses it, and the refusal names the key and the limit,
// never the value (docs/security.md, "Policy a tenant writes").

export const ANNOTATION_PREFIX = 'upgrades.capi-orchestrator.io/';

export interface PolicyKey {
  /** ExtensionConfig spec.settings key. */
  setting: string;
  /** Cluster annotation (prefix included). */
  annotation: string;
}

export function key(setting: string, annotationSuffix: string): PolicyKey {
  return { setting, annotation: `${ANNOTATION_PREFIX}${annotationSuffix}` };
}

export const policyKeys = {
  kubernetesVersions: key('kubernetesVersions', 'kubernetes-versions'),
  controlPlaneStrategy: key('controlPlaneUpgradeStrategy', 'control-plane-upgrade-strategy'),
  workersStrategy: key('workersUpgradeStrategy', 'workers-upgrade-strategy'),
  upgradeAt: key('upgradeAt', 'upgrade-at'),
  maintenanceWindow: key('maintenanceWindow', 'maintenance-window'),
  maintenanceTimeZone: key('maintenanceTimeZone', 'maintenance-time-zone'),
  maintenanceFreezes: key('maintenanceFreezes', 'maintenance-freezes'),
  delayedAfter: key('delayedAfter', 'delayed-after'),
  commenceWithin: key('commenceWithin', 'commence-within'),
  capacityReservation: key('capacityReservation', 'capacity-reservation'),
  capacityReadyTimeout: key('capacityReadyTimeout', 'capacity-ready-timeout'),
  pdbForceDrainTimeout: key('pdbForceDrainTimeout', 'pdb-force-drain-timeout'),
  drainSkipPodSelector: key('drainSkipPodSelector', 'drain-skip-pod-selector'),
  criticalNamespaces: key('criticalNamespaces', 'critical-namespaces'),
  blockingPdbPolicy: key('blockingPdbPolicy', 'blocking-pdb-policy'),
  healthCheckTimeout: key('healthCheckTimeout', 'health-check-timeout'),
  removedApiPolicy: key('removedApiPolicy', 'removed-api-policy'),
  readinessInterval: key('readinessInterval', 'readiness-interval'),
} as const;

/** Settings only: which settings an annotation may not loosen (comma-separated setting names, or `*`). */
export const BINDING_POLICIES_SETTING = 'bindingPolicies';

/** A policy value that cannot be used; the message names the key, never an over-long value. */
export class PolicyError extends Error {}

export interface ValueLimit {
  /** Most characters of the raw value, measured before any parse. */
  chars: number;
  /** For list-valued keys: most non-blank items between `separator`s. */
  items?: number;
  separator?: ',' | ';';
}

/** Durations, enums, times, zones, booleans, counts: far more than any valid value. */
const SCALAR: ValueLimit = { chars: 256 };
const SELECTOR: ValueLimit = { chars: 1024 };
const URL_LIMIT: ValueLimit = { chars: 2048 };

/**
 * Limits per key, by setting name (an annotation has its setting's), or by annotation for the
 * annotation-only keys. Sized from the parsers' own finer limits (e.g. 32 freezes of at most
 * 128-character reasons) with room to spare; the parsers keep those finer limits and messages.
 * Keys not listed here have {@link DEFAULT_VALUE_LIMIT}.
 */
export const POLICY_VALUE_LIMITS: Readonly<Record<string, ValueLimit>> = {
  kubernetesVersions: { chars: 16_384, items: 1024, separator: ',' },
  controlPlaneUpgradeStrategy: SCALAR,
  workersUpgradeStrategy: { chars: 4096, items: 64, separator: ',' },
  upgradeAt: SCALAR,
  maintenanceWindow: { chars: 1024, items: 16, separator: ';' },
  maintenanceTimeZone: SCALAR,
  maintenanceFreezes: { chars: 8192, items: 32, separator: ';' },
  delayedAfter: SCALAR,
  commenceWithin: SCALAR,
  capacityReservation: SCALAR,
  capacityReadyTimeout: SCALAR,
  pdbForceDrainTimeout: SCALAR,
  drainSkipPodSelector: SELECTOR,
  criticalNamespaces: { chars: 4096, items: 64, separator: ',' },
  blockingPdbPolicy: SCALAR,
  healthCheckTimeout: SCALAR,
  removedApiPolicy: SCALAR,
  readinessInterval: SCALAR,
  alertPrometheusUrl: URL_LIMIT,
  alertmanagerUrl: URL_LIMIT,
  alertAllowedUrls: { chars: 8192, items: 32, separator: ',' },
  alertTokenSecret: { chars: 512 },
  alertCa: { chars: 512 },
  alertFilter: { chars: 1024 },
  alertFiringOnly: SCALAR,
  alertIgnore: { chars: 4096, items: 64, separator: ',' },
  alertHoldTimeout: SCALAR,
  alertClusterLabel: SCALAR,
  alertSilenceMatchers: { chars: 8192 },
  alertSilenceDuration: SCALAR,
  blockingPodSelector: SELECTOR,
  blockingPodTimeout: SCALAR,
  postUpdateDelay: SCALAR,
  [BINDING_POLICIES_SETTING]: { chars: 4096, items: 64, separator: ',' },
  gateOverrideNamespaces: { chars: 16_384, items: 256, separator: ',' },
  waitRetryAfterMax: SCALAR,
  [`${ANNOTATION_PREFIX}override-gates`]: SCALAR,
  [`${ANNOTATION_PREFIX}override-reason`]: { chars: 1024 },
};

/** Every other setting (the in-place and machine update settings). */
export const DEFAULT_VALUE_LIMIT: ValueLimit = { chars: 4096 };

/** Non-blank items between separators, counted without building them. */
function countItems(value: string, separator: string): number {
  let items = 0;
  let blank = true;
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c === separator.charCodeAt(0)) {
      if (!blank) items++;
      blank = true;
    } else if (c > 32) blank = false;
  }
  return blank ? items : items + 1;
}

/**
 * Why `value` of `limitKey` (a setting name, or an annotation-only key) is refused before any
 * parse, or undefined; `name` is what the message names (`annotation …`, `setting …`). Linear.
 */
export function valueOverLimit(name: string, limitKey: string, value: string): string | undefined {
  const limit = POLICY_VALUE_LIMITS[limitKey] ?? DEFAULT_VALUE_LIMIT;
  if (value.length > limit.chars)
    return `${name} is ${value.length} characters, over the ${limit.chars}-character limit`;
  if (limit.items !== undefined && limit.separator !== undefined) {
    const items = countItems(value, limit.separator);
    if (items > limit.items) return `${name} lists ${items} items, over the ${limit.items}-item limit`;
  }
  return undefined;
}

/** `value` when it is within its key's limit; otherwise throws {@link PolicyError}. */
export function checkedValue(name: string, limitKey: string, value: string): string {
  const problem = valueOverLimit(name, limitKey, value);
  if (problem !== undefined) throw new PolicyError(problem);
  return value;
}

/**
 * The settings `bindingPolicies` may name: those resolved where the hook sees both the settings
 * and the Cluster. Not the in-place keys read by a machine update's preflight
 * (pdb-force-drain-timeout, drain-skip-pod-selector, blocking-pod-*, post-update-delay).
 */
export const BINDABLE_SETTINGS: readonly string[] = [
  ...Object.values(policyKeys)
    .map((k) => k.setting)
    .filter((s) => s !== policyKeys.pdbForceDrainTimeout.setting && s !== policyKeys.drainSkipPodSelector.setting),
  'alertPrometheusUrl',
  'alertTokenSecret',
  'alertCa',
  'alertFilter',
  'alertFiringOnly',
  'alertIgnore',
  'alertHoldTimeout',
  'alertClusterLabel',
  'alertmanagerUrl',
  'alertSilenceMatchers',
  'alertSilenceDuration',
];

/** Always binding, whatever bindingPolicies says: a tenant's freezes add to the platform's. */
export const ALWAYS_BINDING: readonly string[] = [policyKeys.maintenanceFreezes.setting];

const bindingCache = new Map<string, ReadonlySet<string>>();

/** The settings the platform binds (bindingPolicies plus {@link ALWAYS_BINDING}); throws PolicyError. */
export function bindingSettings(settings: PolicySources['settings']): ReadonlySet<string> {
  const name = `setting ${BINDING_POLICIES_SETTING}`;
  const text = checkedValue(name, BINDING_POLICIES_SETTING, settings?.[BINDING_POLICIES_SETTING] ?? '');
  const hit = bindingCache.get(text);
  if (hit) return hit;
  const bound = new Set(ALWAYS_BINDING);
  for (const raw of text.split(',')) {
    const item = raw.trim();
    if (item === '') continue;
    if (item === '*') BINDABLE_SETTINGS.forEach((s) => bound.add(s));
    else if (BINDABLE_SETTINGS.includes(item)) bound.add(item);
    else
      throw new PolicyError(
        `${name}: ${JSON.stringify(item)} is not a setting that can be bound (one of ${BINDABLE_SETTINGS.join(', ')}, or *)`,
      );
  }
  if (bindingCache.size >= 64) bindingCache.clear();
  bindingCache.set(text, bound);
  return bound;
}

export interface PolicySources {
  settings?: Readonly<Record<string, string>> | undefined;
  annotations?: Readonly<Record<string, string>> | undefined;
  /** The Cluster's namespace (who may override a gate: gate-overrides.ts). */
  namespace?: string | undefined;
}

export interface FoundValue {
  name: string;
  value: string;
}

const present = (v: string | undefined): v is string => v !== undefined && v.trim() !== '';

/** Both raw values of a key, each within its limit, and whether the platform binds the setting. */
export function lookupPolicyBoth(
  sources: PolicySources,
  k: PolicyKey,
): { annotation?: FoundValue; setting?: FoundValue; binding: boolean } {
  const fromSetting = sources.settings?.[k.setting];
  const fromAnnotation = sources.annotations?.[k.annotation];
  const out: { annotation?: FoundValue; setting?: FoundValue; binding: boolean } = {
    binding: bindingSettings(sources.settings).has(k.setting),
  };
  if (present(fromSetting)) {
    const name = `setting ${k.setting}`;
    out.setting = { name, value: checkedValue(name, k.setting, fromSetting) };
  }
  if (present(fromAnnotation)) {
    const name = `annotation ${k.annotation}`;
    out.annotation = { name, value: checkedValue(name, k.setting, fromAnnotation) };
  }
  return out;
}

/**
 * Whether the annotation's value is at least as strict as the binding setting's (both trimmed).
 * Answer true for a value it cannot read, so that the parse names what is wrong with it.
 */
export type Tighter = (annotation: string, setting: string) => boolean;

/**
 * The winning raw value for a key and the name to quote in messages: the annotation, then the
 * setting. Each value is measured against its limit first. When the platform binds the setting,
 * an annotation that differs from it wins only if `tighter` says it is stricter; otherwise it is
 * refused naming both (throws {@link PolicyError}).
 */
export function lookupPolicy(sources: PolicySources, k: PolicyKey, tighter?: Tighter): FoundValue | undefined {
  const { annotation, setting, binding } = lookupPolicyBoth(sources, k);
  if (annotation && setting && binding) {
    const [a, s] = [annotation.value.trim(), setting.value.trim()];
    if (a !== s && !tighter?.(a, s))
      throw new PolicyError(
        `${annotation.name}: ${setting.name} is binding (setting ${BINDING_POLICIES_SETTING}) and an annotation may ${tighter ? 'only tighten' : 'not change'} it`,
      );
  }
  return annotation ?? setting;
}

/** A {@link Tighter} for values ranked from loosest to strictest. */
export function rankedTighter(order: readonly string[]): Tighter {
  return (a, s) => {
    const [ra, rs] = [order.indexOf(a), order.indexOf(s)];
    return ra < 0 || rs < 0 || ra >= rs;
  };
}
