/**
 * Kubernetes versions for upgrade plans: ordering, and (re-exported) parsing from
 * version-parse.ts.
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
 * Pure module: no I/O.
 */
import { DIGITS, UINT64_MAX, parseVersion, uint64, type KubeVersion } from './version-parse.ts';

export {
  UINT64_MAX,
  VersionError,
  goTrimSpace,
  isValidVersion,
  parseVersion,
  tryParseVersion,
  versionForMessage,
  type KubeVersion,
} from './version-parse.ts';

/** Anything a comparison accepts: a version string or an already parsed version. */
export type VersionLike = string | KubeVersion;

/**
 * Result of {@link compareVersions}: -1 lower, 0 equal, 1 greater,
 * 2 ({@link UNORDERED}) different build metadata that cannot be ordered.
 */
export type VersionComparison = -1 | 0 | 1 | 2;

/** Two versions with the same major.minor.patch[-pre] whose build tags cannot be ordered. */
export const UNORDERED = 2 as const;

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
