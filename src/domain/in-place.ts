// What this extension declares it can update in place (CanUpdateMachine /
// CanUpdateMachineSet), as RFC 6902 JSON patches against the current objects.
//
// How CAPI uses the answer: each patch is applied to the whole serialised
// current object, then only `spec` (Machine, InfraMachine, BootstrapConfig) or
// `spec.template.spec` (MachineSet and templates) is copied back; the update is
// in place only when the patched current equals desired. So a patch lists
// exactly the differences we can apply on the node; anything left out makes
// CAPI fall back to a rollout.
//
// Settings: in-place-policy.ts. JSON pointers: json-pointer.ts.
//
// Rules:
// - A Machine `spec.version` (MachineSet `spec.template.spec.version`) change
//   is in place only for an upgrade within the same major by at most one
//   minor; downgrades, minor skips, major changes, versions whose build tags
//   cannot be ordered, and added or removed versions are left out (reported in
//   `declined`), also when an allowed path above the version covers it.
// - Allowed paths address object members only: a path that goes through an
//   array (or through a non-object value) in current or desired is skipped.
// - Ops: `replace` when the value exists in current, `add` when it does not
//   (at the first missing ancestor, with the missing objects built around the
//   value), `remove` when desired lacks it. Ops are computed and applied in
//   path order on a working copy, so they apply cleanly in sequence.
//
// Pure and deterministic: no I/O, no clock, no Node built-ins (usable from
// workflow code); the patch document is canonical JSON (object keys sorted by
// UTF-16 code units), so equal input gives byte-identical base64.
import { canonicalJson, fnv1a64 } from './canonical-json.ts';
import type { InPlacePolicy } from './in-place-policy.ts';
import {
  cloneJson,
  formatPointer,
  isObject,
  isPrefix,
  lookup,
  parsePointer,
  setOrDelete,
  setOwn,
  type JsonObject,
  type Lookup,
} from './json-pointer.ts';
import { compareVersions, tryParseVersion, UNORDERED } from './versions.ts';

// ---- patches ----------------------------------------------------------------------

function jsonEqual(a: unknown, b: unknown): boolean {
  return canonicalJson(a) === canonicalJson(b);
}

const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';

/** Standard base64 (with padding) of the UTF-8 bytes of `text`: Go's `[]byte` in JSON. */
export function base64Utf8(text: string): string {
  const bytes = new TextEncoder().encode(text);
  let out = '';
  for (let i = 0; i < bytes.length; i += 3) {
    const a = bytes[i] ?? 0;
    const b = bytes[i + 1] ?? 0;
    const c = bytes[i + 2] ?? 0;
    const n = (a << 16) | (b << 8) | c;
    out += B64[(n >> 18) & 63];
    out += B64[(n >> 12) & 63];
    out += i + 1 < bytes.length ? B64[(n >> 6) & 63] : '=';
    out += i + 2 < bytes.length ? B64[n & 63] : '=';
  }
  return out;
}

/** One RFC 6902 operation (this module emits add, replace and remove only). */
export type JsonPatchOp =
  | { readonly op: 'add' | 'replace'; readonly path: string; readonly value: unknown }
  | { readonly op: 'remove'; readonly path: string };

/** Structurally the contract's `Patch` (JSONPatch, base64 document). */
export interface JsonPatch {
  readonly patchType: 'JSONPatch';
  readonly patch: string;
}

/** A difference this extension could have claimed but does not (CAPI rolls out for it). */
export interface Declined {
  /** Request field of the object, e.g. `machine`, `machineSet`. */
  readonly object: string;
  readonly path: string;
  readonly reason: string;
}

/** A Kubernetes object as CAPI sends it (parsed JSON). */
export interface KubeObjectLike {
  readonly apiVersion?: string | undefined;
  readonly kind?: string | undefined;
  readonly spec?: unknown;
}

export interface MachineObjects {
  readonly machine: KubeObjectLike;
  readonly infrastructureMachine: KubeObjectLike;
  readonly bootstrapConfig?: KubeObjectLike | undefined;
}

export interface MachineSetObjects {
  readonly machineSet: KubeObjectLike;
  readonly infrastructureMachineTemplate: KubeObjectLike;
  readonly bootstrapConfigTemplate?: KubeObjectLike | undefined;
}

export interface MachinePatchesResult {
  /** Spread into the CanUpdateMachine response; an object without changes has no patch. */
  readonly patches: {
    machinePatch?: JsonPatch;
    infrastructureMachinePatch?: JsonPatch;
    bootstrapConfigPatch?: JsonPatch;
  };
  readonly declined: readonly Declined[];
}

export interface MachineSetPatchesResult {
  /** Spread into the CanUpdateMachineSet response. */
  readonly patches: {
    machineSetPatch?: JsonPatch;
    infrastructureMachineTemplatePatch?: JsonPatch;
    bootstrapConfigTemplatePatch?: JsonPatch;
  };
  readonly declined: readonly Declined[];
}

/** The reason a version change is not done in place, or undefined when it is allowed (or nothing changes). */
export function versionChangeRefusal(current: unknown, desired: unknown): string | undefined {
  if (current === desired) return undefined;
  if (typeof current !== 'string' && typeof desired !== 'string') return undefined;
  if (typeof current !== 'string') return 'version added';
  if (typeof desired !== 'string') return 'version removed';
  const from = tryParseVersion(current);
  if (!from.ok) return `current version ${JSON.stringify(current)} is not a Kubernetes version`;
  const to = tryParseVersion(desired);
  if (!to.ok) return `desired version ${JSON.stringify(desired)} is not a Kubernetes version`;
  const c = compareVersions(to.version, from.version);
  if (c === UNORDERED) return `${current} → ${desired}: build metadata cannot be ordered`;
  if (c < 0) return `${current} → ${desired}: downgrade`;
  if (to.version.major !== from.version.major) return `${current} → ${desired}: major version change`;
  if (to.version.minor - from.version.minor > 1n) return `${current} → ${desired}: more than one minor`;
  return undefined;
}

interface Guard {
  readonly tokens: readonly string[];
  readonly reason: string;
}

interface ObjectDiff {
  readonly ops: JsonPatchOp[];
  readonly declined: Declined[];
}

/** The refused version change at `versionTokens` (none, or one guard keeping the current version). */
function versionGuards(working: JsonObject, target: JsonObject, versionTokens: readonly string[] | undefined): Guard[] {
  if (versionTokens === undefined) return [];
  const cur = lookup(working, versionTokens);
  const des = lookup(target, versionTokens);
  const reason = versionChangeRefusal(
    cur.kind === 'found' ? cur.value : undefined,
    des.kind === 'found' ? des.value : undefined,
  );
  return reason === undefined ? [] : [{ tokens: versionTokens, reason }];
}

/** The op that turns the value at `tokens` (`cur`, looked up in the working copy) into `desiredValue`, or undefined when equal. */
function patchOp(
  tokens: readonly string[],
  cur: Exclude<Lookup, { kind: 'blocked' }>,
  desiredValue: unknown,
): JsonPatchOp | undefined {
  const path = formatPointer(tokens);
  if (cur.kind === 'found') {
    if (desiredValue === undefined) return { op: 'remove', path };
    return jsonEqual(cur.value, desiredValue) ? undefined : { op: 'replace', path, value: cloneJson(desiredValue) };
  }
  if (desiredValue === undefined) return undefined;
  // Add at the first missing ancestor, wrapping the value in the objects that are missing.
  let value: unknown = cloneJson(desiredValue);
  for (let i = tokens.length - 1; i > cur.depth; i--) {
    const wrapper: JsonObject = {};
    setOwn(wrapper, tokens[i] ?? '', value);
    value = wrapper;
  }
  return { op: 'add', path: formatPointer(tokens.slice(0, cur.depth + 1)), value };
}

function diffObject(
  field: string,
  defaultKind: string | undefined,
  current: KubeObjectLike | undefined,
  desired: KubeObjectLike | undefined,
  policy: InPlacePolicy,
  versionTokens: readonly string[] | undefined,
): ObjectDiff {
  const ops: JsonPatchOp[] = [];
  const declined: Declined[] = [];
  if (current === undefined || desired === undefined) return { ops, declined };
  const kind = current.kind ?? defaultKind;
  if (kind === undefined || (desired.kind !== undefined && desired.kind !== kind)) return { ops, declined };
  const paths = policy.allowedPaths.filter((p) => p.kind === kind);
  if (paths.length === 0) return { ops, declined };

  const working = cloneJson(current) as JsonObject;
  const target = cloneJson(desired) as JsonObject;
  const guards = versionGuards(working, target, versionTokens);
  const decline = (tokens: readonly string[], reason: string) => {
    const path = formatPointer(tokens);
    if (!declined.some((d) => d.path === path && d.reason === reason)) declined.push({ object: field, path, reason });
  };

  for (const allowed of paths) {
    const tokens = allowed.tokens;
    const covering = guards.find((g) => isPrefix(g.tokens, tokens));
    if (covering) {
      decline(covering.tokens, covering.reason);
      continue;
    }
    const cur = lookup(working, tokens);
    const des = lookup(target, tokens);
    if (cur.kind === 'blocked' || des.kind === 'blocked') continue;
    let desiredValue = des.kind === 'found' ? des.value : undefined;

    // A refused version change under this path keeps its current value.
    let refused = false;
    for (const g of guards.filter((x) => isPrefix(tokens, x.tokens))) {
      decline(g.tokens, g.reason);
      const atGuard = lookup(working, g.tokens);
      const keep = atGuard.kind === 'found' ? atGuard.value : undefined;
      if (isObject(desiredValue)) {
        desiredValue = cloneJson(desiredValue);
        refused = !setOrDelete(desiredValue as JsonObject, g.tokens.slice(tokens.length), cloneJson(keep));
      } else {
        refused = keep !== undefined;
      }
      if (refused) break;
    }
    if (refused) continue;

    const op = patchOp(tokens, cur, desiredValue);
    if (op === undefined) continue;
    ops.push(op);
    const opTokens = parsePointer(op.path) ?? [];
    setOrDelete(working, opTokens, op.op === 'remove' ? undefined : cloneJson(op.value));
  }
  return { ops, declined };
}

function toPatch(ops: readonly JsonPatchOp[]): JsonPatch | undefined {
  if (ops.length === 0) return undefined;
  return { patchType: 'JSONPatch', patch: base64Utf8(canonicalJson(ops)) };
}

const MACHINE_VERSION = ['spec', 'version'] as const;
const TEMPLATE_VERSION = ['spec', 'template', 'spec', 'version'] as const;

/** CanUpdateMachine: one JSON patch per object for the differences that can be applied in place. */
export function computeMachinePatches(
  current: MachineObjects,
  desired: MachineObjects,
  policy: InPlacePolicy,
): MachinePatchesResult {
  if (!policy.enabled) return { patches: {}, declined: [] };
  const m = diffObject('machine', 'Machine', current.machine, desired.machine, policy, MACHINE_VERSION);
  const i = diffObject(
    'infrastructureMachine',
    undefined,
    current.infrastructureMachine,
    desired.infrastructureMachine,
    policy,
    undefined,
  );
  const b = diffObject(
    'bootstrapConfig',
    undefined,
    current.bootstrapConfig,
    desired.bootstrapConfig,
    policy,
    undefined,
  );
  const patches: MachinePatchesResult['patches'] = {};
  const mp = toPatch(m.ops);
  const ip = toPatch(i.ops);
  const bp = toPatch(b.ops);
  if (mp) patches.machinePatch = mp;
  if (ip) patches.infrastructureMachinePatch = ip;
  if (bp) patches.bootstrapConfigPatch = bp;
  return { patches, declined: [...m.declined, ...i.declined, ...b.declined] };
}

/** CanUpdateMachineSet: the same for a MachineSet and its templates (paths under spec.template.spec). */
export function computeMachineSetPatches(
  current: MachineSetObjects,
  desired: MachineSetObjects,
  policy: InPlacePolicy,
): MachineSetPatchesResult {
  if (!policy.enabled) return { patches: {}, declined: [] };
  const s = diffObject('machineSet', 'MachineSet', current.machineSet, desired.machineSet, policy, TEMPLATE_VERSION);
  const i = diffObject(
    'infrastructureMachineTemplate',
    undefined,
    current.infrastructureMachineTemplate,
    desired.infrastructureMachineTemplate,
    policy,
    undefined,
  );
  const b = diffObject(
    'bootstrapConfigTemplate',
    undefined,
    current.bootstrapConfigTemplate,
    desired.bootstrapConfigTemplate,
    policy,
    undefined,
  );
  const patches: MachineSetPatchesResult['patches'] = {};
  const sp = toPatch(s.ops);
  const ip = toPatch(i.ops);
  const bp = toPatch(b.ops);
  if (sp) patches.machineSetPatch = sp;
  if (ip) patches.infrastructureMachineTemplatePatch = ip;
  if (bp) patches.bootstrapConfigTemplatePatch = bp;
  return { patches, declined: [...s.declined, ...i.declined, ...b.declined] };
}

/** Decodes a patch produced here back into its ops (tests, logs). */
export function decodeJsonPatch(patch: JsonPatch): JsonPatchOp[] {
  const binary = atob(patch.patch);
  const bytes = Uint8Array.from(binary, (ch) => ch.charCodeAt(0));
  return JSON.parse(new TextDecoder().decode(bytes)) as JsonPatchOp[];
}

// ---- spec hash ----------------------------------------------------------------------

/**
 * Stable hash of the desired Machine spec and bootstrap spec, for workflow ids:
 * 64-bit FNV-1a over the UTF-8 bytes of the canonical JSON
 * `{"bootstrapConfig":<spec or null>,"machine":<spec or null>}`, as 16 lowercase
 * hex digits. Pure (no node:crypto) so workflow code may call it; not a
 * cryptographic hash — it only tells desired specs of one machine apart.
 */
export function specHash(desired: Pick<MachineObjects, 'machine' | 'bootstrapConfig'>): string {
  const doc = canonicalJson({
    bootstrapConfig: desired.bootstrapConfig?.spec ?? null,
    machine: desired.machine.spec ?? null,
  });
  return fnv1a64(doc);
}
