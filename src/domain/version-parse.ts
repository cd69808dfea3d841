/**
 * Parsing Kubernetes versions for upgrade plans.
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

/** A numeric identifier: digits only. */
export const DIGITS = /^[0-9]+$/;
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
export function uint64(digits: string): bigint | undefined {
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

/** The major and minor parts as given and tolerantly cleaned, and the rest (patch, pre-release, build). */
interface TolerantParts {
  readonly givenMajor: string;
  readonly givenMinor: string;
  readonly majorPart: string;
  readonly minorPart: string;
  readonly rest: string;
}

/** Splits a trimmed version without its `v` into its parts; a short one is filled up with zeros. */
function tolerantParts(input: string, s: string): TolerantParts {
  const d1 = s.indexOf('.');
  const d2 = d1 < 0 ? -1 : s.indexOf('.', d1 + 1);
  const givenMajor = d1 < 0 ? s : s.slice(0, d1);
  const givenMinor = d1 < 0 ? '' : d2 < 0 ? s.slice(d1 + 1) : s.slice(d1 + 1, d2);
  const majorPart = tolerantPart(givenMajor);
  if (d1 < 0 || d2 < 0) {
    const last = d1 < 0 ? majorPart : tolerantPart(givenMinor);
    if (last.includes('+') || last.includes('-')) {
      throw new VersionError(input, 'a short version cannot carry pre-release or build metadata');
    }
    return { givenMajor, givenMinor, majorPart, minorPart: d1 < 0 ? '0' : last, rest: '0' };
  }
  return {
    givenMajor,
    givenMinor,
    majorPart,
    minorPart: tolerantPart(givenMinor),
    rest: tolerantPart(s.slice(d2 + 1)),
  };
}

/** A major, minor or patch number must be digits only. */
function checkDigits(input: string, what: string, part: string, given: string): void {
  if (!DIGITS.test(part)) {
    throw new VersionError(input, `invalid ${what} ${JSON.stringify(given)}`);
  }
}

/** A number of digits within uint64. */
function inRange(input: string, what: string, digits: string): bigint {
  const n = uint64(digits);
  if (n === undefined) {
    throw new VersionError(input, outOfRange(what, digits));
  }
  return n;
}

/** Pre-release identifiers, numeric ones (no leading zero, within uint64) as `bigint`. */
function prereleaseIdentifiers(input: string, pre: readonly string[]): (string | bigint)[] {
  const prerelease: (string | bigint)[] = [];
  for (const id of pre) {
    if (DIGITS.test(id)) {
      if (id.length > 1 && id.charCodeAt(0) === 48) {
        throw new VersionError(input, `numeric pre-release identifier ${JSON.stringify(id)} has a leading zero`);
      }
      prerelease.push(inRange(input, 'numeric pre-release identifier', id));
    } else if (ALPHANUM.test(id)) {
      prerelease.push(id);
    } else {
      throw new VersionError(input, `invalid pre-release identifier ${JSON.stringify(id)}`);
    }
  }
  return prerelease;
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
  const parts = tolerantParts(input, s);
  checkDigits(input, 'major number', parts.majorPart, parts.givenMajor);
  checkDigits(input, 'minor number', parts.minorPart, parts.givenMinor);
  const major = inRange(input, 'major number', parts.majorPart);
  const minor = inRange(input, 'minor number', parts.minorPart);

  let patchPart = parts.rest;
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
  checkDigits(input, 'patch number', patchPart, patchPart);
  const patch = inRange(input, 'patch number', patchPart);
  const prerelease = prereleaseIdentifiers(input, pre);
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
