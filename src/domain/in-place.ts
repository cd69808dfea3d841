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
// Settings (ExtensionConfig spec.settings only: these hooks carry no Cluster):
// - `inPlaceUpdates`: "true" (default) or "false" (answer with no patches).
// - `inPlaceAllowedPaths`: comma-separated `<Kind>:<JSON pointer>` entries
//   replacing the default list; the entry `defaults` stands for the default
//   list, so `defaults,KubeadmConfig:/spec/ntp` extends it. Pointers address
//   the whole object: `/spec/...` for Machine, InfraMachine and
//   BootstrapConfig kinds, `/spec/template/spec/...` for MachineSet and
//   `*Template` kinds.
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
import { compareVersions, tryParseVersion, UNORDERED } from './versions.ts';

// ---- settings -----------------------------------------------------------------

/** An ExtensionConfig `spec.settings` key (the in-place hooks have no Cluster, so no annotation). */
export interface InPlaceSettingKey {
  readonly setting: string;
}

function key(setting: string): InPlaceSettingKey {
  return { setting };
}

export const inPlaceKeys = {
  inPlaceUpdates: key('inPlaceUpdates'),
  inPlaceAllowedPaths: key('inPlaceAllowedPaths'),
} as const;

/** Invalid in-place settings; the message names the setting and its value. */
export class InPlaceSettingsError extends Error {
  override readonly name = 'InPlaceSettingsError';
  readonly setting: string;
  readonly value: string;
  readonly reason: string;

  constructor(setting: string, value: string, reason: string) {
    super(`invalid setting ${setting} ${JSON.stringify(value)}: ${reason}`);
    this.setting = setting;
    this.value = value;
    this.reason = reason;
  }
}

/** One allowed path: a JSON pointer for objects of one kind. */
export interface AllowedPath {
  readonly kind: string;
  /** Canonical JSON pointer (escaped). */
  readonly pointer: string;
  /** Unescaped reference tokens. */
  readonly tokens: readonly string[];
}

export interface InPlacePolicy {
  readonly enabled: boolean;
  /** Sorted by kind, then tokens; no path lies under another path of the same kind. */
  readonly allowedPaths: readonly AllowedPath[];
}

export const DEFAULT_ALLOWED_PATHS: readonly string[] = [
  'Machine:/spec/version',
  'KubeadmConfig:/spec/files',
  'MachineSet:/spec/template/spec/version',
  'KubeadmConfigTemplate:/spec/template/spec/files',
];

const KIND = /^[A-Za-z][A-Za-z0-9]*$/;

/** Whether objects of `kind` carry their machine spec under `spec.template.spec`. */
function isTemplateKind(kind: string): boolean {
  return kind === 'MachineSet' || kind.endsWith('Template');
}

/** Splits a JSON pointer into unescaped tokens; undefined when it is not a valid pointer. */
export function parsePointer(pointer: string): string[] | undefined {
  if (pointer === '') return [];
  if (!pointer.startsWith('/')) return undefined;
  const tokens: string[] = [];
  for (const raw of pointer.slice(1).split('/')) {
    if (/~(?![01])/.test(raw)) return undefined;
    tokens.push(raw.replace(/~1/g, '/').replace(/~0/g, '~'));
  }
  return tokens;
}

/** Joins unescaped tokens into a JSON pointer (`~` → `~0`, `/` → `~1`). */
export function formatPointer(tokens: readonly string[]): string {
  return tokens.map((t) => `/${t.replace(/~/g, '~0').replace(/\//g, '~1')}`).join('');
}

function compareTokens(a: readonly string[], b: readonly string[]): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a[i] ?? '';
    const y = b[i] ?? '';
    if (x !== y) return x < y ? -1 : 1;
  }
  return a.length - b.length;
}

/** True when `prefix` equals `tokens` or is an ancestor of it. */
function isPrefix(prefix: readonly string[], tokens: readonly string[]): boolean {
  return prefix.length <= tokens.length && prefix.every((t, i) => tokens[i] === t);
}

function parseAllowedEntry(entry: string, setting: string, value: string): AllowedPath {
  const fail = (reason: string): never => {
    throw new InPlaceSettingsError(setting, value, `entry ${JSON.stringify(entry)}: ${reason}`);
  };
  const colon = entry.indexOf(':');
  if (colon < 0) return fail('expected <Kind>:<JSON pointer>, e.g. Machine:/spec/version');
  const kind = entry.slice(0, colon).trim();
  const pointer = entry.slice(colon + 1).trim();
  if (!KIND.test(kind)) return fail(`invalid kind ${JSON.stringify(kind)}`);
  const tokens = parsePointer(pointer);
  if (tokens === undefined) return fail(`invalid JSON pointer ${JSON.stringify(pointer)}`);
  const root = isTemplateKind(kind) ? ['spec', 'template', 'spec'] : ['spec'];
  if (!isPrefix(root, tokens)) {
    return fail(`a ${kind} path must start with ${formatPointer(root)} (only that part is copied back)`);
  }
  return { kind, pointer: formatPointer(tokens), tokens };
}

/** Sorts, de-duplicates and drops paths that lie under another path of the same kind. */
function normalizeAllowed(paths: readonly AllowedPath[]): AllowedPath[] {
  const sorted = [...paths].sort((a, b) =>
    a.kind !== b.kind ? (a.kind < b.kind ? -1 : 1) : compareTokens(a.tokens, b.tokens),
  );
  const out: AllowedPath[] = [];
  for (const p of sorted) {
    if (out.some((q) => q.kind === p.kind && isPrefix(q.tokens, p.tokens))) continue;
    out.push(p);
  }
  return out;
}

function parseAllowedList(value: string, setting: string): AllowedPath[] {
  const entries = value
    .split(',')
    .map((e) => e.trim())
    .filter((e) => e !== '');
  if (entries.length === 0) throw new InPlaceSettingsError(setting, value, 'lists no paths');
  const paths: AllowedPath[] = [];
  for (const entry of entries) {
    if (entry === 'defaults') {
      paths.push(...DEFAULT_ALLOWED_PATHS.map((d) => parseAllowedEntry(d, setting, value)));
    } else {
      paths.push(parseAllowedEntry(entry, setting, value));
    }
  }
  return normalizeAllowed(paths);
}

function readSetting(settings: Readonly<Record<string, string>> | undefined, k: InPlaceSettingKey): string | undefined {
  if (settings === undefined || !Object.hasOwn(settings, k.setting)) return undefined;
  const value = settings[k.setting];
  return value === undefined || value.trim() === '' ? undefined : value;
}

/** Reads the in-place policy from ExtensionConfig settings; throws {@link InPlaceSettingsError}. */
export function parseInPlacePolicy(settings?: Readonly<Record<string, string>>): InPlacePolicy {
  const enabledKey = inPlaceKeys.inPlaceUpdates.setting;
  const enabledRaw = readSetting(settings, inPlaceKeys.inPlaceUpdates);
  let enabled = true;
  if (enabledRaw !== undefined) {
    const v = enabledRaw.trim().toLowerCase();
    if (v !== 'true' && v !== 'false')
      throw new InPlaceSettingsError(enabledKey, enabledRaw, 'expected "true" or "false"');
    enabled = v === 'true';
  }
  const pathsKey = inPlaceKeys.inPlaceAllowedPaths.setting;
  const pathsRaw = readSetting(settings, inPlaceKeys.inPlaceAllowedPaths);
  const allowedPaths = parseAllowedList(pathsRaw ?? DEFAULT_ALLOWED_PATHS.join(','), pathsKey);
  return { enabled, allowedPaths };
}

export type InPlacePolicyResult =
  | { readonly ok: true; readonly policy: InPlacePolicy }
  | { readonly ok: false; readonly error: InPlaceSettingsError; readonly message: string };

/** What the `job` executor applies on a node: versions and bootstrap files, nothing else. */
export const JOB_EXECUTOR_PATHS: readonly string[] = DEFAULT_ALLOWED_PATHS;

/**
 * The paths a management-cluster node upgrader declares it applies (its Lease's
 * `upgrades.capi-orchestrator.io/in-place-paths` annotation, in the `inPlaceAllowedPaths`
 * syntax; absent = `defaults`). Throws {@link InPlaceSettingsError} naming `source`.
 */
export function parseDeclaredPaths(value: string | undefined, source: string): AllowedPath[] {
  return value === undefined || value.trim() === ''
    ? parseAllowedList(DEFAULT_ALLOWED_PATHS.join(','), source)
    : parseAllowedList(value, source);
}

/**
 * The allow-list cut to what `executor` can apply: CanUpdate* must never declare in place a
 * change the node-side executor would silently skip. `delegate` agents apply what they are
 * configured for, so its list stays as the settings say; `management` keeps what both the
 * settings and its upgrader's `declared` paths cover (nothing when it declares nothing).
 */
export function allowedForExecutor(
  policy: InPlacePolicy,
  executor: 'job' | 'delegate' | 'management',
  declared: readonly AllowedPath[] = [],
): InPlacePolicy {
  if (executor === 'delegate') return policy;
  if (executor === 'management') return { ...policy, allowedPaths: intersectPaths(policy.allowedPaths, declared) };
  const supported = new Set(JOB_EXECUTOR_PATHS);
  return { ...policy, allowedPaths: policy.allowedPaths.filter((p) => supported.has(`${p.kind}:${p.pointer}`)) };
}

/** What both lists cover: of two paths of one kind where one lies under the other, the deeper one. */
function intersectPaths(a: readonly AllowedPath[], b: readonly AllowedPath[]): AllowedPath[] {
  const out: AllowedPath[] = [];
  for (const p of a)
    for (const q of b) {
      if (p.kind !== q.kind) continue;
      if (isPrefix(p.tokens, q.tokens)) out.push(q);
      else if (isPrefix(q.tokens, p.tokens)) out.push(p);
    }
  return normalizeAllowed(out);
}

/** Like {@link parseInPlacePolicy} but returns the error. */
export function resolveInPlacePolicy(settings?: Readonly<Record<string, string>>): InPlacePolicyResult {
  try {
    return { ok: true, policy: parseInPlacePolicy(settings) };
  } catch (err) {
    if (err instanceof InPlaceSettingsError) return { ok: false, error: err, message: err.message };
    throw err;
  }
}

// ---- JSON helpers ---------------------------------------------------------------

type JsonObject = Record<string, unknown>;

function isObject(v: unknown): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Sets an own property (safe for keys such as `__proto__`). */
function setOwn(obj: JsonObject, k: string, value: unknown): void {
  Object.defineProperty(obj, k, { value, enumerable: true, writable: true, configurable: true });
}

function cloneJson(v: unknown): unknown {
  if (Array.isArray(v)) return v.map((x) => (x === undefined ? null : cloneJson(x)));
  if (isObject(v)) {
    const out: JsonObject = {};
    for (const k of Object.keys(v)) {
      if (v[k] !== undefined) setOwn(out, k, cloneJson(v[k]));
    }
    return out;
  }
  return v;
}

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

type Lookup =
  | { readonly kind: 'found'; readonly value: unknown }
  | { readonly kind: 'missing'; readonly depth: number }
  | { readonly kind: 'blocked' };

/** Resolves tokens through objects only; an array or scalar on the way gives `blocked`. */
function lookup(root: unknown, tokens: readonly string[]): Lookup {
  let node = root;
  for (let i = 0; i < tokens.length; i++) {
    if (!isObject(node)) return { kind: 'blocked' };
    const t = tokens[i] ?? '';
    if (!Object.hasOwn(node, t) || node[t] === undefined) return { kind: 'missing', depth: i };
    node = node[t];
  }
  return { kind: 'found', value: node };
}

/** Sets (value defined) or deletes (undefined) the member at `tokens`, creating missing objects; false when blocked. */
function setOrDelete(root: JsonObject, tokens: readonly string[], value: unknown): boolean {
  let node: JsonObject = root;
  for (let i = 0; i < tokens.length - 1; i++) {
    const t = tokens[i] ?? '';
    const next = Object.hasOwn(node, t) ? node[t] : undefined;
    if (next === undefined) {
      if (value === undefined) return true;
      const created: JsonObject = {};
      setOwn(node, t, created);
      node = created;
    } else if (isObject(next)) {
      node = next;
    } else {
      return false;
    }
  }
  const last = tokens[tokens.length - 1] ?? '';
  if (value === undefined) delete node[last];
  else setOwn(node, last, value);
  return true;
}

// ---- patches ----------------------------------------------------------------------

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
  const guards: Guard[] = [];
  if (versionTokens !== undefined) {
    const cur = lookup(working, versionTokens);
    const des = lookup(target, versionTokens);
    const reason = versionChangeRefusal(
      cur.kind === 'found' ? cur.value : undefined,
      des.kind === 'found' ? des.value : undefined,
    );
    if (reason !== undefined) guards.push({ tokens: versionTokens, reason });
  }
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

    const path = formatPointer(tokens);
    let op: JsonPatchOp | undefined;
    if (cur.kind === 'found') {
      if (desiredValue === undefined) op = { op: 'remove', path };
      else if (!jsonEqual(cur.value, desiredValue)) op = { op: 'replace', path, value: cloneJson(desiredValue) };
    } else if (desiredValue !== undefined) {
      // Add at the first missing ancestor, wrapping the value in the objects that are missing.
      let value: unknown = cloneJson(desiredValue);
      for (let i = tokens.length - 1; i > cur.depth; i--) {
        const wrapper: JsonObject = {};
        setOwn(wrapper, tokens[i] ?? '', value);
        value = wrapper;
      }
      op = { op: 'add', path: formatPointer(tokens.slice(0, cur.depth + 1)), value };
    }
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
