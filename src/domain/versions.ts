/**
 * Kubernetes version handling for upgrade plans.
 *
 * Parsing is blang/semver v4 `ParseTolerant` (what Cluster API uses for topology versions, e.g.
 * `ComputeUpgradePlan` / `DefaultAndValidateUpgradePlans` in exp/topology/desiredstate):
 * surrounding whitespace and one leading `v` are dropped, leading zeros of the three dot-separated
 * parts are removed and a short version (`1.30`) is filled up with zeros; the rest is strict
 * `Parse`: no leading zeros in a numeric pre-release identifier, no empty identifiers, only
 * `[0-9A-Za-z-]`. Numeric identifiers (major, minor, patch, numeric pre-release) are Go `uint64`:
 * a value above {@link UINT64_MAX} is not a version (Go's `strconv.ParseUint` range error).
 *
 * Numbers are kept as exact `bigint`s: no JavaScript `number` precision loss, so
 * `v1.9007199254740993.0` is above `v1.9007199254740992.0` exactly as in Go.
 *
 * Ordering follows Cluster API's `version.Compare(a, b, version.WithBuildTags())`
 * (sigs.k8s.io/cluster-api util/version/version.go): semver precedence (blang `Version.Compare`);
 * when major.minor.patch and pre-release are equal the build identifiers decide, left to right —
 * an identifier made only of digits is numeric (leading zeros allowed, `007` equals `7`; a value
 * above {@link UINT64_MAX} counts as {@link UINT64_MAX}, as Go's ignored `ParseUint` error leaves
 * it) and sorts before any other identifier, two numeric ones compare as numbers, two equal
 * alphanumeric ones are equal and two different ones (for example commit hashes) cannot be
 * ordered: the comparison then answers {@link UNORDERED} and callers take the order from a plan
 * list. When one list is a prefix of the other, the longer one is greater.
 *
 * Parsed versions are immutable and memoised (bounded), so comparing version strings repeatedly
 * does not parse them again.
 *
 * Pure module: no I/O.
 */

/** Largest value of a numeric identifier (Go `uint64`). */
export const UINT64_MAX = 18446744073709551615n;
const UINT64_MAX_DIGITS = UINT64_MAX.toString();

/** Longest version text quoted whole in a message; CAPI conditions hold 512 characters. */
const MESSAGE_VERSION_LIMIT = 64;

/**
 * A version string as messages show it: whole up to 64 characters, otherwise its first 32 and
 * its length (`v1.99999999999999999999999999999…(404 characters)`), so the reason after it is
 * never cut off.
 */
export function versionForMessage(text: string): string {
  return text.length <= MESSAGE_VERSION_LIMIT ? text : `${text.slice(0, 32)}…(${text.length} characters)`;
}

/** Thrown (or returned) when a string is not a Kubernetes version. */
export class VersionError extends Error {
  override readonly name = 'VersionError';
  /** The rejected input, exactly as given. */
  readonly input: string;
  /** Short reason, without the input. */
  readonly reason: string;

  constructor(input: string, reason: string) {
    super(`invalid Kubernetes version ${JSON.stringify(versionForMessage(input))}: ${reason}`);
    this.input = input;
    this.reason = reason;
  }
}

/** A parsed Kubernetes version. Numeric parts are exact (`bigint`, at most {@link UINT64_MAX}). */
export interface KubeVersion {
  /** The input string as given. */
  readonly raw: string;
  /** Canonical form: leading `v`, then the semantic version including pre-release and build. */
  readonly canonical: string;
  readonly major: bigint;
  readonly minor: bigint;
  readonly patch: bigint;
  /** Pre-release identifiers; numeric ones as `bigint`. */
  readonly prerelease: readonly (string | bigint)[];
  readonly build: readonly string[];
}

/** Anything a comparison accepts: a version string or an already parsed version. */
export type VersionLike = string | KubeVersion;

/**
 * Result of {@link compareVersions}: -1 lower, 0 equal, 1 greater,
 * 2 ({@link UNORDERED}) different build metadata that cannot be ordered.
 */
export type VersionComparison = -1 | 0 | 1 | 2;

/** Two versions with the same major.minor.patch[-pre] whose build tags cannot be ordered. */
export const UNORDERED = 2 as const;

const DIGITS = /^[0-9]+$/;
const ALPHANUM = /^[0-9A-Za-z-]+$/;
/** Go `unicode.IsSpace`, which differs from JavaScript's `\s` (U+0085 is one, U+FEFF is not). */
function isGoSpace(c: number): boolean {
  return (
    (c >= 0x09 && c <= 0x0d) ||
    c === 0x20 ||
    c === 0x85 ||
    c === 0xa0 ||
    c === 0x1680 ||
    (c >= 0x2000 && c <= 0x200a) ||
    c === 0x2028 ||
    c === 0x2029 ||
    c === 0x202f ||
    c === 0x205f ||
    c === 0x3000
  );
}

/**
 * Go `strings.TrimSpace`, by index: a pattern such as `^\s+|\s+$` tries its second branch at
 * every position of an inner run of spaces (`v1<100,000 spaces>x` took seconds).
 */
export function goTrimSpace(s: string): string {
  let start = 0;
  let end = s.length;
  while (start < end && isGoSpace(s.charCodeAt(start))) start++;
  while (end > start && isGoSpace(s.charCodeAt(end - 1))) end--;
  return s.slice(start, end);
}

/** Digit string without leading zeros as an exact uint64, or undefined when out of range. */
function uint64(digits: string): bigint | undefined {
  if (
    digits.length > UINT64_MAX_DIGITS.length ||
    (digits.length === UINT64_MAX_DIGITS.length && digits > UINT64_MAX_DIGITS)
  ) {
    return undefined;
  }
  return BigInt(digits);
}

function outOfRange(what: string, digits: string): string {
  const shown = digits.length > 40 ? `${digits.slice(0, 20)}…(${digits.length} digits)` : digits;
  return `${what} ${shown} is out of range (at most ${UINT64_MAX_DIGITS})`;
}

/** blang/semver ParseTolerant pre-processing of the three dot-separated parts. */
function tolerantPart(part: string): string {
  if (part.length <= 1) {
    return part;
  }
  let i = 0;
  while (i < part.length && part.charCodeAt(i) === 48 /* 0 */) {
    i++;
  }
  const trimmed = part.slice(i);
  const first = trimmed.charCodeAt(0);
  return trimmed.length === 0 || !(first >= 48 && first <= 57) ? `0${trimmed}` : trimmed;
}

function parseUncached(input: string): KubeVersion {
  if (typeof input !== 'string') {
    throw new VersionError(String(input), 'not a string');
  }
  let s = goTrimSpace(input);
  if (s.startsWith('v')) {
    s = s.slice(1);
  }
  if (s.length === 0) {
    throw new VersionError(input, 'empty version');
  }
  const d1 = s.indexOf('.');
  const d2 = d1 < 0 ? -1 : s.indexOf('.', d1 + 1);
  const givenMajor = d1 < 0 ? s : s.slice(0, d1);
  const givenMinor = d1 < 0 ? '' : d2 < 0 ? s.slice(d1 + 1) : s.slice(d1 + 1, d2);
  const majorPart = tolerantPart(givenMajor);
  let minorPart: string;
  let rest: string;
  if (d1 < 0 || d2 < 0) {
    const last = d1 < 0 ? majorPart : tolerantPart(givenMinor);
    if (last.includes('+') || last.includes('-')) {
      throw new VersionError(input, 'a short version cannot carry pre-release or build metadata');
    }
    minorPart = d1 < 0 ? '0' : last;
    rest = '0';
  } else {
    minorPart = tolerantPart(givenMinor);
    rest = tolerantPart(s.slice(d2 + 1));
  }
  if (!DIGITS.test(majorPart)) {
    throw new VersionError(input, `invalid major number ${JSON.stringify(givenMajor)}`);
  }
  if (!DIGITS.test(minorPart)) {
    throw new VersionError(input, `invalid minor number ${JSON.stringify(givenMinor)}`);
  }
  const major = uint64(majorPart);
  if (major === undefined) {
    throw new VersionError(input, outOfRange('major number', majorPart));
  }
  const minor = uint64(minorPart);
  if (minor === undefined) {
    throw new VersionError(input, outOfRange('minor number', minorPart));
  }

  let patchPart = rest;
  let build: string[] = [];
  let pre: string[] = [];
  const plus = patchPart.indexOf('+');
  if (plus >= 0) {
    build = patchPart.slice(plus + 1).split('.');
    patchPart = patchPart.slice(0, plus);
  }
  const dash = patchPart.indexOf('-');
  if (dash >= 0) {
    pre = patchPart.slice(dash + 1).split('.');
    patchPart = patchPart.slice(0, dash);
  }
  if (!DIGITS.test(patchPart)) {
    throw new VersionError(input, `invalid patch number ${JSON.stringify(patchPart)}`);
  }
  const patch = uint64(patchPart);
  if (patch === undefined) {
    throw new VersionError(input, outOfRange('patch number', patchPart));
  }
  const prerelease: (string | bigint)[] = [];
  for (const id of pre) {
    if (DIGITS.test(id)) {
      if (id.length > 1 && id.charCodeAt(0) === 48) {
        throw new VersionError(input, `numeric pre-release identifier ${JSON.stringify(id)} has a leading zero`);
      }
      const n = uint64(id);
      if (n === undefined) {
        throw new VersionError(input, outOfRange('numeric pre-release identifier', id));
      }
      prerelease.push(n);
    } else if (ALPHANUM.test(id)) {
      prerelease.push(id);
    } else {
      throw new VersionError(input, `invalid pre-release identifier ${JSON.stringify(id)}`);
    }
  }
  for (const id of build) {
    if (!ALPHANUM.test(id)) {
      throw new VersionError(input, `invalid build identifier ${JSON.stringify(id)}`);
    }
  }
  const canonical = `v${major}.${minor}.${patch}${pre.length > 0 ? `-${pre.join('.')}` : ''}${build.length > 0 ? `+${build.join('.')}` : ''}`;
  return Object.freeze({
    raw: input,
    canonical,
    major,
    minor,
    patch,
    prerelease: Object.freeze(prerelease),
    build: Object.freeze(build),
  });
}

/** Memo of parsed versions (and errors) by input string; cleared when full so it stays bounded. */
const PARSE_CACHE_LIMIT = 4096;
const parseCache = new Map<string, KubeVersion | VersionError>();

function parseCached(input: string): KubeVersion | VersionError {
  let hit = parseCache.get(input);
  if (hit === undefined) {
    try {
      hit = parseUncached(input);
    } catch (err) {
      if (!(err instanceof VersionError)) {
        throw err;
      }
      hit = err;
    }
    if (typeof input === 'string' && input.length <= 256) {
      if (parseCache.size >= PARSE_CACHE_LIMIT) {
        parseCache.clear();
      }
      parseCache.set(input, hit);
    }
  }
  return hit;
}

/** Parses a Kubernetes version tolerantly; throws {@link VersionError} naming the input. */
export function parseVersion(input: string): KubeVersion {
  const parsed = parseCached(input);
  if (parsed instanceof VersionError) {
    throw parsed;
  }
  return parsed;
}

/** Like {@link parseVersion} but returns the error instead of throwing. */
export function tryParseVersion(
  input: string,
): { readonly ok: true; readonly version: KubeVersion } | { readonly ok: false; readonly error: VersionError } {
  const parsed = parseCached(input);
  return parsed instanceof VersionError ? { ok: false, error: parsed } : { ok: true, version: parsed };
}

/** True when the input parses as a Kubernetes version. */
export function isValidVersion(input: string): boolean {
  return !(parseCached(input) instanceof VersionError);
}

function toVersion(v: VersionLike): KubeVersion {
  return typeof v === 'string' ? parseVersion(v) : v;
}

/** Canonical form (`v1.30.0`, `v1.30.0-rc.1`, `v1.30.0+build.1`); throws {@link VersionError}. */
export function canonicalVersion(v: VersionLike): string {
  return toVersion(v).canonical;
}

export function majorOf(v: VersionLike): bigint {
  return toVersion(v).major;
}

export function minorOf(v: VersionLike): bigint {
  return toVersion(v).minor;
}

/** `v1.30` for `v1.30.4+build.1`. */
export function minorLabel(v: VersionLike): string {
  const parsed = toVersion(v);
  return `v${parsed.major}.${parsed.minor}`;
}

function cmp(a: bigint | string, b: bigint | string): -1 | 0 | 1 {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** blang/semver `Version.Compare`: semver precedence ignoring build metadata, -1, 0 or 1. */
function compareCore(a: KubeVersion, b: KubeVersion): -1 | 0 | 1 {
  const c = cmp(a.major, b.major) || cmp(a.minor, b.minor) || cmp(a.patch, b.patch);
  if (c !== 0) {
    return c;
  }
  const ap = a.prerelease;
  const bp = b.prerelease;
  if (ap.length === 0 || bp.length === 0) {
    return ap.length === bp.length ? 0 : ap.length === 0 ? 1 : -1;
  }
  const n = Math.min(ap.length, bp.length);
  for (let i = 0; i < n; i++) {
    const x = ap[i] as string | bigint;
    const y = bp[i] as string | bigint;
    const xNum = typeof x === 'bigint';
    const yNum = typeof y === 'bigint';
    // Numeric identifiers sort before alphanumeric ones; two of a kind compare by value (strings bytewise).
    const d = xNum === yNum ? cmp(x, y) : xNum ? -1 : 1;
    if (d !== 0) {
      return d;
    }
  }
  return ap.length === bp.length ? 0 : ap.length < bp.length ? -1 : 1;
}

/** Semver precedence ignoring build metadata: -1, 0 or 1. */
export function compareIgnoringBuild(a: VersionLike, b: VersionLike): -1 | 0 | 1 {
  return compareCore(toVersion(a), toVersion(b));
}

/** CAPI `newBuildIdentifier`: digits-only identifiers are numbers, clamped to uint64 like an ignored ParseUint error. */
function buildNumber(id: string): bigint {
  let i = 0;
  while (i < id.length - 1 && id.charCodeAt(i) === 48) {
    i++;
  }
  return uint64(id.slice(i)) ?? UINT64_MAX;
}

function compareBuildIdentifier(a: string, b: string): VersionComparison {
  const aNum = DIGITS.test(a);
  const bNum = DIGITS.test(b);
  if (aNum !== bNum) {
    return aNum ? -1 : 1;
  }
  if (aNum) {
    return cmp(buildNumber(a), buildNumber(b));
  }
  return a === b ? 0 : UNORDERED;
}

/**
 * Compares like Cluster API's `version.Compare(a, b, version.WithBuildTags())`:
 * -1, 0, 1, or {@link UNORDERED} (2) when only alphanumeric build identifiers differ.
 */
export function compareVersions(a: VersionLike, b: VersionLike): VersionComparison {
  const va = toVersion(a);
  const vb = toVersion(b);
  const main = compareCore(va, vb);
  if (main !== 0) {
    return main;
  }
  const n = Math.min(va.build.length, vb.build.length);
  for (let i = 0; i < n; i++) {
    const c = compareBuildIdentifier(va.build[i] ?? '', vb.build[i] ?? '');
    if (c !== 0) {
      return c;
    }
  }
  if (va.build.length === vb.build.length) {
    return 0;
  }
  return va.build.length < vb.build.length ? -1 : 1;
}

/** Exactly the same version, build metadata included (`v1.30.0` equals `1.30.0`, not `v1.30.0+b.1`). */
export function sameVersion(a: VersionLike, b: VersionLike): boolean {
  return compareVersions(a, b) === 0;
}

/** Same major.minor.patch[-pre] but different build metadata: "different" versions for upgrade plans. */
export function sameCoreDifferentBuild(a: VersionLike, b: VersionLike): boolean {
  return compareIgnoringBuild(a, b) === 0 && compareVersions(a, b) !== 0;
}

/**
 * Orders `a` and `b`; when their build tags cannot be ordered, the position of each in
 * `planOrder` (compared by canonical form) decides. Returns {@link UNORDERED} when neither
 * the versions nor the list can order them.
 */
export function compareInPlan(a: VersionLike, b: VersionLike, planOrder: readonly VersionLike[]): VersionComparison {
  const c = compareVersions(a, b);
  if (c !== UNORDERED) {
    return c;
  }
  const keys = planOrder.map((v) => canonicalVersion(v));
  const ia = keys.indexOf(canonicalVersion(a));
  const ib = keys.indexOf(canonicalVersion(b));
  if (ia < 0 || ib < 0) {
    return UNORDERED;
  }
  return ia < ib ? -1 : 1;
}

/**
 * Stable sort by {@link compareVersions}; versions whose build tags cannot be ordered keep
 * their relative input order. Does not modify the input.
 */
export function sortVersions<T extends VersionLike>(list: readonly T[]): T[] {
  const parsed = list.map((v) => ({ v, p: toVersion(v) }));
  parsed.sort((x, y) => {
    const c = compareVersions(x.p, y.p);
    return c === UNORDERED ? 0 : c;
  });
  return parsed.map((e) => e.v);
}
