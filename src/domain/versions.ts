/**
 * Kubernetes version handling for upgrade plans.
 *
 * Parsing follows the tolerant rules Cluster API applies to versions it reads
 * (blang/semver `ParseTolerant`): surrounding whitespace and one leading `v`
 * are dropped, leading zeros of the numeric parts are removed and a short
 * version (`1.30`) is filled up with zeros. The rest must be a valid semantic
 * version (pre-release `-rc.1` and build metadata `+build.1` are kept).
 *
 * Ordering follows Cluster API's `version.Compare(a, b, WithBuildTags())`:
 * versions are ordered by semver precedence; when major.minor.patch and
 * pre-release are equal the build identifiers decide — numeric identifiers
 * compare numerically and sort before alphanumeric ones, a longer list sorts
 * after its prefix, and two different alphanumeric identifiers (for example
 * commit hashes) cannot be ordered: the comparison then answers
 * {@link UNORDERED} and callers take the order from a plan list.
 *
 * Pure module: no I/O.
 */
import semver from 'semver';
import type { SemVer } from 'semver';

/** Thrown (or returned) when a string is not a Kubernetes version. */
export class VersionError extends Error {
  override readonly name = 'VersionError';
  /** The rejected input, exactly as given. */
  readonly input: string;
  /** Short reason, without the input. */
  readonly reason: string;

  constructor(input: string, reason: string) {
    super(`invalid Kubernetes version ${JSON.stringify(input)}: ${reason}`);
    this.input = input;
    this.reason = reason;
  }
}

/** A parsed Kubernetes version. */
export interface KubeVersion {
  /** The input string as given. */
  readonly raw: string;
  /** Canonical form: leading `v`, then the semantic version including pre-release and build. */
  readonly canonical: string;
  readonly major: number;
  readonly minor: number;
  readonly patch: number;
  readonly prerelease: readonly (string | number)[];
  readonly build: readonly string[];
  /** The underlying semver object (build metadata is ignored by its comparisons). */
  readonly semver: SemVer;
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

/** blang/semver ParseTolerant pre-processing: trim, drop one `v`, strip leading zeros, fill short versions. */
function tolerantNormalize(input: string): string {
  let s = input.trim();
  if (s.startsWith('v')) {
    s = s.slice(1);
  }
  if (s.length === 0) {
    throw new VersionError(input, 'empty version');
  }
  const parts = splitN(s, '.', 3).map((part) => {
    if (part.length <= 1) {
      return part;
    }
    const trimmed = part.replace(/^0+/, '');
    return trimmed.length === 0 || !/^[0-9]/.test(trimmed) ? `0${trimmed}` : trimmed;
  });
  if (parts.length < 3) {
    const last = parts[parts.length - 1] ?? '';
    if (/[+-]/.test(last)) {
      throw new VersionError(input, 'a short version cannot carry pre-release or build metadata');
    }
    while (parts.length < 3) {
      parts.push('0');
    }
  }
  return parts.join('.');
}

function splitN(s: string, sep: string, n: number): string[] {
  const out: string[] = [];
  let rest = s;
  while (out.length < n - 1) {
    const i = rest.indexOf(sep);
    if (i < 0) {
      break;
    }
    out.push(rest.slice(0, i));
    rest = rest.slice(i + sep.length);
  }
  out.push(rest);
  return out;
}

/** Parses a Kubernetes version tolerantly; throws {@link VersionError} naming the input. */
export function parseVersion(input: string): KubeVersion {
  if (typeof input !== 'string') {
    throw new VersionError(String(input), 'not a string');
  }
  const normalized = tolerantNormalize(input);
  const [majorPart = '', minorPart = ''] = splitN(normalized, '.', 3);
  const [givenMajor = '', givenMinor = ''] = splitN(input.trim().replace(/^v/, ''), '.', 3);
  if (!DIGITS.test(majorPart)) {
    throw new VersionError(input, `invalid major number ${JSON.stringify(givenMajor)}`);
  }
  if (!DIGITS.test(minorPart)) {
    throw new VersionError(input, `invalid minor number ${JSON.stringify(givenMinor)}`);
  }
  const parsed = semver.parse(normalized);
  if (parsed === null) {
    throw new VersionError(input, 'not a semantic version (expected vMAJOR.MINOR.PATCH[-PRE][+BUILD])');
  }
  const canonical = `v${parsed.version}${parsed.build.length > 0 ? `+${parsed.build.join('.')}` : ''}`;
  return {
    raw: input,
    canonical,
    major: parsed.major,
    minor: parsed.minor,
    patch: parsed.patch,
    prerelease: parsed.prerelease,
    build: parsed.build,
    semver: parsed,
  };
}

/** Like {@link parseVersion} but returns the error instead of throwing. */
export function tryParseVersion(
  input: string,
): { readonly ok: true; readonly version: KubeVersion } | { readonly ok: false; readonly error: VersionError } {
  try {
    return { ok: true, version: parseVersion(input) };
  } catch (err) {
    if (err instanceof VersionError) {
      return { ok: false, error: err };
    }
    throw err;
  }
}

/** True when the input parses as a Kubernetes version. */
export function isValidVersion(input: string): boolean {
  return tryParseVersion(input).ok;
}

function toVersion(v: VersionLike): KubeVersion {
  return typeof v === 'string' ? parseVersion(v) : v;
}

/** Canonical form (`v1.30.0`, `v1.30.0-rc.1`, `v1.30.0+build.1`); throws {@link VersionError}. */
export function canonicalVersion(v: VersionLike): string {
  return toVersion(v).canonical;
}

export function majorOf(v: VersionLike): number {
  return toVersion(v).major;
}

export function minorOf(v: VersionLike): number {
  return toVersion(v).minor;
}

/** `v1.30` for `v1.30.4+build.1`. */
export function minorLabel(v: VersionLike): string {
  const parsed = toVersion(v);
  return `v${parsed.major}.${parsed.minor}`;
}

/** Semver precedence ignoring build metadata: -1, 0 or 1. */
export function compareIgnoringBuild(a: VersionLike, b: VersionLike): -1 | 0 | 1 {
  return semver.compare(toVersion(a).semver, toVersion(b).semver);
}

function compareBuildIdentifier(a: string, b: string): VersionComparison {
  const aNum = DIGITS.test(a);
  const bNum = DIGITS.test(b);
  if (aNum && !bNum) {
    return -1;
  }
  if (!aNum && bNum) {
    return 1;
  }
  if (aNum && bNum) {
    const x = BigInt(a);
    const y = BigInt(b);
    return x < y ? -1 : x > y ? 1 : 0;
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
  const main = semver.compare(va.semver, vb.semver);
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
