import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import {
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
    ['v1.30.0', 'v1.30.0', [1, 30, 0]],
    ['1.30.0', 'v1.30.0', [1, 30, 0]],
    ['v1.30.0+build.1', 'v1.30.0+build.1', [1, 30, 0]],
    ['v1.30.0-rc.1', 'v1.30.0-rc.1', [1, 30, 0]],
    ['v1.30.0-rc.1+build.7', 'v1.30.0-rc.1+build.7', [1, 30, 0]],
    ['v1.31.1+foo.2-bar.1', 'v1.31.1+foo.2-bar.1', [1, 31, 1]],
    ['  v1.30.2  ', 'v1.30.2', [1, 30, 2]],
    ['v1.30', 'v1.30.0', [1, 30, 0]],
    ['1', 'v1.0.0', [1, 0, 0]],
    ['v01.030.04', 'v1.30.4', [1, 30, 4]],
  ] as const)('parses %j as %s', (input, canonical, [major, minor, patch]) => {
    const v = parseVersion(input);
    expect(v.canonical).toBe(canonical);
    expect(v.raw).toBe(input);
    expect([v.major, v.minor, v.patch]).toEqual([major, minor, patch]);
    expect(canonicalVersion(input)).toBe(canonical);
  });

  it('keeps pre-release and build identifiers', () => {
    const v = parseVersion('v1.30.0-rc.1+build.7');
    expect(v.prerelease).toEqual(['rc', 1]);
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
    expect(majorOf('v1.32.3+b.1')).toBe(1);
    expect(minorOf('1.32.3')).toBe(32);
    expect(minorLabel('v1.32.3-rc.0')).toBe('v1.32');
  });
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
