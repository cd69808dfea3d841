import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import {
  MAX_WORKER_MINOR_SKEW,
  computeMinimalWorkersPlan,
  defaultAndValidateUpgradePlan,
  validateUpgradePlan,
} from '../../src/domain/upgrade-plan-validator.ts';
import type { UpgradePlanToValidate } from '../../src/domain/upgrade-plan-validator.ts';

interface Case {
  name: string;
  fromControlPlane: string;
  fromWorkers?: string;
  to: string;
  cp: string[];
  workers: string[];
}

const plan = (c: Case): UpgradePlanToValidate => ({
  fromControlPlane: c.fromControlPlane,
  fromWorkers: c.fromWorkers,
  to: c.to,
  controlPlaneUpgrades: c.cp,
  workersUpgrades: c.workers,
});

// Scenarios and expectations follow Cluster API's own tests of DefaultAndValidateUpgradePlans
// (exp/topology/desiredstate/upgrade_plan_test.go).
describe('validateUpgradePlan: rejected plans', () => {
  it.each<Case & { error: string }>([
    {
      name: 'unparsable control plane step',
      fromControlPlane: 'v1.30.0',
      to: 'v1.33.1',
      cp: ['foo'],
      workers: [],
      error: 'invalid ControlPlane upgrade plan: item 0; failed to parse version foo: invalid major number "foo"',
    },
    {
      name: 'first step not above the control plane (same version)',
      fromControlPlane: 'v1.30.0',
      to: 'v1.33.1',
      cp: ['v1.30.0'],
      workers: [],
      error: 'invalid ControlPlane upgrade plan: item 0; version v1.30.0 must be greater than v1.30.0',
    },
    {
      name: 'skipped minor at the start',
      fromControlPlane: 'v1.30.0',
      to: 'v1.33.1',
      cp: ['v1.32.1'],
      workers: [],
      error:
        'invalid ControlPlane upgrade plan: item 0; expecting a version with minor 30 or 31, found version v1.32.1',
    },
    {
      name: 'skipped minor in the middle',
      fromControlPlane: 'v1.30.0',
      to: 'v1.33.1',
      cp: ['v1.31.1', 'v1.33.1'],
      workers: [],
      error:
        'invalid ControlPlane upgrade plan: item 1; expecting a version with minor 31 or 32, found version v1.33.1',
    },
    {
      name: 'downgrade inside the plan',
      fromControlPlane: 'v1.30.0',
      to: 'v1.33.1',
      cp: ['v1.31.1', 'v1.30.0'],
      workers: [],
      error: 'invalid ControlPlane upgrade plan: item 1; version v1.30.0 must be greater than v1.31.1',
    },
    {
      name: 'plan stops before the target',
      fromControlPlane: 'v1.30.0',
      to: 'v1.33.1',
      cp: ['v1.31.1', 'v1.32.0'],
      workers: [],
      error:
        'invalid ControlPlane upgrade plan: control plane upgrade plan must end with version v1.33.1, ends with v1.32.0 instead',
    },
    {
      name: 'plan goes past the target',
      fromControlPlane: 'v1.30.0',
      to: 'v1.33.1',
      cp: ['v1.31.1', 'v1.32.0', 'v1.33.1', 'v1.34.1'],
      workers: [],
      error:
        'invalid ControlPlane upgrade plan: control plane upgrade plan must end with version v1.33.1, ends with v1.34.1 instead',
    },
    {
      name: 'empty plan while the control plane is behind',
      fromControlPlane: 'v1.30.0',
      to: 'v1.31.0',
      cp: [],
      workers: [],
      error:
        'invalid ControlPlane upgrade plan: control plane upgrade plan must end with version v1.31.0, ends with v1.30.0 instead',
    },
    {
      name: 'plan ends at the target core version but another build tag',
      fromControlPlane: 'v1.30.0',
      to: 'v1.31.0+abc',
      cp: ['v1.31.0+def'],
      workers: [],
      error:
        'invalid ControlPlane upgrade plan: control plane upgrade plan must end with version v1.31.0+abc, ends with v1.31.0+def instead',
    },
    {
      name: 'plan while the control plane is already at the target',
      fromControlPlane: 'v1.33.1',
      fromWorkers: 'v1.30.0',
      to: 'v1.33.1',
      cp: ['v1.33.1'],
      workers: [],
      error: 'invalid ControlPlane upgrade plan: control plane is already at the desired version',
    },
    {
      name: 'numeric build tags going down (ordered by Cluster API, not by the list)',
      fromControlPlane: 'v1.29.0',
      to: 'v1.30.0+build.1',
      cp: ['v1.30.0+build.2', 'v1.30.0+build.1'],
      workers: [],
      error: 'invalid ControlPlane upgrade plan: item 1; version v1.30.0+build.1 must be greater than v1.30.0+build.2',
    },
    {
      name: 'workers version not in the control plane plan',
      fromControlPlane: 'v1.30.0',
      fromWorkers: 'v1.30.0',
      to: 'v1.33.1',
      cp: ['v1.31.1', 'v1.32.0', 'v1.33.1'],
      workers: ['v1.32.2'],
      error:
        "invalid workers upgrade plan: versions v1.32.2 doesn't match any versions in the control plane upgrade plan nor the control plane version",
    },
    {
      name: 'workers versions are matched as strings (1.31.1 is not v1.31.1)',
      fromControlPlane: 'v1.30.0',
      fromWorkers: 'v1.30.0',
      to: 'v1.33.1',
      cp: ['v1.31.1', 'v1.32.0', 'v1.33.1'],
      workers: ['1.31.1', 'v1.33.1', 'v9.9.9', '1.31.1'],
      error:
        "invalid workers upgrade plan: versions 1.31.1,v9.9.9 doesn't match any versions in the control plane upgrade plan nor the control plane version",
    },
    {
      name: 'workers out of order',
      fromControlPlane: 'v1.30.0',
      fromWorkers: 'v1.30.0',
      to: 'v1.33.1',
      cp: ['v1.31.1', 'v1.32.0', 'v1.33.1'],
      workers: ['v1.33.1', 'v1.32.0'],
      error: 'invalid workers upgrade plan, item 1; version v1.32.0 must be greater than v1.33.1',
    },
    {
      name: 'unparsable workers step',
      fromControlPlane: 'v1.33.1',
      fromWorkers: 'v1.30.0',
      to: 'v1.33.1',
      cp: [],
      workers: ['foo'],
      error: 'invalid workers upgrade plan, item 0; failed to parse version foo: invalid major number "foo"',
    },
    {
      name: 'workers first step is the workers version',
      fromControlPlane: 'v1.33.1',
      fromWorkers: 'v1.30.0',
      to: 'v1.33.1',
      cp: [],
      workers: ['v1.30.0'],
      error: 'invalid workers upgrade plan, item 0; version v1.30.0 must be greater than v1.30.0',
    },
    {
      name: 'workers plan stops before the target',
      fromControlPlane: 'v1.33.1',
      fromWorkers: 'v1.30.0',
      to: 'v1.33.1',
      cp: [],
      workers: ['v1.32.1'],
      error:
        'invalid workers upgrade plan; workers upgrade plan must end with version v1.33.1, ends with v1.32.1 instead',
    },
    {
      name: 'workers plan goes past the target',
      fromControlPlane: 'v1.33.1',
      fromWorkers: 'v1.31.0',
      to: 'v1.33.1',
      cp: [],
      workers: ['v1.34.1'],
      error:
        'invalid workers upgrade plan; workers upgrade plan must end with version v1.33.1, ends with v1.34.1 instead',
    },
    {
      name: 'workers skip four minors',
      fromControlPlane: 'v1.34.1',
      fromWorkers: 'v1.30.0',
      to: 'v1.34.1',
      cp: [],
      workers: ['v1.34.1'],
      error:
        'invalid workers upgrade plan, item 0; workers cannot go from minor 30 (v1.30.0) to minor 34 (v1.34.1), an intermediate step is required to comply with Kubernetes version skew rules',
    },
    {
      name: 'workers plan without workers',
      fromControlPlane: 'v1.30.0',
      to: 'v1.33.1',
      cp: ['v1.31.1', 'v1.32.0', 'v1.33.1'],
      workers: ['v1.35.1'],
      error: 'invalid worker upgrade plan; there are no workers or workers already at the desired version',
    },
    {
      name: 'workers plan while workers are at the target',
      fromControlPlane: 'v1.32.0',
      fromWorkers: 'v1.33.1',
      to: 'v1.33.1',
      cp: ['v1.33.1'],
      workers: ['v1.33.1'],
      error: 'invalid worker upgrade plan; there are no workers or workers already at the desired version',
    },
    {
      name: 'workers build tags in another order than the control plane plan',
      fromControlPlane: 'v1.30.0+foo.1-bar.1',
      fromWorkers: 'v1.30.0+foo.1-bar.1',
      to: 'v1.32.1+foo.1-bar.1',
      cp: ['v1.31.1+foo.1-bar.1', 'v1.31.1+foo.2-bar.1', 'v1.32.1+foo.1-bar.1'],
      workers: ['v1.31.1+foo.2-bar.1', 'v1.31.1+foo.1-bar.1', 'v1.32.1+foo.1-bar.1'],
      error:
        'invalid workers upgrade plan, item 1; version v1.31.1+foo.1-bar.1 comes before v1.31.1+foo.2-bar.1 in the control plane upgrade plan',
    },
    {
      name: 'defaulted workers plan needs a minor the control plane never has',
      fromControlPlane: 'v1.35.0',
      fromWorkers: 'v1.31.0',
      to: 'v1.36.0',
      cp: ['v1.36.0'],
      workers: [],
      error:
        'invalid upgrade plan; unable to identify a version for minor 34: workers at v1.31.0 need an intermediate step there, and neither the control plane version nor its upgrade plan has one',
    },
  ])('$name', (c) => {
    const errors = validateUpgradePlan(plan(c));
    expect(errors).toEqual([c.error]);
    // Deterministic: same input, same messages.
    expect(validateUpgradePlan(plan(c))).toEqual(errors);
  });

  it('reports the first broken rule of the control plane and of the workers plan', () => {
    expect(
      validateUpgradePlan({
        fromControlPlane: 'v1.30.0',
        fromWorkers: 'v1.30.0',
        to: 'v1.33.1',
        controlPlaneUpgrades: ['v1.31.1', 'v1.33.1'],
        workersUpgrades: ['v1.32.0'],
      }),
    ).toEqual([
      'invalid ControlPlane upgrade plan: item 1; expecting a version with minor 31 or 32, found version v1.33.1',
      "invalid workers upgrade plan: versions v1.32.0 doesn't match any versions in the control plane upgrade plan nor the control plane version",
    ]);
  });

  it.each([
    [
      { fromControlPlane: 'nope', to: 'v1.31.0' },
      ['failed to parse control plane version: invalid Kubernetes version "nope": invalid major number "nope"'],
    ],
    [
      { fromControlPlane: 'v1.30.0', to: 'v1.x' },
      ['failed to parse target version: invalid Kubernetes version "v1.x": invalid minor number "x"'],
    ],
    [
      { fromControlPlane: 'v1.30.0', fromWorkers: 'bad', to: 'v1.31.0' },
      ['failed to parse workers version: invalid Kubernetes version "bad": invalid major number "bad"'],
    ],
  ])('rejects unparsable inputs %j', (inputs, errors) => {
    expect(validateUpgradePlan({ ...inputs, controlPlaneUpgrades: ['v1.31.0'], workersUpgrades: [] })).toEqual(errors);
  });
});

describe('validateUpgradePlan / defaultAndValidateUpgradePlan: accepted plans', () => {
  it.each<Case & { effectiveWorkers: string[] }>([
    {
      name: 'control plane only, no workers',
      fromControlPlane: 'v1.30.0',
      to: 'v1.33.1',
      cp: ['v1.31.1', 'v1.32.0', 'v1.33.1'],
      workers: [],
      effectiveWorkers: [],
    },
    {
      name: 'everything at the target',
      fromControlPlane: 'v1.33.1',
      fromWorkers: 'v1.33.1',
      to: 'v1.33.1',
      cp: [],
      workers: [],
      effectiveWorkers: [],
    },
    {
      name: 'workers two minors behind: only the target',
      fromControlPlane: 'v1.30.0',
      fromWorkers: 'v1.30.0',
      to: 'v1.32.0',
      cp: ['v1.31.1', 'v1.32.0'],
      workers: [],
      effectiveWorkers: ['v1.32.0'],
    },
    {
      name: 'control plane done, workers still behind',
      fromControlPlane: 'v1.32.0',
      fromWorkers: 'v1.30.0',
      to: 'v1.32.0',
      cp: [],
      workers: [],
      effectiveWorkers: ['v1.32.0'],
    },
    {
      name: 'workers four minors behind the target: a step at +3',
      fromControlPlane: 'v1.30.0',
      fromWorkers: 'v1.30.0',
      to: 'v1.34.1',
      cp: ['v1.31.1', 'v1.32.0', 'v1.33.1', 'v1.34.1'],
      workers: [],
      effectiveWorkers: ['v1.33.1', 'v1.34.1'],
    },
    {
      name: 'the +3 step is the current control plane version',
      fromControlPlane: 'v1.33.1',
      fromWorkers: 'v1.30.0',
      to: 'v1.34.1',
      cp: ['v1.34.1'],
      workers: [],
      effectiveWorkers: ['v1.33.1', 'v1.34.1'],
    },
    {
      name: 'the +3 step is the newest control plane step of that minor',
      fromControlPlane: 'v1.30.0',
      fromWorkers: 'v1.30.0',
      to: 'v1.34.1',
      cp: ['v1.31.1', 'v1.32.0', 'v1.33.0', 'v1.33.1', 'v1.33.2', 'v1.34.1'],
      workers: [],
      effectiveWorkers: ['v1.33.2', 'v1.34.1'],
    },
    {
      name: 'custom workers plan (forced step that skew rules do not need)',
      fromControlPlane: 'v1.30.0',
      fromWorkers: 'v1.30.0',
      to: 'v1.33.1',
      cp: ['v1.31.1', 'v1.32.0', 'v1.33.1'],
      workers: ['v1.31.1', 'v1.33.1'],
      effectiveWorkers: ['v1.31.1', 'v1.33.1'],
    },
    {
      name: 'custom workers plan using the current control plane version',
      fromControlPlane: 'v1.31.1',
      fromWorkers: 'v1.30.0',
      to: 'v1.35.2',
      cp: ['v1.32.0', 'v1.33.1', 'v1.34.2', 'v1.35.2'],
      workers: ['v1.31.1', 'v1.34.2', 'v1.35.2'],
      effectiveWorkers: ['v1.31.1', 'v1.34.2', 'v1.35.2'],
    },
    {
      name: 'control plane at the target: workers versions are not matched against any plan',
      fromControlPlane: 'v1.33.1',
      fromWorkers: 'v1.30.0',
      to: 'v1.33.1',
      cp: [],
      workers: ['v1.31.5', 'v1.33.1'],
      effectiveWorkers: ['v1.31.5', 'v1.33.1'],
    },
    {
      name: 'unorderable build tags take their order from the plan',
      fromControlPlane: 'v1.30.0+foo.1-bar.1',
      fromWorkers: 'v1.30.0+foo.1-bar.1',
      to: 'v1.32.1+foo.1-bar.1',
      cp: ['v1.31.1+foo.1-bar.1', 'v1.31.1+foo.2-bar.1', 'v1.32.1+foo.1-bar.1'],
      workers: [],
      effectiveWorkers: ['v1.32.1+foo.1-bar.1'],
    },
    {
      name: 'workers through both unorderable build tags in plan order',
      fromControlPlane: 'v1.30.0+foo.1-bar.1',
      fromWorkers: 'v1.30.0+foo.1-bar.1',
      to: 'v1.32.1+foo.1-bar.1',
      cp: ['v1.31.1+foo.1-bar.1', 'v1.31.1+foo.2-bar.1', 'v1.32.1+foo.1-bar.1'],
      workers: ['v1.31.1+foo.1-bar.1', 'v1.31.1+foo.2-bar.1', 'v1.32.1+foo.1-bar.1'],
      effectiveWorkers: ['v1.31.1+foo.1-bar.1', 'v1.31.1+foo.2-bar.1', 'v1.32.1+foo.1-bar.1'],
    },
    {
      name: 'patch-only upgrade',
      fromControlPlane: 'v1.32.1',
      fromWorkers: 'v1.32.1',
      to: 'v1.32.4',
      cp: ['v1.32.2', 'v1.32.3', 'v1.32.4'],
      workers: [],
      effectiveWorkers: ['v1.32.4'],
    },
    {
      name: 'same version with a different (unorderable) build tag is an upgrade',
      fromControlPlane: 'v1.32.1+abc',
      fromWorkers: 'v1.32.1+abc',
      to: 'v1.32.1+def',
      cp: ['v1.32.1+def'],
      workers: [],
      effectiveWorkers: ['v1.32.1+def'],
    },
  ])('$name', (c) => {
    expect(validateUpgradePlan(plan(c))).toEqual([]);
    expect(defaultAndValidateUpgradePlan(plan(c))).toEqual({
      ok: true,
      controlPlaneUpgrades: c.cp,
      workersUpgrades: c.effectiveWorkers,
    });
  });
});

describe('computeMinimalWorkersPlan', () => {
  const fullPlan = (fromMinor: number, toMinor: number): string[] =>
    Array.from({ length: toMinor - fromMinor }, (_, i) => `v1.${fromMinor + i + 1}.2`);

  it.each<[string, string, string | undefined, string, string[], string[]]>([
    ['no workers', 'v1.30.0', undefined, 'v1.33.2', fullPlan(30, 33), []],
    ['no workers (empty string)', 'v1.30.0', '', 'v1.33.2', fullPlan(30, 33), []],
    ['workers at the target', 'v1.33.2', 'v1.33.2', 'v1.33.2', [], []],
    ['patch-only', 'v1.33.0', 'v1.33.0', 'v1.33.2', ['v1.33.2'], ['v1.33.2']],
    ['one minor', 'v1.32.0', 'v1.32.0', 'v1.33.2', ['v1.33.2'], ['v1.33.2']],
    ['three minors: only the target', 'v1.30.0', 'v1.30.0', 'v1.33.2', fullPlan(30, 33), ['v1.33.2']],
    ['four minors', 'v1.30.0', 'v1.30.0', 'v1.34.2', fullPlan(30, 34), ['v1.33.2', 'v1.34.2']],
    ['six minors', 'v1.30.0', 'v1.30.0', 'v1.36.2', fullPlan(30, 36), ['v1.33.2', 'v1.36.2']],
    ['seven minors', 'v1.30.0', 'v1.30.0', 'v1.37.2', fullPlan(30, 37), ['v1.33.2', 'v1.36.2', 'v1.37.2']],
    [
      'thirteen minors',
      'v1.24.0',
      'v1.24.0',
      'v1.37.2',
      fullPlan(24, 37),
      ['v1.27.2', 'v1.30.2', 'v1.33.2', 'v1.36.2', 'v1.37.2'],
    ],
    ['control plane ahead of workers', 'v1.32.0', 'v1.29.0', 'v1.34.2', fullPlan(32, 34), ['v1.32.0', 'v1.34.2']],
    ['target spelled without v is appended as given', 'v1.30.0', 'v1.30.0', '1.31.0', ['v1.31.0'], ['1.31.0']],
  ])('%s', (_name, fromControlPlane, fromWorkers, to, cp, want) => {
    expect(computeMinimalWorkersPlan(fromControlPlane, fromWorkers, to, cp)).toEqual({
      ok: true,
      workersUpgrades: want,
    });
  });

  it('fails when a needed minor has no version', () => {
    const result = computeMinimalWorkersPlan('v1.33.0', 'v1.29.0', 'v1.33.0', []);
    expect(result).toEqual({
      ok: false,
      message:
        'invalid upgrade plan; unable to identify a version for minor 32: workers at v1.29.0 need an intermediate step there, and neither the control plane version nor its upgrade plan has one',
    });
  });

  it('fails on unparsable versions', () => {
    expect(computeMinimalWorkersPlan('v1.33.0', 'x', 'v1.33.0', [])).toEqual({
      ok: false,
      message: 'failed to parse workers version: invalid Kubernetes version "x": invalid major number "x"',
    });
  });
});

// --- property tests -------------------------------------------------------------------------

interface ValidPlan {
  fromControlPlane: string;
  fromWorkers: string;
  to: string;
  cp: string[];
  workers: string[];
}

/** A valid plan: one CP step per minor (optionally several patches), workers minimal or every CP step. */
const validPlanArb: fc.Arbitrary<ValidPlan> = fc
  .record({
    cpMinor: fc.integer({ min: 24, max: 40 }),
    span: fc.integer({ min: 2, max: 10 }),
    cpPatch: fc.integer({ min: 0, max: 5 }),
    workersLag: fc.integer({ min: 0, max: MAX_WORKER_MINOR_SKEW }),
    patches: fc.array(fc.integer({ min: 0, max: 9 }), { minLength: 12, maxLength: 12 }),
    everyStep: fc.boolean(),
  })
  .map(({ cpMinor, span, cpPatch, workersLag, patches, everyStep }) => {
    const fromControlPlane = `v1.${cpMinor}.${cpPatch}`;
    const cp = Array.from({ length: span }, (_, i) => `v1.${cpMinor + i + 1}.${patches[i] ?? 0}`);
    const to = cp[cp.length - 1] ?? fromControlPlane;
    const fromWorkers = `v1.${cpMinor - workersLag}.0`;
    // Workers lagging behind the control plane first catch up with its current version.
    const workers = everyStep ? (workersLag > 0 ? [fromControlPlane, ...cp] : [...cp]) : [];
    return { fromControlPlane, fromWorkers, to, cp, workers };
  });

const asInput = (p: ValidPlan): UpgradePlanToValidate => ({
  fromControlPlane: p.fromControlPlane,
  fromWorkers: p.fromWorkers,
  to: p.to,
  controlPlaneUpgrades: p.cp,
  workersUpgrades: p.workers,
});

describe('validator properties', () => {
  it('accepts the generated valid plans', () => {
    fc.assert(
      fc.property(validPlanArb, (p) => {
        expect(validateUpgradePlan(asInput(p))).toEqual([]);
      }),
    );
  });

  it('rejects a plan with a skipped minor', () => {
    fc.assert(
      fc.property(validPlanArb, fc.nat(), (p, pick) => {
        const i = pick % (p.cp.length - 1); // never the last (target) step
        const cp = p.cp.filter((_, j) => j !== i);
        const errors = validateUpgradePlan({ ...asInput(p), controlPlaneUpgrades: cp, workersUpgrades: [] });
        expect(errors.length).toBeGreaterThan(0);
        expect(errors[0]).toMatch(/^invalid ControlPlane upgrade plan: item \d+; expecting a version with minor/);
      }),
    );
  });

  it('rejects an out-of-order plan', () => {
    fc.assert(
      fc.property(validPlanArb, fc.nat(), (p, pick) => {
        const i = pick % (p.cp.length - 1);
        const cp = [...p.cp];
        [cp[i], cp[i + 1]] = [cp[i + 1] ?? '', cp[i] ?? ''];
        const errors = validateUpgradePlan({ ...asInput(p), controlPlaneUpgrades: cp });
        expect(errors.length).toBeGreaterThan(0);
        expect(errors.join('\n')).toMatch(/invalid ControlPlane upgrade plan/);
      }),
    );
  });

  it('rejects a plan that does not end at the target', () => {
    fc.assert(
      fc.property(validPlanArb, fc.constantFrom('drop', 'beyond', 'patch'), (p, how) => {
        const last = p.cp[p.cp.length - 1] ?? '';
        const [, minor = '0', patch = '0'] = last.slice(1).split('.');
        const cp =
          how === 'drop'
            ? p.cp.slice(0, -1)
            : how === 'beyond'
              ? [...p.cp, `v1.${Number(minor) + 1}.0`]
              : [...p.cp.slice(0, -1), `v1.${minor}.${Number(patch) + 1}`];
        const errors = validateUpgradePlan({ ...asInput(p), controlPlaneUpgrades: cp, workersUpgrades: [] });
        expect(errors.length).toBeGreaterThan(0);
        expect(errors[0]).toMatch(/control plane upgrade plan must end with version/);
      }),
    );
  });

  it('rejects workers moving more than three minors at once', () => {
    fc.assert(
      fc.property(validPlanArb, fc.integer({ min: 1, max: 8 }), (p, extra) => {
        const toMinor = Number(p.to.split('.')[1]);
        const fromWorkers = `v1.${toMinor - MAX_WORKER_MINOR_SKEW - extra}.0`;
        const errors = validateUpgradePlan({ ...asInput(p), fromWorkers, workersUpgrades: [p.to] });
        expect(errors).toHaveLength(1);
        expect(errors[0]).toMatch(/workers cannot go from minor \d+ .* to minor \d+ .*version skew rules$/);
      }),
    );
  });

  it('rejects workers versions outside the control plane plan', () => {
    fc.assert(
      fc.property(validPlanArb, fc.nat(), (p, pick) => {
        const i = pick % p.cp.length;
        const stray = `v1.${Number((p.cp[i] ?? '').split('.')[1])}.99`;
        const errors = validateUpgradePlan({ ...asInput(p), workersUpgrades: [stray, p.to] });
        expect(errors).toEqual([
          `invalid workers upgrade plan: versions ${stray} doesn't match any versions in the control plane upgrade plan nor the control plane version`,
        ]);
      }),
    );
  });
});

describe('validator: exact minors beyond 2^53 (uint64 in Cluster API)', () => {
  it('sees a skipped minor that a JavaScript number would round away', () => {
    // As a JavaScript number, 9007199254740992 + 1 is 9007199254740992: the expected next minor would be wrong.
    expect(
      validateUpgradePlan({
        fromControlPlane: 'v1.9007199254740992.0',
        to: 'v1.9007199254740994.0',
        controlPlaneUpgrades: ['v1.9007199254740994.0'],
        workersUpgrades: [],
      }),
    ).toEqual([
      'invalid ControlPlane upgrade plan: item 0; expecting a version with minor 9007199254740992 or 9007199254740993, found version v1.9007199254740994.0',
    ]);
  });

  it('defaults the workers plan with exact minors', () => {
    expect(
      defaultAndValidateUpgradePlan({
        fromControlPlane: 'v1.9007199254740995.0',
        fromWorkers: 'v1.9007199254740992.0',
        to: 'v1.9007199254740996.0',
        controlPlaneUpgrades: ['v1.9007199254740996.0'],
        workersUpgrades: [],
      }),
    ).toEqual({
      ok: true,
      controlPlaneUpgrades: ['v1.9007199254740996.0'],
      workersUpgrades: ['v1.9007199254740995.0', 'v1.9007199254740996.0'],
    });
  });

  it('accepts the last uint64 minor as the next one', () => {
    expect(
      validateUpgradePlan({
        fromControlPlane: 'v1.18446744073709551614.3',
        fromWorkers: 'v1.18446744073709551614.3',
        to: 'v1.18446744073709551615.0',
        controlPlaneUpgrades: ['v1.18446744073709551615.0'],
        workersUpgrades: [],
      }),
    ).toEqual([]);
  });

  it('stays bounded for a huge workers span (stops at the first minor it cannot find)', () => {
    const started = performance.now();
    const result = computeMinimalWorkersPlan('v1.18446744073709551614.0', 'v1.0.0', 'v1.18446744073709551615.0', [
      'v1.18446744073709551615.0',
    ]);
    expect(result).toEqual({
      ok: false,
      message:
        'invalid upgrade plan; unable to identify a version for minor 3: workers at v1.0.0 need an intermediate step there, and neither the control plane version nor its upgrade plan has one',
    });
    expect(performance.now() - started).toBeLessThan(50);
  });
});
