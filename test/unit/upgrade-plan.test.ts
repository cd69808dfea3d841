import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { KUBERNETES_RELEASES, KUBERNETES_RELEASES_NEWEST } from '../../src/domain/kubernetes-releases.ts';
import { defaultAndValidateUpgradePlan, validateUpgradePlan } from '../../src/domain/upgrade-plan-validator.ts';
import {
  MAX_PLAN_MINORS,
  defaultPlanPolicy,
  generateUpgradePlan,
  parseControlPlaneStrategy,
  parseWorkersStrategy,
} from '../../src/domain/upgrade-plan.ts';
import type { PlanPolicy, PlanRequest, PlanResult, WorkersStrategy } from '../../src/domain/upgrade-plan.ts';
import {
  KUBERNETES_VERSIONS_SETTING,
  catalogIncludes,
  catalogStepsTo,
  createCatalog,
  defaultCatalog,
  parseCatalog,
  resolveCatalog,
} from '../../src/domain/version-catalog.ts';
import type { VersionCatalog } from '../../src/domain/version-catalog.ts';
import { UINT64_MAX, compareVersions, parseVersion } from '../../src/domain/versions.ts';

function catalog(csv: string): VersionCatalog {
  const result = parseCatalog(csv);
  if (!result.ok) {
    throw new Error(result.message);
  }
  return result.catalog;
}

/** The three versions the upgrade-plan seed document uses in its examples. */
const SEED_CATALOG = catalog('v1.30.0, v1.31.0, v1.32.3');

function policy(overrides: Partial<PlanPolicy> = {}): PlanPolicy {
  return { ...defaultPlanPolicy(), ...overrides };
}

function planOf(result: PlanResult): { controlPlaneUpgrades: string[]; workersUpgrades: string[] } {
  if (!result.ok) {
    throw new Error(`expected a plan, got: ${result.message}`);
  }
  return result.plan;
}

/** Patches of a minor in the built-in catalog, e.g. range(30) = v1.30.0 … v1.30.14. */
function builtInPatches(minor: number, fromPatch = 0): string[] {
  return KUBERNETES_RELEASES.filter(
    (v) => parseVersion(v).minor === BigInt(minor) && parseVersion(v).patch >= BigInt(fromPatch),
  );
}

describe('built-in release catalog', () => {
  it('is sorted, canonical, without duplicates, and covers v1.24.0 … the newest release', () => {
    const sorted = [...KUBERNETES_RELEASES].sort((a, b) => compareVersions(a, b));
    expect(KUBERNETES_RELEASES).toEqual(sorted);
    expect(new Set(KUBERNETES_RELEASES).size).toBe(KUBERNETES_RELEASES.length);
    expect(
      KUBERNETES_RELEASES.every((v) => parseVersion(v).canonical === v && parseVersion(v).prerelease.length === 0),
    ).toBe(true);
    expect(KUBERNETES_RELEASES[0]).toBe('v1.24.0');
    expect(KUBERNETES_RELEASES[KUBERNETES_RELEASES.length - 1]).toBe(KUBERNETES_RELEASES_NEWEST);
  });

  it('has every patch from .0 up for each minor', () => {
    for (let minor = 24; minor <= parseVersion(KUBERNETES_RELEASES_NEWEST).minor; minor++) {
      const patches = builtInPatches(minor).map((v) => Number(parseVersion(v).patch));
      expect(patches.length).toBeGreaterThan(0);
      expect(patches).toEqual(patches.map((_, i) => i));
    }
    expect(builtInPatches(24)).toHaveLength(18);
    expect(builtInPatches(30)).toHaveLength(15);
  });
});

describe('version catalog', () => {
  it('defaults to the built-in releases', () => {
    expect(defaultCatalog().versions).toEqual(KUBERNETES_RELEASES);
    expect(defaultCatalog().source).toBe('built-in');
    expect(resolveCatalog([])).toEqual({ ok: true, catalog: defaultCatalog() });
  });

  it('parses a comma-separated override: trimmed, canonical, sorted, deduplicated', () => {
    expect(parseCatalog(' 1.31.2 ,v1.30.0,, v1.31.2,v1.30.0+b.1 ')).toEqual({
      ok: true,
      catalog: { versions: ['v1.30.0', 'v1.30.0+b.1', 'v1.31.2'], source: KUBERNETES_VERSIONS_SETTING },
    });
  });

  it.each([
    ['v1.30.0,foo', 'invalid kubernetesVersions: "foo" is not a Kubernetes version'],
    ['v1.30.0, 1.x ,latest', 'invalid kubernetesVersions: "1.x", "latest" are not Kubernetes versions'],
    [' , ', 'invalid kubernetesVersions: no Kubernetes versions listed'],
  ])('rejects %j naming the bad entries', (csv, message) => {
    expect(parseCatalog(csv)).toEqual({ ok: false, message });
  });

  it('resolves the first set source (annotation before setting) and never hides a bad one', () => {
    const annotation = { name: 'annotation upgrade.example/kubernetes-versions', value: 'v1.30.1' };
    const setting = { name: KUBERNETES_VERSIONS_SETTING, value: 'v1.30.2' };
    expect(resolveCatalog([annotation, setting])).toEqual({
      ok: true,
      catalog: { versions: ['v1.30.1'], source: annotation.name },
    });
    expect(resolveCatalog([{ ...annotation, value: '  ' }, setting])).toEqual({
      ok: true,
      catalog: { versions: ['v1.30.2'], source: KUBERNETES_VERSIONS_SETTING },
    });
    expect(
      resolveCatalog([
        { ...annotation, value: undefined },
        { ...setting, value: 'bad' },
      ]),
    ).toEqual({
      ok: false,
      message: 'invalid kubernetesVersions: "bad" is not a Kubernetes version',
    });
  });

  it('appends a target missing from the catalog as the last step', () => {
    expect(catalogStepsTo(SEED_CATALOG, 'v1.29.0', 'v1.33.0')).toEqual(['v1.30.0', 'v1.31.0', 'v1.32.3', 'v1.33.0']);
    expect(catalogStepsTo(SEED_CATALOG, 'v1.29.0', '1.31.0')).toEqual(['v1.30.0', 'v1.31.0']);
    expect(catalogIncludes(SEED_CATALOG, '1.32.3')).toBe(true);
    expect(catalogIncludes(SEED_CATALOG, 'v1.32.3+b.1')).toBe(false);
    expect(createCatalog([], 'x')).toEqual({ ok: false, message: 'invalid x: no Kubernetes versions listed' });
  });
});

interface PlanCase {
  name: string;
  request: PlanRequest;
  policy: Partial<PlanPolicy>;
  cp: string[];
  workers: string[];
}

describe('generateUpgradePlan: examples from the upgrade-plan seed', () => {
  it.each<PlanCase>([
    {
      name: 'v1.29.0 → v1.33.0 (newest patches, workers left to Cluster API)',
      request: { fromControlPlane: 'v1.29.0', fromWorkers: 'v1.29.0', to: 'v1.33.0' },
      policy: { catalog: SEED_CATALOG },
      cp: ['v1.30.0', 'v1.31.0', 'v1.32.3', 'v1.33.0'],
      workers: [],
    },
    {
      name: 'v1.29.0 → v1.33.0 with the built-in catalog',
      request: { fromControlPlane: 'v1.29.0', fromWorkers: 'v1.29.0', to: 'v1.33.0' },
      policy: {},
      cp: ['v1.30.14', 'v1.31.14', 'v1.32.13', 'v1.33.0'],
      workers: [],
    },
    {
      name: 'through more patch releases of a minor (every-patch)',
      request: { fromControlPlane: 'v1.29.15', fromWorkers: 'v1.29.15', to: 'v1.31.0' },
      policy: { controlPlane: 'every-patch' },
      cp: [...builtInPatches(30), 'v1.31.0'],
      workers: [],
    },
    {
      name: 'forced workers steps v1.30.0 and v1.32.3 on v1.29.0 → v1.32.3',
      request: { fromControlPlane: 'v1.29.0', fromWorkers: 'v1.29.0', to: 'v1.32.3' },
      policy: { catalog: SEED_CATALOG, workers: ['v1.30.0', 'v1.32.3'] },
      cp: ['v1.30.0', 'v1.31.0', 'v1.32.3'],
      workers: ['v1.30.0', 'v1.32.3'],
    },
    {
      name: 'forced workers steps with the built-in catalog pin v1.30.0 into the control plane plan',
      request: { fromControlPlane: 'v1.29.0', fromWorkers: 'v1.29.0', to: 'v1.32.3' },
      policy: { workers: ['v1.32.3', 'v1.30.0'] },
      cp: ['v1.30.0', 'v1.31.14', 'v1.32.3'],
      workers: ['v1.30.0', 'v1.32.3'],
    },
    {
      name: 'workers through all the intermediate steps (every-minor)',
      request: { fromControlPlane: 'v1.29.0', fromWorkers: 'v1.29.0', to: 'v1.32.3' },
      policy: { catalog: SEED_CATALOG, workers: 'every-minor' },
      cp: ['v1.30.0', 'v1.31.0', 'v1.32.3'],
      workers: ['v1.30.0', 'v1.31.0', 'v1.32.3'],
    },
  ])('$name', (c) => {
    const plan = planOf(generateUpgradePlan(c.request, policy(c.policy)));
    expect(plan).toEqual({ controlPlaneUpgrades: c.cp, workersUpgrades: c.workers });
    expect(validateUpgradePlan({ ...c.request, controlPlaneUpgrades: c.cp, workersUpgrades: c.workers })).toEqual([]);
  });
});

describe('generateUpgradePlan: strategies and edge cases', () => {
  it.each<PlanCase>([
    {
      name: 'every-patch walks the rest of the current minor too',
      request: { fromControlPlane: 'v1.29.12', fromWorkers: 'v1.29.12', to: 'v1.31.1' },
      policy: { controlPlane: 'every-patch' },
      cp: ['v1.29.13', 'v1.29.14', 'v1.29.15', ...builtInPatches(30), 'v1.31.0', 'v1.31.1'],
      workers: [],
    },
    {
      name: 'every-patch with every-minor workers: the last patch of each minor',
      request: { fromControlPlane: 'v1.29.14', fromWorkers: 'v1.29.14', to: 'v1.31.1' },
      policy: { controlPlane: 'every-patch', workers: 'every-minor' },
      cp: ['v1.29.15', ...builtInPatches(30), 'v1.31.0', 'v1.31.1'],
      workers: ['v1.30.14', 'v1.31.1'],
    },
    {
      name: 'patch-only upgrade (newest-patch): just the target',
      request: { fromControlPlane: 'v1.32.1', fromWorkers: 'v1.32.1', to: 'v1.32.4' },
      policy: { workers: 'every-minor' },
      cp: ['v1.32.4'],
      workers: ['v1.32.4'],
    },
    {
      name: 'patch-only upgrade (every-patch)',
      request: { fromControlPlane: 'v1.32.1', fromWorkers: 'v1.32.1', to: 'v1.32.4' },
      policy: { controlPlane: 'every-patch', workers: 'every-minor' },
      cp: ['v1.32.2', 'v1.32.3', 'v1.32.4'],
      workers: ['v1.32.4'],
    },
    {
      name: 'already at the target',
      request: { fromControlPlane: 'v1.33.0', fromWorkers: 'v1.33.0', to: 'v1.33.0' },
      policy: { workers: 'every-minor' },
      cp: [],
      workers: [],
    },
    {
      name: 'already at the target, spelled differently, no workers',
      request: { fromControlPlane: '1.33.0', to: 'v1.33.0' },
      policy: { workers: ['v1.33.0'] },
      cp: [],
      workers: [],
    },
    {
      name: 'no workers: no workers plan whatever the strategy',
      request: { fromControlPlane: 'v1.30.0', fromWorkers: '', to: 'v1.32.0' },
      policy: { workers: 'every-minor' },
      cp: ['v1.31.14', 'v1.32.0'],
      workers: [],
    },
    {
      name: 'control plane done, workers behind (every-minor uses the control plane version)',
      request: { fromControlPlane: 'v1.33.0', fromWorkers: 'v1.31.0', to: 'v1.33.0' },
      policy: { workers: 'every-minor' },
      cp: [],
      workers: ['v1.33.0'],
    },
    {
      name: 'workers one minor behind the control plane follow its current version first',
      request: { fromControlPlane: '1.31.0', fromWorkers: 'v1.30.0', to: 'v1.33.0' },
      policy: { workers: 'every-minor' },
      cp: ['v1.32.13', 'v1.33.0'],
      workers: ['1.31.0', 'v1.32.13', 'v1.33.0'],
    },
    {
      name: 'workers already past the first control plane step',
      request: { fromControlPlane: 'v1.29.0', fromWorkers: 'v1.30.0', to: 'v1.32.0' },
      policy: { workers: 'every-minor' },
      cp: ['v1.30.14', 'v1.31.14', 'v1.32.0'],
      workers: ['v1.31.14', 'v1.32.0'],
    },
    {
      name: 'forced workers steps already done or passed by the control plane are skipped',
      request: { fromControlPlane: 'v1.31.0', fromWorkers: 'v1.30.0', to: 'v1.32.3' },
      policy: { workers: ['v1.30.0', 'v1.32.3'] },
      cp: ['v1.32.3'],
      workers: ['v1.32.3'],
    },
    {
      name: 'forced workers step equal to the current control plane version is kept as spelled',
      request: { fromControlPlane: '1.31.0', fromWorkers: 'v1.30.0', to: 'v1.32.3' },
      policy: { workers: ['v1.31.0'] },
      cp: ['v1.32.3'],
      workers: ['1.31.0', 'v1.32.3'],
    },
    {
      name: 'forced workers steps without the target get the target appended',
      request: { fromControlPlane: 'v1.29.0', fromWorkers: 'v1.29.0', to: 'v1.31.2' },
      policy: { workers: ['v1.30.2'], controlPlane: 'every-patch', catalog: catalog('v1.30.0,v1.30.1,v1.31.0') },
      cp: ['v1.30.0', 'v1.30.1', 'v1.30.2', 'v1.31.0', 'v1.31.2'],
      workers: ['v1.30.2', 'v1.31.2'],
    },
    {
      name: 'forced workers step in the target minor is pinned before the target',
      request: { fromControlPlane: 'v1.31.0', fromWorkers: 'v1.31.0', to: 'v1.32.3' },
      policy: { workers: ['v1.32.0'] },
      cp: ['v1.32.0', 'v1.32.3'],
      workers: ['v1.32.0', 'v1.32.3'],
    },
    {
      name: 'workers four minors behind the target, minimal: Cluster API adds the +3 step',
      request: { fromControlPlane: 'v1.29.0', fromWorkers: 'v1.29.0', to: 'v1.34.0' },
      policy: {},
      cp: ['v1.30.14', 'v1.31.14', 'v1.32.13', 'v1.33.13', 'v1.34.0'],
      workers: [],
    },
    {
      name: 'workers four minors behind the target, forced step too far back: a +3 bridge is added',
      request: { fromControlPlane: 'v1.29.0', fromWorkers: 'v1.29.0', to: 'v1.34.0' },
      policy: { workers: ['v1.30.0'] },
      cp: ['v1.30.0', 'v1.31.14', 'v1.32.13', 'v1.33.13', 'v1.34.0'],
      workers: ['v1.30.0', 'v1.33.13', 'v1.34.0'],
    },
    {
      name: 'thirteen minors, every-minor',
      request: { fromControlPlane: 'v1.24.0', fromWorkers: 'v1.24.0', to: 'v1.37.2' },
      policy: { workers: 'every-minor' },
      cp: [25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36].map((m) => builtInPatches(m).at(-1) ?? '').concat('v1.37.2'),
      workers: [25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36]
        .map((m) => builtInPatches(m).at(-1) ?? '')
        .concat('v1.37.2'),
    },
    {
      name: 'target outside the catalog (newer than any release)',
      request: { fromControlPlane: 'v1.36.0', fromWorkers: 'v1.36.0', to: 'v1.38.0-alpha.2' },
      policy: { workers: 'every-minor' },
      cp: ['v1.37.2', 'v1.38.0-alpha.2'],
      workers: ['v1.37.2', 'v1.38.0-alpha.2'],
    },
    {
      name: 'target with a build tag',
      request: { fromControlPlane: 'v1.30.0', fromWorkers: 'v1.30.0', to: 'v1.31.2+vmware.1' },
      policy: { controlPlane: 'every-patch', catalog: catalog('v1.30.5,v1.31.2,v1.31.3') },
      cp: ['v1.30.5', 'v1.31.2', 'v1.31.2+vmware.1'],
      workers: [],
    },
    {
      name: 'same version, other build tag',
      request: { fromControlPlane: 'v1.31.2+abc', fromWorkers: 'v1.31.2+abc', to: 'v1.31.2+def' },
      policy: { workers: 'every-minor' },
      cp: ['v1.31.2+def'],
      workers: ['v1.31.2+def'],
    },
    {
      name: 'unorderable build tags in the catalog keep their listed order (every-patch)',
      request: {
        fromControlPlane: 'v1.30.0+foo.1-bar.1',
        fromWorkers: 'v1.30.0+foo.1-bar.1',
        to: 'v1.32.1+foo.1-bar.1',
      },
      policy: {
        controlPlane: 'every-patch',
        workers: 'every-minor',
        catalog: catalog('v1.31.1+foo.1-bar.1,v1.31.1+foo.2-bar.1,v1.32.1+foo.1-bar.1'),
      },
      cp: ['v1.31.1+foo.1-bar.1', 'v1.31.1+foo.2-bar.1', 'v1.32.1+foo.1-bar.1'],
      workers: ['v1.31.1+foo.2-bar.1', 'v1.32.1+foo.1-bar.1'],
    },
    {
      name: 'unorderable build tags: newest-patch takes the last listed one',
      request: {
        fromControlPlane: 'v1.30.0+foo.1-bar.1',
        fromWorkers: 'v1.30.0+foo.1-bar.1',
        to: 'v1.32.1+foo.1-bar.1',
      },
      policy: { catalog: catalog('v1.31.1+foo.1-bar.1,v1.31.1+foo.2-bar.1,v1.32.1+foo.1-bar.1') },
      cp: ['v1.31.1+foo.2-bar.1', 'v1.32.1+foo.1-bar.1'],
      workers: [],
    },
    {
      name: 'target spelled without v',
      request: { fromControlPlane: 'v1.30.0', fromWorkers: 'v1.30.0', to: '1.31.0' },
      policy: { workers: 'every-minor' },
      cp: ['v1.31.0'],
      workers: ['v1.31.0'],
    },
  ])('$name', (c) => {
    const plan = planOf(generateUpgradePlan(c.request, policy(c.policy)));
    expect(plan).toEqual({ controlPlaneUpgrades: c.cp, workersUpgrades: c.workers });
    expect(validateUpgradePlan({ ...c.request, controlPlaneUpgrades: c.cp, workersUpgrades: c.workers })).toEqual([]);
  });

  it('minimal workers plan for four minors is what Cluster API computes', () => {
    const request = { fromControlPlane: 'v1.29.0', fromWorkers: 'v1.29.0', to: 'v1.34.0' };
    const plan = planOf(generateUpgradePlan(request));
    expect(defaultAndValidateUpgradePlan({ ...request, ...plan })).toEqual({
      ok: true,
      controlPlaneUpgrades: plan.controlPlaneUpgrades,
      workersUpgrades: ['v1.32.13', 'v1.34.0'],
    });
  });
});

describe('generateUpgradePlan: requests that cannot be planned', () => {
  it.each<[string, PlanRequest, Partial<PlanPolicy>, string]>([
    [
      'downgrade',
      { fromControlPlane: 'v1.33.0', fromWorkers: 'v1.33.0', to: 'v1.32.0' },
      {},
      'cannot plan an upgrade from v1.33.0 (workers v1.33.0) to v1.32.0: downgrading the control plane is not supported',
    ],
    [
      'patch downgrade',
      { fromControlPlane: 'v1.33.2', to: 'v1.33.1' },
      {},
      'cannot plan an upgrade from v1.33.2 to v1.33.1: downgrading the control plane is not supported',
    ],
    [
      'build tag downgrade',
      { fromControlPlane: 'v1.33.2+build.2', to: 'v1.33.2+build.1' },
      {},
      'cannot plan an upgrade from v1.33.2+build.2 to v1.33.2+build.1: downgrading the control plane is not supported',
    ],
    [
      'major version change',
      { fromControlPlane: 'v1.33.0', to: 'v2.0.0' },
      {},
      'cannot plan an upgrade from v1.33.0 to v2.0.0: changing the major version is not supported',
    ],
    [
      'unparsable target',
      { fromControlPlane: 'v1.33.0', to: 'latest' },
      {},
      'cannot plan an upgrade from v1.33.0 to latest: target: invalid Kubernetes version "latest": invalid major number "latest"',
    ],
    [
      'unparsable control plane version',
      { fromControlPlane: 'v1.x.0', to: 'v1.33.0' },
      {},
      'cannot plan an upgrade from v1.x.0 to v1.33.0: control plane: invalid Kubernetes version "v1.x.0": invalid minor number "x"',
    ],
    [
      'unparsable workers version',
      { fromControlPlane: 'v1.32.0', fromWorkers: 'garbage', to: 'v1.33.0' },
      {},
      'cannot plan an upgrade from v1.32.0 (workers garbage) to v1.33.0: workers: invalid Kubernetes version "garbage": invalid major number "garbage"',
    ],
    [
      'target below the workers version',
      { fromControlPlane: 'v1.32.0', fromWorkers: 'v1.33.0', to: 'v1.32.5' },
      {},
      'cannot plan an upgrade from v1.32.0 (workers v1.33.0) to v1.32.5: the target is below the workers version v1.33.0',
    ],
    [
      'workers on another major',
      { fromControlPlane: 'v1.32.0', fromWorkers: 'v0.33.0', to: 'v1.32.5' },
      {},
      'cannot plan an upgrade from v1.32.0 (workers v0.33.0) to v1.32.5: changing the major version of the workers is not supported',
    ],
    [
      'catalog without a version for an intermediate minor',
      { fromControlPlane: 'v1.29.0', to: 'v1.33.0' },
      { catalog: catalog('v1.30.0,v1.32.0') },
      'cannot plan an upgrade from v1.29.0 to v1.33.0: no Kubernetes version known for minor v1.31 (kubernetesVersions catalog); every minor must be a step',
    ],
    [
      'forced workers step above the target',
      { fromControlPlane: 'v1.29.0', fromWorkers: 'v1.29.0', to: 'v1.31.0' },
      { workers: ['v1.30.0', 'v1.32.0', 'v1.31.1'] },
      'cannot plan an upgrade from v1.29.0 (workers v1.29.0) to v1.31.0: workers versions v1.31.1, v1.32.0 are not below the target',
    ],
    [
      'unparsable forced workers step',
      { fromControlPlane: 'v1.29.0', fromWorkers: 'v1.29.0', to: 'v1.31.0' },
      { workers: ['v1.30.0', 'soon'] },
      'cannot plan an upgrade from v1.29.0 (workers v1.29.0) to v1.31.0: invalid workers versions "soon"',
    ],
    [
      'workers four minors behind the control plane (minimal)',
      { fromControlPlane: 'v1.33.0', fromWorkers: 'v1.29.0', to: 'v1.34.0' },
      {},
      'cannot plan an upgrade from v1.33.0 (workers v1.29.0) to v1.34.0: invalid upgrade plan; unable to identify a version for minor 32: workers at v1.29.0 need an intermediate step there, and neither the control plane version nor its upgrade plan has one',
    ],
    [
      'workers four minors behind the control plane (every-minor)',
      { fromControlPlane: 'v1.33.0', fromWorkers: 'v1.29.0', to: 'v1.34.0' },
      { workers: 'every-minor' },
      'cannot plan an upgrade from v1.33.0 (workers v1.29.0) to v1.34.0: invalid workers upgrade plan, item 0; workers cannot go from minor 29 (v1.29.0) to minor 33 (v1.33.0), an intermediate step is required to comply with Kubernetes version skew rules',
    ],
  ])('%s', (_name, request, overrides, message) => {
    expect(generateUpgradePlan(request, policy(overrides))).toEqual({ ok: false, message });
  });
});

/** Plans and measures: the answer and how long it took in milliseconds. */
function timedPlan(request: PlanRequest, overrides: Partial<PlanPolicy> = {}): { result: PlanResult; ms: number } {
  const started = performance.now();
  const result = generateUpgradePlan(request, policy(overrides));
  return { result, ms: performance.now() - started };
}

/** A catalog with one version of every minor strictly between two minors (at most a few hundred). */
function everyMinorCatalog(fromMinor: bigint, toMinor: bigint): VersionCatalog {
  const versions: string[] = [];
  for (let m = fromMinor + 1n; m < toMinor; m++) versions.push(`v1.${m}.3`);
  return versions.length === 0 ? catalog('v1.0.0') : catalog(versions.join(','));
}

/**
 * Work is bounded by MAX_PLAN_MINORS, never by the numeric distance between versions. The time
 * bound is a correctness bound (nothing is enumerated before the cap is checked), not a benchmark:
 * on main `v1.30000000.0` took 15 s and `v1.9007199254740991.0` never returned.
 */
// Far above the few ms a plan takes, far below the 15 s the unbounded planner took: a loaded
// 2-CPU machine (the full suite beside it) measured 75 ms and 86 ms against the 50 ms this was.
const BOUND_MS = 1_000;

describe('generateUpgradePlan: bounded work for huge versions', () => {
  const DIGITS_400 = '9'.repeat(400);
  /** How messages show the 405-character target: its first 32 characters and its length. */
  const SHOWN_400 = `v1.${'9'.repeat(29)}…(405 characters)`;
  const strategies: [string, Partial<PlanPolicy>][] = [
    ['newest-patch, minimal workers', {}],
    ['every-patch, every-minor workers', { controlPlane: 'every-patch', workers: 'every-minor' }],
    ['explicit workers list', { workers: ['v1.31.0', 'v1.40.0', 'v1.9007199254740990.0'] }],
  ];

  it.each(
    strategies.flatMap(([name, overrides]) =>
      [
        [
          'v1.30000000.0',
          'the upgrade from v1.30.5 to v1.30000000.0 spans 29999970 minor versions; at most 64 are planned in one upgrade',
        ],
        [
          'v1.9007199254740991.0',
          'the upgrade from v1.30.5 to v1.9007199254740991.0 spans 9007199254740961 minor versions; at most 64 are planned in one upgrade',
        ],
        [
          'v1.18446744073709551615.0',
          'the upgrade from v1.30.5 to v1.18446744073709551615.0 spans 18446744073709551585 minor versions; at most 64 are planned in one upgrade',
        ],
        [
          `v1.${DIGITS_400}.0`,
          `cannot plan an upgrade from v1.30.5 (workers v1.30.5) to ${SHOWN_400}: target: invalid Kubernetes version "${SHOWN_400}": minor number ${'9'.repeat(20)}…(400 digits) is out of range (at most 18446744073709551615)`,
        ],
      ].map(([to, message]) => ({ name, overrides, to: to as string, message: message as string })),
    ),
  )('$name: to $to answers a stable failure in bounded time', ({ overrides, to, message }) => {
    const first = timedPlan({ fromControlPlane: 'v1.30.5', fromWorkers: 'v1.30.5', to }, overrides);
    const second = timedPlan({ fromControlPlane: 'v1.30.5', fromWorkers: 'v1.30.5', to }, overrides);
    expect(first.result).toEqual({ ok: false, message });
    expect(second.result).toEqual(first.result);
    expect(first.ms).toBeLessThan(BOUND_MS);
    expect(second.ms).toBeLessThan(BOUND_MS);
  });

  it(`plans exactly ${MAX_PLAN_MINORS} minors and refuses ${MAX_PLAN_MINORS + 1}`, () => {
    expect(MAX_PLAN_MINORS).toBe(64);
    const cat = everyMinorCatalog(30n, 200n);
    const request = { fromControlPlane: 'v1.30.0', fromWorkers: 'v1.30.0', to: 'v1.94.0' };
    const ok = timedPlan(request, { catalog: cat, workers: 'every-minor' });
    const plan = planOf(ok.result);
    expect(plan.controlPlaneUpgrades).toHaveLength(64);
    expect(plan.controlPlaneUpgrades[0]).toBe('v1.31.3');
    expect(plan.controlPlaneUpgrades.at(-1)).toBe('v1.94.0');
    expect(plan.workersUpgrades).toEqual(plan.controlPlaneUpgrades);
    expect(validateUpgradePlan({ ...request, ...plan })).toEqual([]);
    expect(ok.ms).toBeLessThan(BOUND_MS);

    expect(timedPlan({ ...request, to: 'v1.95.0' }, { catalog: cat }).result).toEqual({
      ok: false,
      message: 'the upgrade from v1.30.0 to v1.95.0 spans 65 minor versions; at most 64 are planned in one upgrade',
    });
  });

  it('refuses by the control plane distance, whatever the catalog or a patch-only target', () => {
    // A catalog that lists every minor does not lift the cap.
    expect(
      timedPlan({ fromControlPlane: 'v1.0.0', to: 'v1.100.0' }, { catalog: everyMinorCatalog(0n, 100n) }).result,
    ).toEqual({
      ok: false,
      message: 'the upgrade from v1.0.0 to v1.100.0 spans 100 minor versions; at most 64 are planned in one upgrade',
    });
    // Huge but equal minors are not a long upgrade.
    expect(
      planOf(timedPlan({ fromControlPlane: 'v1.9007199254740993.1', to: 'v1.9007199254740993.7' }).result),
    ).toEqual({
      controlPlaneUpgrades: ['v1.9007199254740993.7'],
      workersUpgrades: [],
    });
  });

  it('workers far behind a huge control plane stay bounded (steps are walked, not minors)', () => {
    for (const workers of ['every-minor', 'minimal', ['v1.9007199254740992.0']] as WorkersStrategy[]) {
      const { result, ms } = timedPlan(
        { fromControlPlane: 'v1.9007199254740992.0', fromWorkers: 'v1.0.0', to: 'v1.9007199254740993.0' },
        { workers },
      );
      expect(result.ok).toBe(false);
      expect(ms).toBeLessThan(BOUND_MS);
    }
  });
});

describe('generateUpgradePlan: exact version numbers beyond 2^53', () => {
  it.each<PlanCase>([
    {
      name: 'one minor above 2^53 (a Number would see the same minor twice)',
      request: {
        fromControlPlane: 'v1.9007199254740992.0',
        fromWorkers: 'v1.9007199254740992.0',
        to: 'v1.9007199254740993.0',
      },
      policy: { workers: 'every-minor' },
      cp: ['v1.9007199254740993.0'],
      workers: ['v1.9007199254740993.0'],
    },
    {
      name: 'patch above 2^53',
      request: { fromControlPlane: 'v1.30.9007199254740992', to: 'v1.30.9007199254740993' },
      policy: {},
      cp: ['v1.30.9007199254740993'],
      workers: [],
    },
    {
      name: 'the last uint64 minor',
      request: { fromControlPlane: 'v1.18446744073709551613.0', to: 'v1.18446744073709551615.0' },
      policy: { catalog: catalog('v1.18446744073709551614.2,v1.18446744073709551614.9') },
      cp: ['v1.18446744073709551614.9', 'v1.18446744073709551615.0'],
      workers: [],
    },
    {
      name: 'numeric pre-release above 2^53',
      request: { fromControlPlane: 'v1.31.0-rc.9007199254740992', to: 'v1.31.0-rc.9007199254740993' },
      policy: {},
      cp: ['v1.31.0-rc.9007199254740993'],
      workers: [],
    },
  ])('$name', (c) => {
    const plan = planOf(generateUpgradePlan(c.request, policy(c.policy)));
    expect(plan).toEqual({ controlPlaneUpgrades: c.cp, workersUpgrades: c.workers });
    expect(validateUpgradePlan({ ...c.request, controlPlaneUpgrades: c.cp, workersUpgrades: c.workers })).toEqual([]);
  });

  it.each([
    ['v1.9007199254740993.0', 'v1.9007199254740992.0'],
    ['v1.30.9007199254740993', 'v1.30.9007199254740992'],
    ['v1.30.0+9007199254740993', 'v1.30.0+9007199254740992'],
    ['v1.30.0-rc.9007199254740993', 'v1.30.0-rc.9007199254740992'],
  ])('%s → %s is a downgrade', (from, to) => {
    expect(generateUpgradePlan({ fromControlPlane: from, to })).toEqual({
      ok: false,
      message: `cannot plan an upgrade from ${from} to ${to}: downgrading the control plane is not supported`,
    });
  });

  it('a property: any uint64 start and any distance either plans one step per minor or is refused by the cap', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.bigInt({ min: 0n, max: UINT64_MAX - 200n }),
          fc.bigInt({ min: 2n ** 53n - 100n, max: 2n ** 53n + 100n }),
        ),
        fc.bigInt({ min: 0n, max: 200n }),
        (fromMinor, distance) => {
          const toMinor = fromMinor + distance;
          const request = {
            fromControlPlane: `v1.${fromMinor}.1`,
            fromWorkers: `v1.${fromMinor}.1`,
            to: `v1.${toMinor}.2`,
          };
          const { result, ms } = timedPlan(request, { catalog: everyMinorCatalog(fromMinor, toMinor) });
          expect(ms).toBeLessThan(BOUND_MS);
          if (distance > BigInt(MAX_PLAN_MINORS)) {
            expect(result).toEqual({
              ok: false,
              message: `the upgrade from ${request.fromControlPlane} to ${request.to} spans ${distance} minor versions; at most 64 are planned in one upgrade`,
            });
            return;
          }
          const plan = planOf(result);
          expect(plan.controlPlaneUpgrades).toHaveLength(distance === 0n ? 1 : Number(distance));
          expect(plan.controlPlaneUpgrades.map((v) => parseVersion(v).minor)).toEqual(
            distance === 0n
              ? [toMinor]
              : Array.from({ length: Number(distance) }, (_, i) => fromMinor + 1n + BigInt(i)),
          );
          expect(validateUpgradePlan({ ...request, ...plan })).toEqual([]);
        },
      ),
      { numRuns: 200 },
    );
  });
});

describe('generateUpgradePlan: robustness', () => {
  it('answers a failure for a hand-built catalog with an invalid entry', () => {
    const broken: VersionCatalog = { versions: ['v1.30.0', 'oops'], source: 'hand-built' };
    expect(generateUpgradePlan({ fromControlPlane: 'v1.29.0', to: 'v1.31.0' }, policy({ catalog: broken }))).toEqual({
      ok: false,
      message:
        'cannot plan an upgrade from v1.29.0 to v1.31.0: invalid Kubernetes version "oops": invalid major number "oops"',
    });
  });
});

describe('strategy parsing', () => {
  it.each([
    [undefined, { ok: true, strategy: 'newest-patch' }],
    ['', { ok: true, strategy: 'newest-patch' }],
    [' every-patch ', { ok: true, strategy: 'every-patch' }],
    [
      'all',
      { ok: false, message: 'invalid control plane upgrade strategy "all": expected one of newest-patch, every-patch' },
    ],
  ])('control plane %j', (value, want) => {
    expect(parseControlPlaneStrategy(value)).toEqual(want);
  });

  it.each([
    [undefined, { ok: true, strategy: 'minimal' }],
    ['minimal', { ok: true, strategy: 'minimal' }],
    ['every-minor', { ok: true, strategy: 'every-minor' }],
    ['v1.30.0, v1.32.3', { ok: true, strategy: ['v1.30.0', 'v1.32.3'] }],
    [
      'v1.30.0, fast',
      {
        ok: false,
        message: 'invalid workers upgrade strategy: "fast" is neither minimal, every-minor nor a Kubernetes version',
      },
    ],
  ])('workers %j', (value, want) => {
    expect(parseWorkersStrategy(value)).toEqual(want);
  });
});

// --- property tests -------------------------------------------------------------------------

const NEWEST_MINOR = Number(parseVersion(KUBERNETES_RELEASES_NEWEST).minor);

/** A random catalog with at least one release of every minor from v1.24 to the newest. */
const catalogArb: fc.Arbitrary<VersionCatalog> = fc
  .array(fc.boolean(), { minLength: KUBERNETES_RELEASES.length, maxLength: KUBERNETES_RELEASES.length })
  .map((keep) => {
    const chosen = KUBERNETES_RELEASES.filter((_, i) => keep[i] === true);
    for (let minor = 24; minor <= NEWEST_MINOR; minor++) {
      if (!chosen.some((v) => parseVersion(v).minor === BigInt(minor))) {
        chosen.push(`v1.${minor}.0`);
      }
    }
    const result = createCatalog(chosen, 'random');
    if (!result.ok) {
      throw new Error(result.message);
    }
    return result.catalog;
  });

interface Scenario {
  request: PlanRequest;
  policy: PlanPolicy;
}

/** Valid requests: target above the control plane, workers at most 3 minors behind it and not above it. */
const scenarioArb: fc.Arbitrary<Scenario> = fc
  .record({
    catalog: catalogArb,
    cpMinor: fc.integer({ min: 24, max: NEWEST_MINOR }),
    cpPatch: fc.integer({ min: 0, max: 16 }),
    toMinorDelta: fc.integer({ min: 0, max: 13 }),
    toPatch: fc.integer({ min: 0, max: 16 }),
    toBuild: fc.option(fc.constantFrom('+vmware.1', '+build.2', '+abc123'), { nil: undefined }),
    workers: fc.option(fc.record({ lag: fc.integer({ min: 0, max: 3 }), patch: fc.integer({ min: 0, max: 16 }) }), {
      nil: undefined,
    }),
    controlPlane: fc.constantFrom('newest-patch' as const, 'every-patch' as const),
    workersStrategy: fc.oneof(
      fc.constant<WorkersStrategy>('minimal'),
      fc.constant<WorkersStrategy>('every-minor'),
      fc.array(fc.constantFrom(...KUBERNETES_RELEASES), { maxLength: 6 }),
    ),
    spelling: fc.constantFrom('v', ''),
  })
  .filter(({ cpPatch, toMinorDelta, toPatch }) => toMinorDelta > 0 || toPatch >= cpPatch)
  .map(
    ({
      catalog: cat,
      cpMinor,
      cpPatch,
      toMinorDelta,
      toPatch,
      toBuild,
      workers,
      controlPlane,
      workersStrategy,
      spelling,
    }) => {
      // The target may be one minor past the catalog (it is always the last step), not further.
      const toMinor = Math.min(cpMinor + toMinorDelta, Math.max(cpMinor, NEWEST_MINOR + 1));
      const to = `v1.${toMinor}.${toPatch}${toBuild ?? ''}`;
      const fromControlPlane = `${spelling}1.${cpMinor}.${cpPatch}`;
      let fromWorkers: string | undefined;
      if (workers !== undefined) {
        const minor = Math.max(cpMinor - workers.lag, 0);
        const patch = minor === cpMinor ? Math.min(workers.patch, cpPatch) : workers.patch;
        fromWorkers = `v1.${minor}.${patch}`;
      }
      // Forced workers versions are only meaningful up to the target.
      const strategy =
        typeof workersStrategy === 'string'
          ? workersStrategy
          : workersStrategy.filter((v) => compareVersions(v, to) !== 1 && compareVersions(v, to) !== 2);
      return {
        request: { fromControlPlane, fromWorkers, to },
        policy: { controlPlane, workers: strategy, catalog: cat },
      };
    },
  )
  .filter(({ request }) => compareVersions(request.to, request.fromControlPlane) !== -1);

describe('plan properties', () => {
  it('every valid request gets a plan that passes the validator', () => {
    fc.assert(
      fc.property(scenarioArb, ({ request, policy: p }) => {
        const result = generateUpgradePlan(request, p);
        if (!result.ok) {
          throw new Error(result.message);
        }
        const { controlPlaneUpgrades, workersUpgrades } = result.plan;
        expect(validateUpgradePlan({ ...request, controlPlaneUpgrades, workersUpgrades })).toEqual([]);

        // The control plane plan ends at the target, or is empty when already there.
        if (compareVersions(request.fromControlPlane, request.to) === 0) {
          expect(controlPlaneUpgrades).toEqual([]);
        } else {
          expect(compareVersions(controlPlaneUpgrades.at(-1) ?? '', request.to)).toBe(0);
        }
        // newest-patch without forced versions: exactly one step per minor crossed.
        if (p.controlPlane === 'newest-patch' && typeof p.workers === 'string' && controlPlaneUpgrades.length > 0) {
          const minors = controlPlaneUpgrades.map((v) => parseVersion(v).minor);
          expect(new Set(minors).size).toBe(minors.length);
        }
        // Forced workers versions the control plane has not passed are honoured.
        if (typeof p.workers !== 'string' && request.fromWorkers !== undefined) {
          const workersFrom = request.fromWorkers;
          for (const v of p.workers) {
            if (compareVersions(v, workersFrom) === 1 && compareVersions(v, request.fromControlPlane) !== -1) {
              expect(workersUpgrades.some((w) => compareVersions(w, v) === 0)).toBe(true);
            }
          }
        }
      }),
      { numRuns: 300 },
    );
  });

  it('never throws, and answers a failure naming the versions for downgrades and major changes', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 3 }),
        fc.integer({ min: 0, max: 40 }),
        fc.integer({ min: 0, max: 20 }),
        fc.integer({ min: 0, max: 3 }),
        fc.integer({ min: 0, max: 40 }),
        fc.integer({ min: 0, max: 20 }),
        (m1, n1, p1, m2, n2, p2) => {
          const from = `v${m1}.${n1}.${p1}`;
          const to = `v${m2}.${n2}.${p2}`;
          const result = generateUpgradePlan({ fromControlPlane: from, fromWorkers: from, to });
          if (m1 !== m2 || compareVersions(to, from) === -1) {
            expect(result.ok).toBe(false);
            if (!result.ok) {
              expect(result.message).toContain(from);
              expect(result.message).toContain(to);
            }
          }
        },
      ),
    );
  });

  it('never throws on arbitrary strings', () => {
    fc.assert(
      fc.property(fc.string(), fc.string(), fc.option(fc.string(), { nil: undefined }), (from, to, workers) => {
        const result = generateUpgradePlan({ fromControlPlane: from, fromWorkers: workers, to });
        expect(typeof result.ok).toBe('boolean');
      }),
    );
  });
});
