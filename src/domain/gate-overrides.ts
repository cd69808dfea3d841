// Per-cluster gate overrides with a recorded reason: the Cluster
// annotations `upgrades.capi-orchestrator.io/override-gates` (gate ids, comma
// separated) and `.../override-reason` (why, recorded in the status, an Event and
// the log). Annotations only: an override is a decision about one cluster,
// never a fleet-wide setting. But a tenant writes its Clusters' annotations:
// an override counts only where the platform grants it, by listing the
// Cluster's namespace in the setting gateOverrideNamespaces, and the record
// names that grant. Pure: the api resolves it with the policy.
import { checkedValue, PolicyError, valueOverLimit, type PolicySources } from './policy-keys.ts';

export const OVERRIDE_GATES_ANNOTATION = 'upgrades.capi-orchestrator.io/override-gates';
export const OVERRIDE_REASON_ANNOTATION = 'upgrades.capi-orchestrator.io/override-reason';

/**
 * Gates an operator may override. Not the health checks (they guard against upgrading a broken
 * cluster, and their own knobs say how strict to be), nor upgradeAt / commence-within (the
 * operator sets those and can change them), nor CAPI's own pacing annotations (remove the
 * annotation instead), nor the machine updates' blocking pods (per node, in another workflow).
 */
export const GATE_IDS = ['alerts', 'maintenance-window', 'removed-apis'] as const;
export type GateId = (typeof GATE_IDS)[number];

export const MAX_OVERRIDE_REASON = 256;

/** Settings only: namespaces (comma-separated, or `*`) whose Clusters may override gates. */
export const GATE_OVERRIDE_NAMESPACES_SETTING = 'gateOverrideNamespaces';

export interface GateOverride {
  /** Sorted, unique. */
  gates: GateId[];
  reason: string;
  /** Who granted it (`setting gateOverrideNamespaces`); absent in policies resolved before grants existed. */
  grantedBy?: string;
}

export type GateOverrideResult = { ok: true; value: GateOverride | undefined } | { ok: false; message: string };

const isGateId = (s: string): s is GateId => (GATE_IDS as readonly string[]).includes(s);

/** Reads the two annotations; a bad value is a message naming the annotation (the api answers Failure with it). */
export function parseGateOverride(annotations: Readonly<Record<string, string>> | undefined): GateOverrideResult {
  for (const a of [OVERRIDE_GATES_ANNOTATION, OVERRIDE_REASON_ANNOTATION]) {
    const problem = valueOverLimit(`annotation ${a}`, a, annotations?.[a] ?? '');
    if (problem !== undefined) return { ok: false, message: problem };
  }
  const gatesText = annotations?.[OVERRIDE_GATES_ANNOTATION]?.trim() ?? '';
  const reasonText = annotations?.[OVERRIDE_REASON_ANNOTATION];
  if (gatesText === '') {
    return reasonText !== undefined && reasonText.trim() !== ''
      ? { ok: false, message: `annotation ${OVERRIDE_REASON_ANNOTATION} is set without ${OVERRIDE_GATES_ANNOTATION}` }
      : { ok: true, value: undefined };
  }
  const where = `annotation ${OVERRIDE_GATES_ANNOTATION}`;
  const gates = new Set<GateId>();
  for (const raw of gatesText.split(',')) {
    const id = raw.trim();
    if (id === '') continue;
    if (!isGateId(id))
      return {
        ok: false,
        message: `${where}=${JSON.stringify(gatesText)}: ${JSON.stringify(id)} is not a gate that can be overridden (expected ${GATE_IDS.join(', ')})`,
      };
    gates.add(id);
  }
  if (gates.size === 0) return { ok: false, message: `${where}=${JSON.stringify(gatesText)}: names no gate` };
  const rwhere = `annotation ${OVERRIDE_REASON_ANNOTATION}`;
  const reason = reasonText?.trim() ?? '';
  if (reason === '') return { ok: false, message: `${rwhere} is required with ${OVERRIDE_GATES_ANNOTATION}` };
  if (reason.length > MAX_OVERRIDE_REASON)
    return { ok: false, message: `${rwhere}: longer than ${MAX_OVERRIDE_REASON} characters` };
  // The reason is copied into Events, conditions and CAPI messages: one printable line.
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/.test(reason))
    return { ok: false, message: `${rwhere}: holds control characters (one line of printable text)` };
  return { ok: true, value: { gates: [...gates].sort(), reason } };
}

/**
 * The override with the authority that grants it: the setting gateOverrideNamespaces lists the
 * Cluster's namespace (or is `*`). Without it, throws {@link PolicyError} naming the annotation
 * and the setting: whoever may annotate a Cluster must not lift what the platform set.
 */
export function authorizeGateOverride(override: GateOverride, sources: PolicySources): GateOverride {
  const name = `setting ${GATE_OVERRIDE_NAMESPACES_SETTING}`;
  const text = checkedValue(
    name,
    GATE_OVERRIDE_NAMESPACES_SETTING,
    sources.settings?.[GATE_OVERRIDE_NAMESPACES_SETTING] ?? '',
  );
  const listed = text
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const granted = listed.includes('*') || (sources.namespace !== undefined && listed.includes(sources.namespace));
  if (!granted)
    throw new PolicyError(
      `annotation ${OVERRIDE_GATES_ANNOTATION}: this Cluster's namespace may not override gates (${name} does not list it)`,
    );
  return { ...override, grantedBy: name };
}

/** Whether `gate` is overridden, and why. */
export function overrideFor(override: GateOverride | undefined, gate: GateId): string | undefined {
  return override?.gates.includes(gate) ? override.reason : undefined;
}

/**
 * `gate removed-apis overridden (…override-gates, granted by setting gateOverrideNamespaces): <reason>`
 * (what the status, the Event and the gate message say); a policy from before grants has none.
 */
export function overriddenText(gate: GateId, reason: string, grantedBy?: string): string {
  const by = grantedBy === undefined ? '' : `, granted by ${grantedBy}`;
  return `gate ${gate} overridden (${OVERRIDE_GATES_ANNOTATION}${by}): ${reason}`;
}
