import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import semver from 'semver';
import {
  UINT64_MAX,
  UNORDERED,
  VersionError,
  canonicalVersion,
  compareIgnoringBuild,
  compareInPlan,
  compareVersions,
  isValidVersion,
  majorOf,
  minorLabel,
  minorOf,
  parseVersion,
  sameCoreDifferentBuild,
  sameVersion,
  sortVersions,
  tryParseVersion,
} from '../../src/domain/versions.ts';
import type { VersionComparison } from '../../src/domain/versions.ts';

describe('parseVersion', () => {
  it.each([
    ['v1.30.0', 'v1.30.0', [1n, 30n, 0n]],
    ['1.30.0', 'v1.30.0', [1n, 30n, 0n]],
    ['v1.30.0+build.1', 'v1.30.0+build.1', [1n, 30n, 0n]],
    ['v1.30.0-rc.1', 'v1.30.0-rc.1', [1n, 30n, 0n]],
    ['v1.30.0-rc.1+build.7', 'v1.30.0-rc.1+build.7', [1n, 30n, 0n]],
    ['v1.31.1+foo.2-bar.1', 'v1.31.1+foo.2-bar.1', [1n, 31n, 1n]],
    ['  v1.30.2  ', 'v1.30.2', [1n, 30n, 2n]],
    ['v1.30', 'v1.30.0', [1n, 30n, 0n]],
    ['1', 'v1.0.0', [1n, 0n, 0n]],
    ['v01.030.04', 'v1.30.4', [1n, 30n, 4n]],
    ['v1.30.0+007', 'v1.30.0+007', [1n, 30n, 0n]],
    ['v1.30.00-rc.1', 'v1.30.0-rc.1', [1n, 30n, 0n]],
    ['v1.9007199254740993.0', 'v1.9007199254740993.0', [1n, 9007199254740993n, 0n]],
    ['v1.18446744073709551615.0', 'v1.18446744073709551615.0', [1n, UINT64_MAX, 0n]],
    [
      'v18446744073709551615.0.18446744073709551615',
      'v18446744073709551615.0.18446744073709551615',
      [UINT64_MAX, 0n, UINT64_MAX],
    ],
    ['\u0085v1.30.0\u3000', 'v1.30.0', [1n, 30n, 0n]],
  ] as const)('parses %j as %s', (input, canonical, [major, minor, patch]) => {
    const v = parseVersion(input);
    expect(v.canonical).toBe(canonical);
    expect(v.raw).toBe(input);
    expect([v.major, v.minor, v.patch]).toEqual([major, minor, patch]);
    expect(canonicalVersion(input)).toBe(canonical);
  });

  it('keeps pre-release and build identifiers', () => {
    const v = parseVersion('v1.30.0-rc.1+build.7');
    expect(v.prerelease).toEqual(['rc', 1n]);
    expect(parseVersion('v1.30.0-rc.9007199254740993').prerelease).toEqual(['rc', 9007199254740993n]);
    expect(v.build).toEqual(['build', '7']);
  });

  it.each([
    ['', 'invalid Kubernetes version "": empty version'],
    ['v', 'invalid Kubernetes version "v": empty version'],
    ['foo', 'invalid Kubernetes version "foo": invalid major number "foo"'],
    ['vv1.30.0', 'invalid Kubernetes version "vv1.30.0": invalid major number "v1"'],
    ['1.x.0', 'invalid Kubernetes version "1.x.0": invalid minor number "x"'],
    ['v1.30-rc.1', 'invalid Kubernetes version "v1.30-rc.1": invalid minor number "30-rc"'],
    ['v1.30+b', 'invalid Kubernetes version "v1.30+b": a short version cannot carry pre-release or build metadata'],
  ])('rejects %j with a stable message', (input, message) => {
    expect(() => parseVersion(input)).toThrow(VersionError);
    expect(() => parseVersion(input)).toThrow(message);
  });

  it.each(['1.30.x', '1.30.0+', '1.30.0-01', '1.30.0 1', 'latest', '1.30.0+a_b'])(
    'rejects %j naming the input',
    (input) => {
      const result = tryParseVersion(input);
      expect(result.ok).toBe(false);
      if (!result.ok) {
        expect(result.error).toBeInstanceOf(VersionError);
        expect(result.error.input).toBe(input);
        expect(result.error.message).toContain(JSON.stringify(input));
      }
      expect(isValidVersion(input)).toBe(false);
    },
  );

  it('has helpers for major, minor and the minor label', () => {
    expect(majorOf('v1.32.3+b.1')).toBe(1n);
    expect(minorOf('1.32.3')).toBe(32n);
    expect(minorLabel('v1.32.3-rc.0')).toBe('v1.32');
  });

  // Outcomes checked against github.com/blang/semver/v4 v4.0.0 ParseTolerant (Go 1.26): numeric
  // identifiers are uint64, strconv.ParseUint's range error makes the version invalid.
  it.each([
    ['v1.18446744073709551616.0', 'minor number 18446744073709551616 is out of range (at most 18446744073709551615)'],
    ['v18446744073709551616.0.0', 'major number 18446744073709551616 is out of range (at most 18446744073709551615)'],
    ['v1.0.18446744073709551616', 'patch number 18446744073709551616 is out of range (at most 18446744073709551615)'],
    [
      'v1.30.0-rc.18446744073709551616',
      'numeric pre-release identifier 18446744073709551616 is out of range (at most 18446744073709551615)',
    ],
    [
      `v1.${'9'.repeat(400)}.0`,
      'minor number 99999999999999999999…(400 digits) is out of range (at most 18446744073709551615)',
    ],
    ['v1.30.0-rc.01', 'numeric pre-release identifier "01" has a leading zero'],
    ['v1.30.0\ufeff', 'invalid patch number "0\ufeff"'],
    ['v1.30.0+', 'invalid build identifier ""'],
    ['v1.30.0-', 'invalid pre-release identifier ""'],
  ])('rejects %j as Go semver does: %s', (input, reason) => {
    const result = tryParseVersion(input);
    expect(result.ok).toBe(false);
    if (!result.ok) {
      expect(result.error.reason).toBe(reason);
    }
  });

  // No wall-clock bound (it flaked at 106 ms on a loaded CI machine): a backtracking parse of these
  // inputs would not finish within the test's timeout at all; a linear one takes milliseconds.
  it('parses and rejects a 100,000-digit minor and build tag without backtracking', () => {
    expect(isValidVersion(`v1.${'7'.repeat(100_000)}.0`)).toBe(false);
    expect(isValidVersion(`v1.30.0+${'7'.repeat(100_000)}`)).toBe(true);
    expect(isValidVersion(`v1.30.0-${'a.'.repeat(50_000)}!`)).toBe(false);
  }, 5_000);
});

describe('compareVersions (Cluster API order, build tags included)', () => {
  it.each<[string, string, VersionComparison]>([
    ['v1.30.0', 'v1.30.0', 0],
    ['v1.30.0', '1.30.0', 0],
    ['v1.30.0', 'v1.30.1', -1],
    ['v1.31.0', 'v1.30.14', 1],
    ['v1.30.0-rc.1', 'v1.30.0', -1],
    ['v1.30.0-rc.2', 'v1.30.0-rc.10', -1],
    ['v1.30.0-alpha.1', 'v1.30.0-beta.0', -1],
    ['v1.30.0', 'v1.30.0+build.1', -1],
    ['v1.30.0+build.2', 'v1.30.0+build.1', 1],
    ['v1.30.0+build.2', 'v1.30.0+build.10', -1],
    ['v1.30.0+1', 'v1.30.0+abc', -1],
    ['v1.30.0+abc', 'v1.30.0+def', UNORDERED],
    ['v1.31.1+foo.1-bar.1', 'v1.31.1+foo.2-bar.1', UNORDERED],
    ['v1.30.0+abc', 'v1.30.0+abc', 0],
    ['v1.30.0+abc', 'v1.30.0+abc.1', -1],
    ['v1.30.1+abc', 'v1.30.0+def', 1],
  ])('compare(%s, %s) = %d', (a, b, want) => {
    expect(compareVersions(a, b)).toBe(want);
    const reverse = want === UNORDERED ? UNORDERED : want === 0 ? 0 : -want;
    expect(compareVersions(b, a)).toBe(reverse);
  });

  // Each pair checked with Cluster API v1.14.2 version.Compare(a, b, version.WithBuildTags()).
  it.each<[string, string, VersionComparison]>([
    ['v1.9007199254740993.0', 'v1.9007199254740992.0', 1],
    ['v1.9007199254740992.0', 'v1.9007199254740992.0', 0],
    ['v9007199254740993.0.0', 'v9007199254740992.0.0', 1],
    ['v1.30.9007199254740993', 'v1.30.9007199254740992', 1],
    ['v1.18446744073709551615.0', 'v1.18446744073709551614.0', 1],
    ['v1.30.0-rc.9007199254740993', 'v1.30.0-rc.9007199254740992', 1],
    ['v1.30.0-rc.18446744073709551615', 'v1.30.0-rc.a', -1],
    ['v1.30.0+9007199254740993', 'v1.30.0+9007199254740992', 1],
    ['v1.30.0+18446744073709551614', 'v1.30.0+18446744073709551616', -1],
    // Build identifiers beyond uint64 are all uint64's maximum in Cluster API (ParseUint's error is ignored).
    ['v1.30.0+18446744073709551616', 'v1.30.0+99999999999999999999999', 0],
    ['v1.30.0+18446744073709551615', 'v1.30.0+18446744073709551616', 0],
    // Build identifiers may have leading zeros: compared as numbers.
    ['v1.30.0+007', 'v1.30.0+7', 0],
    ['v1.30.0+010', 'v1.30.0+9', 1],
  ])('compares exactly beyond 2^53: compare(%s, %s) = %d', (a, b, want) => {
    expect(compareVersions(a, b)).toBe(want);
    expect(compareVersions(b, a)).toBe(want === 0 ? 0 : -want);
  });

  it('ignores build tags when asked', () => {
    expect(compareIgnoringBuild('v1.30.0+abc', 'v1.30.0+def')).toBe(0);
    expect(compareIgnoringBuild('v1.30.0+abc', 'v1.30.1')).toBe(-1);
  });

  it('treats same core with a different build tag as a different version', () => {
    expect(sameCoreDifferentBuild('v1.30.0+abc', 'v1.30.0+def')).toBe(true);
    expect(sameCoreDifferentBuild('v1.30.0', 'v1.30.0+build.1')).toBe(true);
    expect(sameCoreDifferentBuild('v1.30.0', '1.30.0')).toBe(false);
    expect(sameCoreDifferentBuild('v1.30.0', 'v1.30.1')).toBe(false);
    expect(sameVersion('v1.30.0+abc', 'v1.30.0+def')).toBe(false);
    expect(sameVersion('1.30.0+abc', 'v1.30.0+abc')).toBe(true);
  });

  it('takes the order of unorderable build tags from a plan list', () => {
    const plan = ['v1.31.1+foo.2-bar.1', 'v1.31.1+foo.1-bar.1'];
    expect(compareInPlan('v1.31.1+foo.2-bar.1', 'v1.31.1+foo.1-bar.1', plan)).toBe(-1);
    expect(compareInPlan('v1.31.1+foo.1-bar.1', 'v1.31.1+foo.2-bar.1', plan)).toBe(1);
    expect(compareInPlan('v1.31.1+foo.1-bar.1', 'v1.31.1+foo.3-bar.1', plan)).toBe(UNORDERED);
    expect(compareInPlan('v1.30.0', 'v1.31.0', [])).toBe(-1);
  });

  it('sorts stably, keeping unorderable build tags in input order', () => {
    expect(sortVersions(['v1.32.0', 'v1.30.0+b.2', 'v1.30.0+zzz', 'v1.30.0+aaa', 'v1.30.0', 'v1.29.9'])).toEqual([
      'v1.29.9',
      'v1.30.0',
      'v1.30.0+b.2',
      'v1.30.0+zzz',
      'v1.30.0+aaa',
      'v1.32.0',
    ]);
  });
});

const identifier = fc.stringMatching(/^[0-9A-Za-z-]{1,6}$/).filter((s) => !/^0[0-9]+$/.test(s));
const versionArb = fc
  .record({
    minor: fc.integer({ min: 0, max: 60 }),
    patch: fc.integer({ min: 0, max: 30 }),
    pre: fc.option(fc.array(identifier, { minLength: 1, maxLength: 2 }), { nil: undefined }),
    build: fc.option(fc.array(identifier, { minLength: 1, maxLength: 3 }), { nil: undefined }),
    v: fc.boolean(),
  })
  .map(
    ({ minor, patch, pre, build, v }) =>
      `${v ? 'v' : ''}1.${minor}.${patch}${pre ? `-${pre.join('.')}` : ''}${build ? `+${build.join('.')}` : ''}`,
  );

describe('version properties', () => {
  it('canonical form is stable and starts with v', () => {
    fc.assert(
      fc.property(versionArb, (s) => {
        const c = canonicalVersion(s);
        expect(c.startsWith('v')).toBe(true);
        expect(canonicalVersion(c)).toBe(c);
        expect(compareVersions(s, c)).toBe(0);
      }),
    );
  });

  it('comparison is antisymmetric and agrees with semver when cores differ', () => {
    fc.assert(
      fc.property(versionArb, versionArb, (a, b) => {
        const ab = compareVersions(a, b);
        const ba = compareVersions(b, a);
        if (ab === UNORDERED) {
          expect(ba).toBe(UNORDERED);
          expect(compareIgnoringBuild(a, b)).toBe(0);
        } else {
          expect(ba).toBe(ab === 0 ? 0 : -ab);
        }
        const core = compareIgnoringBuild(a, b);
        if (core !== 0) {
          expect(ab).toBe(core);
        }
      }),
    );
  });
});

/** Any uint64, biased towards the edges: small, around 2^53 and around 2^64. */
const uint64Arb = fc.oneof(
  fc.bigInt({ min: 0n, max: 60n }),
  fc.bigInt({ min: 2n ** 53n - 3n, max: 2n ** 53n + 3n }),
  fc.bigInt({ min: UINT64_MAX - 3n, max: UINT64_MAX }),
  fc.bigInt({ min: 0n, max: UINT64_MAX }),
);

const sign = (x: bigint, y: bigint) => (x < y ? -1 : x > y ? 1 : 0);

describe('exact numeric identifiers (properties)', () => {
  it('major, minor, patch and numeric pre-release compare as the integers they spell', () => {
    fc.assert(
      fc.property(
        fc.array(uint64Arb, { minLength: 4, maxLength: 4 }),
        fc.array(uint64Arb, { minLength: 4, maxLength: 4 }),
        (x, y) => {
          const [a0, a1, a2, a3] = x as [bigint, bigint, bigint, bigint];
          const [b0, b1, b2, b3] = y as [bigint, bigint, bigint, bigint];
          const a = `v${a0}.${a1}.${a2}-rc.${a3}`;
          const b = `v${b0}.${b1}.${b2}-rc.${b3}`;
          const want = sign(a0, b0) || sign(a1, b1) || sign(a2, b2) || sign(a3, b3);
          expect(compareVersions(a, b)).toBe(want);
          expect(parseVersion(a).canonical).toBe(a);
          expect([parseVersion(a).major, parseVersion(a).minor, parseVersion(a).patch]).toEqual([a0, a1, a2]);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('numeric build identifiers compare as integers, clamped to uint64 like Cluster API', () => {
    const build = fc.oneof(uint64Arb, fc.bigInt({ min: UINT64_MAX, max: 10n ** 30n }));
    fc.assert(
      fc.property(build, build, fc.nat({ max: 3 }), (x, y, zeros) => {
        const clamp = (n: bigint) => (n > UINT64_MAX ? UINT64_MAX : n);
        const a = `v1.30.0+${'0'.repeat(zeros)}${x}`;
        const b = `v1.30.0+${y}`;
        expect(compareVersions(a, b)).toBe(sign(clamp(x), clamp(y)));
      }),
      { numRuns: 500 },
    );
  });

  it('agrees with node-semver wherever node-semver is exact (identifiers below 2^53)', () => {
    const small = fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER - 1 });
    const pre = fc.option(
      fc.array(fc.oneof(small.map(String), fc.stringMatching(/^[a-z][0-9a-z-]{0,4}$/)), { minLength: 1, maxLength: 3 }),
      {
        nil: undefined,
      },
    );
    const arb = fc
      .tuple(small, small, small, pre)
      .map(([ma, mi, pa, p]) => `${ma}.${mi}.${pa}${p ? `-${p.join('.')}` : ''}`);
    fc.assert(
      fc.property(arb, arb, (a, b) => {
        expect(compareIgnoringBuild(a, b)).toBe(semver.compare(a, b));
      }),
      { numRuns: 500 },
    );
  });
});
