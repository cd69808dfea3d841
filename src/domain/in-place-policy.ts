// The in-place settings (ExtensionConfig spec.settings only: CanUpdateMachine
// and CanUpdateMachineSet carry no Cluster), and what each node-upgrade
// executor can apply:
// - `inPlaceUpdates`: "true" (default) or "false" (answer with no patches).
// - `inPlaceAllowedPaths`: comma-separated `<Kind>:<JSON pointer>` entries
//   replacing the default list; the entry `defaults` stands for the default
//   list, so `defaults,KubeadmConfig:/spec/ntp` extends it. Pointers address
//   the whole object: `/spec/...` for Machine, InfraMachine and
//   BootstrapConfig kinds, `/spec/template/spec/...` for MachineSet and
//   `*Template` kinds.
// Pure: no I/O; errors name the setting and its value.
import { compareTokens, formatPointer, isPrefix, parsePointer } from './json-pointer.ts';
import { valueOverLimit } from './policy-keys.ts';

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

  /** `message` instead of the usual one (which quotes the value): for a value over its limit. */
  constructor(setting: string, value: string, reason: string, message?: string) {
    super(message ?? `invalid setting ${setting} ${JSON.stringify(value)}: ${reason}`);
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
  // `setting` is a setting's name or what names an upgrader's Lease annotation.
  const tooLong = valueOverLimit(setting.includes(' ') ? setting : `setting ${setting}`, 'inPlaceAllowedPaths', value);
  if (tooLong !== undefined) throw new InPlaceSettingsError(setting, '', 'over its limit', tooLong);
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
  const tooLong = valueOverLimit(`setting ${k.setting}`, k.setting, value ?? '');
  if (tooLong !== undefined) throw new InPlaceSettingsError(k.setting, '', 'over its limit', tooLong);
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
