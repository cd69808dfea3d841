/**
 * The rules Cluster API's topology controller applies to an upgrade plan (the answer of a
 * GenerateUpgradePlan hook), and the workers plan it computes when the answer leaves
 * `workersUpgrades` empty.
 *
 * Mirrors `DefaultAndValidateUpgradePlans` in sigs.k8s.io/cluster-api
 * exp/topology/desiredstate/upgrade_plan.go (rules re-implemented, not copied):
 *
 * Control plane (only when the control plane is not at the target, build tags included):
 * - every entry parses, and is greater than the previous one (the first one: than the current
 *   control plane version); an entry with the same major.minor.patch and build tags that cannot
 *   be ordered counts as greater;
 * - an entry's minor is the previous minor or the next one: no minor is skipped;
 * - the last entry (or, for an empty plan, the current version) equals the target, build tags included.
 * When the control plane is at the target the plan must be empty.
 *
 * Workers (only when there are workers and they are not at the target):
 * - when the control plane plan is not empty, every entry is, as a string, one of its entries or
 *   the current control plane version;
 * - an empty plan is defaulted ({@link computeMinimalWorkersPlan}) and then checked like a given one;
 * - every entry parses and is greater than the previous one (the first: than the workers' version);
 *   for same major.minor.patch with unorderable build tags, the order must follow the control plane
 *   plan (the current control plane version counting as position -1);
 * - no step moves more than {@link MAX_WORKER_MINOR_SKEW} minors;
 * - the last entry equals the target, build tags included.
 * When there are no workers, or they are at the target, the plan must be empty.
 *
 * Cluster API stops at the first broken rule; {@link validateUpgradePlan} reports the first broken
 * rule of each part (inputs, control plane, workers), so the list is empty exactly when Cluster API
 * accepts the plan. Messages are deterministic (no timestamps, no map order).
 *
 * Pure module: no I/O.
 */
import { UINT64_MAX, UNORDERED, compareVersions, tryParseVersion } from './versions.ts';
import type { KubeVersion } from './versions.ts';

/** Workers may move at most this many minors in one step (Kubernetes kubelet / API server skew). */
export const MAX_WORKER_MINOR_SKEW = 3;
const SKEW = BigInt(MAX_WORKER_MINOR_SKEW);

export interface UpgradePlanToValidate {
  /** Current control plane version, as sent in `fromControlPlaneKubernetesVersion`. */
  readonly fromControlPlane: string;
  /** Lowest current workers version; empty or absent when the cluster has no workers. */
  readonly fromWorkers?: string | undefined;
  /** Target version, as sent in `toKubernetesVersion`. */
  readonly to: string;
  readonly controlPlaneUpgrades: readonly string[];
  readonly workersUpgrades: readonly string[];
}

export type MinimalWorkersPlanResult =
  { readonly ok: true; readonly workersUpgrades: string[] } | { readonly ok: false; readonly message: string };

export type EffectiveUpgradePlanResult =
  | { readonly ok: true; readonly controlPlaneUpgrades: string[]; readonly workersUpgrades: string[] }
  | { readonly ok: false; readonly errors: string[] };

interface ParsedInputs {
  readonly to: KubeVersion;
  readonly controlPlane: KubeVersion;
  readonly workers: KubeVersion | undefined;
}

function parseInputs(
  fromControlPlane: string,
  fromWorkers: string | undefined,
  to: string,
): { ok: true; value: ParsedInputs } | { ok: false; errors: string[] } {
  const errors: string[] = [];
  const t = tryParseVersion(to);
  if (!t.ok) {
    errors.push(`failed to parse target version: ${t.error.message}`);
  }
  const cp = tryParseVersion(fromControlPlane);
  if (!cp.ok) {
    errors.push(`failed to parse control plane version: ${cp.error.message}`);
  }
  let workers: KubeVersion | undefined;
  if (fromWorkers !== undefined && fromWorkers !== '') {
    const w = tryParseVersion(fromWorkers);
    if (w.ok) {
      workers = w.version;
    } else {
      errors.push(`failed to parse workers version: ${w.error.message}`);
    }
  }
  if (!t.ok || !cp.ok || errors.length > 0) {
    return { ok: false, errors };
  }
  return { ok: true, value: { to: t.version, controlPlane: cp.version, workers } };
}

/** Last known version string for each minor: the current control plane version, then the control plane plan. */
function knownVersionPerMinor(
  fromControlPlane: KubeVersion,
  controlPlaneUpgrades: readonly string[],
): Map<bigint, string> {
  const minors = new Map<bigint, string>([[fromControlPlane.minor, fromControlPlane.raw]]);
  for (const entry of controlPlaneUpgrades) {
    const parsed = tryParseVersion(entry);
    if (parsed.ok) {
      minors.set(parsed.version.minor, entry);
    }
  }
  return minors;
}

function workersNeedUpgrade(workers: KubeVersion | undefined, to: KubeVersion): workers is KubeVersion {
  return workers !== undefined && compareVersions(workers, to) !== 0;
}

function minimalWorkersPlan(inputs: ParsedInputs, controlPlaneUpgrades: readonly string[]): MinimalWorkersPlanResult {
  const { to, controlPlane, workers } = inputs;
  if (!workersNeedUpgrade(workers, to)) {
    return { ok: true, workersUpgrades: [] };
  }
  const minors = knownVersionPerMinor(controlPlane, controlPlaneUpgrades);
  const plan: string[] = [];
  const span = to.minor - workers.minor;
  // Bounded by the plan's length: every iteration either finds its minor among the (at most
  // controlPlaneUpgrades.length + 1) known ones or returns.
  for (let i = SKEW; i < span; i += SKEW) {
    const minor = workers.minor + i;
    const version = minors.get(minor);
    if (version === undefined) {
      return {
        ok: false,
        message: `invalid upgrade plan; unable to identify a version for minor ${minor}: workers at ${workers.canonical} need an intermediate step there, and neither the control plane version nor its upgrade plan has one`,
      };
    }
    plan.push(version);
  }
  if (plan.length === 0 || plan[plan.length - 1] !== to.raw) {
    plan.push(to.raw);
  }
  return { ok: true, workersUpgrades: plan };
}

/**
 * The workers plan Cluster API computes when a GenerateUpgradePlan answer leaves `workersUpgrades`
 * empty: starting from the workers' minor, a step every {@link MAX_WORKER_MINOR_SKEW} minors to the
 * newest version the control plane has (or goes through) for that minor, then the target. Empty
 * when there are no workers or they are at the target. Fails when a needed minor has no version
 * (Cluster API then silently ends up with no workers plan; this function reports it).
 */
export function computeMinimalWorkersPlan(
  fromControlPlane: string,
  fromWorkers: string | undefined,
  to: string,
  controlPlaneUpgrades: readonly string[],
): MinimalWorkersPlanResult {
  const parsed = parseInputs(fromControlPlane, fromWorkers, to);
  if (!parsed.ok) {
    return { ok: false, message: parsed.errors.join('; ') };
  }
  return minimalWorkersPlan(parsed.value, controlPlaneUpgrades);
}

function validateControlPlane(inputs: ParsedInputs, plan: readonly string[]): string | undefined {
  const { to, controlPlane } = inputs;
  if (compareVersions(controlPlane, to) === 0) {
    return plan.length > 0
      ? 'invalid ControlPlane upgrade plan: control plane is already at the desired version'
      : undefined;
  }
  let current = controlPlane;
  for (const [i, entry] of plan.entries()) {
    const parsed = tryParseVersion(entry);
    if (!parsed.ok) {
      return `invalid ControlPlane upgrade plan: item ${i}; failed to parse version ${entry}: ${parsed.error.reason}`;
    }
    const target = parsed.version;
    const cmp = compareVersions(target, current);
    if (cmp === -1 || cmp === 0) {
      return `invalid ControlPlane upgrade plan: item ${i}; version ${entry} must be greater than ${current.canonical}`;
    }
    // uint64 in Cluster API: the minor after UINT64_MAX is 0.
    const nextMinor = (current.minor + 1n) & UINT64_MAX;
    if (target.minor !== current.minor && target.minor !== nextMinor) {
      return `invalid ControlPlane upgrade plan: item ${i}; expecting a version with minor ${current.minor} or ${nextMinor}, found version ${entry}`;
    }
    current = target;
  }
  if (compareVersions(current, to) !== 0) {
    return `invalid ControlPlane upgrade plan: control plane upgrade plan must end with version ${to.raw}, ends with ${current.canonical} instead`;
  }
  return undefined;
}

/**
 * Item `i` of the workers plan, `entry`, as the next step from `current`: a greater version within
 * the skew (versions whose build tags cannot be ordered go by their `order` in the control plane plan).
 */
function workersStep(
  i: number,
  entry: string,
  current: KubeVersion,
  order: ReadonlyMap<string, number>,
): { error: string } | { version: KubeVersion } {
  const parsed = tryParseVersion(entry);
  if (!parsed.ok) {
    return {
      error: `invalid workers upgrade plan, item ${i}; failed to parse version ${entry}: ${parsed.error.reason}`,
    };
  }
  const target = parsed.version;
  const cmp = compareVersions(target, current);
  if (cmp === -1 || cmp === 0) {
    return {
      error: `invalid workers upgrade plan, item ${i}; version ${entry} must be greater than ${current.canonical}`,
    };
  }
  if (cmp === UNORDERED) {
    const targetOrder = order.get(entry);
    if (targetOrder === undefined) {
      return {
        error: `invalid workers upgrade plan, item ${i}; failed to determine the order of version ${entry} from the control plane upgrade plan`,
      };
    }
    const currentOrder = order.get(current.canonical);
    if (currentOrder === undefined) {
      return {
        error: `invalid workers upgrade plan, item ${i}; failed to determine the order of version ${current.canonical} from the control plane upgrade plan`,
      };
    }
    if (targetOrder < currentOrder) {
      return {
        error: `invalid workers upgrade plan, item ${i}; version ${entry} comes before ${current.canonical} in the control plane upgrade plan`,
      };
    }
  }
  // Cluster API computes this difference with unsigned integers: a lower minor (only possible
  // with a higher major) wraps around and is rejected as well.
  const step = target.minor - current.minor;
  if (step > SKEW || step < 0n) {
    return {
      error: `invalid workers upgrade plan, item ${i}; workers cannot go from minor ${current.minor} (${current.canonical}) to minor ${target.minor} (${entry}), an intermediate step is required to comply with Kubernetes version skew rules`,
    };
  }
  return { version: target };
}

function validateWorkers(
  inputs: ParsedInputs,
  controlPlanePlan: readonly string[],
  workersPlan: readonly string[],
): { error: string } | { plan: string[] } {
  const { to, controlPlane, workers } = inputs;
  if (!workersNeedUpgrade(workers, to)) {
    if (workersPlan.length > 0) {
      return { error: 'invalid worker upgrade plan; there are no workers or workers already at the desired version' };
    }
    return { plan: [] };
  }

  if (controlPlanePlan.length > 0) {
    const allowed = new Set([...controlPlanePlan, controlPlane.raw]);
    const unknown = [...new Set(workersPlan.filter((v) => !allowed.has(v)))];
    if (unknown.length > 0) {
      return {
        error: `invalid workers upgrade plan: versions ${unknown.join(',')} doesn't match any versions in the control plane upgrade plan nor the control plane version`,
      };
    }
  }

  let plan = [...workersPlan];
  if (plan.length === 0) {
    const defaulted = minimalWorkersPlan(inputs, controlPlanePlan);
    if (!defaulted.ok) {
      return { error: defaulted.message };
    }
    plan = defaulted.workersUpgrades;
  }

  // Position of each version in the control plane plan (the current control plane version first),
  // used to order versions whose build tags cannot be ordered.
  const order = new Map<string, number>([[controlPlane.raw, -1]]);
  for (const [i, entry] of controlPlanePlan.entries()) {
    order.set(entry, i);
  }

  let current: KubeVersion = workers;
  for (const [i, entry] of plan.entries()) {
    const step = workersStep(i, entry, current, order);
    if ('error' in step) return step;
    current = step.version;
  }
  if (compareVersions(current, to) !== 0) {
    return {
      error: `invalid workers upgrade plan; workers upgrade plan must end with version ${to.raw}, ends with ${current.canonical} instead`,
    };
  }
  return { plan };
}

/**
 * Validates a plan like Cluster API does and returns the plan Cluster API would run (an empty
 * workers plan replaced by the computed minimal one), or every broken rule found.
 */
export function defaultAndValidateUpgradePlan(input: UpgradePlanToValidate): EffectiveUpgradePlanResult {
  const parsed = parseInputs(input.fromControlPlane, input.fromWorkers, input.to);
  if (!parsed.ok) {
    return { ok: false, errors: parsed.errors };
  }
  const errors: string[] = [];
  const cpError = validateControlPlane(parsed.value, input.controlPlaneUpgrades);
  if (cpError !== undefined) {
    errors.push(cpError);
  }
  const workers = validateWorkers(parsed.value, input.controlPlaneUpgrades, input.workersUpgrades);
  if ('error' in workers) {
    errors.push(workers.error);
  }
  if (errors.length > 0 || 'error' in workers) {
    return { ok: false, errors };
  }
  return { ok: true, controlPlaneUpgrades: [...input.controlPlaneUpgrades], workersUpgrades: workers.plan };
}

/**
 * Checks a plan against Cluster API's rules. Returns the broken rules (at most one for the
 * inputs, one for the control plane plan and one for the workers plan); empty when Cluster API
 * accepts the plan.
 */
export function validateUpgradePlan(input: UpgradePlanToValidate): string[] {
  const result = defaultAndValidateUpgradePlan(input);
  return result.ok ? [] : result.errors;
}
