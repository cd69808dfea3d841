/**
 * Chained upgrade plans: the answer to Cluster API's GenerateUpgradePlan hook.
 *
 * Control plane strategies:
 * - `newest-patch` (default): for every minor between the current control plane version and the
 *   target, the newest catalog patch of that minor; then the target (v1.29.0 → v1.33.0 gives
 *   v1.30.<newest>, v1.31.<newest>, v1.32.<newest>, v1.33.0). A patch-only upgrade is just the target.
 * - `every-patch`: every catalog version above the current version and below the target, then
 *   the target.
 * The target does not have to be in the catalog: it is always the last step.
 *
 * Workers strategies:
 * - `minimal` (default): an empty list, Cluster API computes the fewest steps (see
 *   computeMinimalWorkersPlan).
 * - `every-minor`: for every minor above the workers' minor up to the target's, the last control
 *   plane step of that minor (the current control plane version counts as a step), so workers
 *   follow the control plane minor by minor; with `newest-patch` that is every control plane step.
 * - an explicit list of versions: workers go through those above the workers' current version,
 *   then the target. Cluster API only accepts workers versions that are the current control plane
 *   version or in the control plane plan, so each listed version the control plane has not
 *   reached yet is pinned into the control plane plan; with `newest-patch` a pinned version
 *   replaces the newest patch as the control plane step for its minor (v1.29.0 → v1.32.3 with
 *   workers [v1.30.0, v1.32.3] gives control plane v1.30.0, v1.31.<newest>, v1.32.3). Listed
 *   versions the control plane is already past are skipped (workers can no longer use them);
 *   versions above the target are an error.
 * With `every-minor` and explicit lists, a gap of more than three minors between two workers
 * steps is bridged with the control plane step three minors on (as Cluster API does).
 *
 * Bounded work: an upgrade whose control plane would cross more than {@link MAX_PLAN_MINORS} minor
 * versions is refused before anything is enumerated (see {@link planTooLongMessage}); every other
 * loop is bounded by that cap, the catalog or the workers list, never by the numeric distance
 * between two versions. Versions compare exactly (uint64 `bigint`s, see versions.ts), so targets
 * such as `v1.9007199254740993.0` are neither rounded nor looped over.
 *
 * Every generated plan is checked with Cluster API's rules (validateUpgradePlan) before it is
 * returned; requests that cannot be planned return `{ ok: false, message }` and never throw.
 *
 * Pure module: no I/O.
 */
import { catalogEntriesBetween, defaultCatalog } from './version-catalog.ts';
import type { VersionCatalog } from './version-catalog.ts';
import { validateUpgradePlan } from './upgrade-plan-validator.ts';
import { planWorkers } from './upgrade-plan-workers.ts';
import { VersionError, compareVersions, sortVersions, tryParseVersion, versionForMessage } from './versions.ts';
import type { KubeVersion } from './versions.ts';

/**
 * Most minor versions one plan crosses (target minor minus current control plane minor). Real
 * upgrades cross a handful; anything longer is refused before a single version is enumerated,
 * so a mistyped or hostile target (`v1.30000000.0`) costs microseconds, not an event loop.
 */
export const MAX_PLAN_MINORS = 64;

/** The stable refusal for an upgrade longer than {@link MAX_PLAN_MINORS} minors. */
export function planTooLongMessage(from: string, to: string, minors: bigint): string {
  return `the upgrade from ${versionForMessage(from)} to ${versionForMessage(to)} spans ${minors} minor versions; at most ${MAX_PLAN_MINORS} are planned in one upgrade`;
}

export type ControlPlaneStrategy = 'newest-patch' | 'every-patch';
export type WorkersStrategy = 'minimal' | 'every-minor' | readonly string[];

export const CONTROL_PLANE_STRATEGIES: readonly ControlPlaneStrategy[] = ['newest-patch', 'every-patch'];

export interface PlanRequest {
  /** `fromControlPlaneKubernetesVersion`, exactly as Cluster API sent it. */
  readonly fromControlPlane: string;
  /** `fromWorkersKubernetesVersion`; absent or empty when the cluster has no workers. */
  readonly fromWorkers?: string | undefined;
  /** `toKubernetesVersion`. */
  readonly to: string;
}

export interface PlanPolicy {
  readonly controlPlane: ControlPlaneStrategy;
  readonly workers: WorkersStrategy;
  readonly catalog: VersionCatalog;
}

export interface UpgradePlan {
  readonly controlPlaneUpgrades: string[];
  readonly workersUpgrades: string[];
}

export type PlanResult =
  { readonly ok: true; readonly plan: UpgradePlan } | { readonly ok: false; readonly message: string };

export function defaultPlanPolicy(): PlanPolicy {
  return { controlPlane: 'newest-patch', workers: 'minimal', catalog: defaultCatalog() };
}

export type StrategyResult<T> =
  { readonly ok: true; readonly strategy: T } | { readonly ok: false; readonly message: string };

/** Parses a control plane strategy name (`newest-patch`, `every-patch`); blank means the default. */
export function parseControlPlaneStrategy(value: string | undefined): StrategyResult<ControlPlaneStrategy> {
  const v = (value ?? '').trim();
  if (v === '') {
    return { ok: true, strategy: 'newest-patch' };
  }
  const found = CONTROL_PLANE_STRATEGIES.find((s) => s === v);
  if (found === undefined) {
    return {
      ok: false,
      message: `invalid control plane upgrade strategy ${JSON.stringify(v)}: expected one of ${CONTROL_PLANE_STRATEGIES.join(', ')}`,
    };
  }
  return { ok: true, strategy: found };
}

/**
 * Parses a workers strategy: `minimal`, `every-minor`, or a comma-separated list of versions;
 * blank means the default (`minimal`).
 */
export function parseWorkersStrategy(value: string | undefined): StrategyResult<WorkersStrategy> {
  const v = (value ?? '').trim();
  if (v === '' || v === 'minimal') {
    return { ok: true, strategy: 'minimal' };
  }
  if (v === 'every-minor') {
    return { ok: true, strategy: 'every-minor' };
  }
  const entries = v
    .split(',')
    .map((e) => e.trim())
    .filter((e) => e.length > 0);
  const bad = entries.filter((e) => !tryParseVersion(e).ok).map((e) => JSON.stringify(e));
  if (bad.length > 0) {
    return {
      ok: false,
      message: `invalid workers upgrade strategy: ${bad.join(', ')} ${bad.length === 1 ? 'is' : 'are'} neither minimal, every-minor nor a Kubernetes version`,
    };
  }
  return { ok: true, strategy: entries };
}

function fail(message: string): PlanResult {
  return { ok: false, message };
}

function dedupeByCanonical(versions: readonly KubeVersion[]): KubeVersion[] {
  const seen = new Set<string>();
  return versions.filter((v) => (seen.has(v.canonical) ? false : (seen.add(v.canonical), true)));
}

function parseAll(list: readonly string[]): KubeVersion[] {
  const out: KubeVersion[] = [];
  for (const entry of list) {
    const parsed = tryParseVersion(entry);
    if (parsed.ok) {
      out.push(parsed.version);
    }
  }
  return out;
}

/** A request that cannot be planned: thrown inside {@link plan}, returned as `{ ok: false }`. */
class PlanRefusal extends Error {}

function refuse(message: string): never {
  throw new PlanRefusal(message);
}

const above = (v: KubeVersion, than: KubeVersion): boolean => {
  const c = compareVersions(v, than);
  return c === 1 || c === 2;
};

/** Generates the upgrade plan for a GenerateUpgradePlan request. Never throws for bad versions. */
export function generateUpgradePlan(request: PlanRequest, policy: PlanPolicy = defaultPlanPolicy()): PlanResult {
  try {
    return plan(request, policy);
  } catch (err) {
    // Only reachable with a hand-built catalog holding invalid entries (createCatalog never makes one).
    if (err instanceof VersionError) {
      return fail(
        `cannot plan an upgrade from ${versionForMessage(request.fromControlPlane)} to ${versionForMessage(request.to)}: ${err.message}`,
      );
    }
    throw err;
  }
}

function plan(request: PlanRequest, policy: PlanPolicy): PlanResult {
  const hasWorkers = request.fromWorkers !== undefined && request.fromWorkers !== '';
  const shown = versionForMessage;
  const what = `cannot plan an upgrade from ${shown(request.fromControlPlane)}${hasWorkers ? ` (workers ${shown(request.fromWorkers ?? '')})` : ''} to ${shown(request.to)}`;
  try {
    const { to, cp, workers } = plannedVersions(request, hasWorkers, what);
    const workersToUpgrade = workers !== undefined && compareVersions(workers, to) !== 0 ? workers : undefined;
    const explicit =
      typeof policy.workers !== 'string' && workersToUpgrade !== undefined
        ? explicitWorkers(policy.workers, to, workersToUpgrade, what)
        : [];
    // Explicit versions the control plane still has to reach (and not the target): pinned into its plan.
    const pins = explicit.filter((v) => above(v, cp) && compareVersions(v, to) === -1);
    const controlPlaneSteps = compareVersions(cp, to) !== 0 ? planControlPlane(cp, to, pins, policy, what) : [];
    const controlPlaneUpgrades = controlPlaneSteps.map((v) => v.canonical);

    let workersUpgrades: string[] = [];
    if (workersToUpgrade !== undefined && policy.workers !== 'minimal') {
      workersUpgrades =
        planWorkers({
          fromControlPlane: request.fromControlPlane,
          controlPlane: cp,
          controlPlaneSteps,
          workers: workersToUpgrade,
          to,
          strategy: policy.workers === 'every-minor' ? 'every-minor' : explicit,
        }) ?? refuse(`${what}: no version available for the workers at ${request.fromWorkers}`);
    }

    const errors = validateUpgradePlan({
      fromControlPlane: request.fromControlPlane,
      fromWorkers: request.fromWorkers,
      to: request.to,
      controlPlaneUpgrades,
      workersUpgrades,
    });
    if (errors.length > 0) {
      return fail(`${what}: ${errors.join('; ')}`);
    }
    return { ok: true, plan: { controlPlaneUpgrades, workersUpgrades } };
  } catch (err) {
    if (err instanceof PlanRefusal) return fail(err.message);
    throw err;
  }
}

/** The request's versions, parsed, refused when the upgrade changes the major, goes down or is too long. */
function plannedVersions(
  request: PlanRequest,
  hasWorkers: boolean,
  what: string,
): { to: KubeVersion; cp: KubeVersion; workers: KubeVersion | undefined } {
  const toParsed = tryParseVersion(request.to);
  if (!toParsed.ok) {
    refuse(`${what}: target: ${toParsed.error.message}`);
  }
  const cpParsed = tryParseVersion(request.fromControlPlane);
  if (!cpParsed.ok) {
    refuse(`${what}: control plane: ${cpParsed.error.message}`);
  }
  const to = toParsed.version;
  const cp = cpParsed.version;
  let workers: KubeVersion | undefined;
  if (hasWorkers) {
    const w = tryParseVersion(request.fromWorkers ?? '');
    if (!w.ok) {
      refuse(`${what}: workers: ${w.error.message}`);
    }
    workers = w.version;
  }

  if (cp.major !== to.major) {
    refuse(`${what}: changing the major version is not supported`);
  }
  if (compareVersions(to, cp) === -1) {
    refuse(`${what}: downgrading the control plane is not supported`);
  }
  // The cap comes before anything is enumerated: every loop of the plan is bounded by it.
  const span = to.minor - cp.minor;
  if (span > BigInt(MAX_PLAN_MINORS)) {
    refuse(planTooLongMessage(request.fromControlPlane, request.to, span));
  }
  if (workers !== undefined) {
    if (workers.major !== to.major) {
      refuse(`${what}: changing the major version of the workers is not supported`);
    }
    if (compareVersions(to, workers) === -1) {
      refuse(`${what}: the target is below the workers version ${request.fromWorkers}`);
    }
  }
  return { to, cp, workers };
}

/** Explicit workers versions: parsed, ordered, and only those still ahead of the workers. */
function explicitWorkers(
  listed: readonly string[],
  to: KubeVersion,
  workers: KubeVersion,
  what: string,
): KubeVersion[] {
  const bad = listed.filter((e) => !tryParseVersion(e).ok).map((e) => JSON.stringify(e));
  if (bad.length > 0) {
    refuse(`${what}: invalid workers versions ${bad.join(', ')}`);
  }
  const parsed = sortVersions(dedupeByCanonical(parseAll(listed)));
  const beyond = parsed.filter((v) => above(v, to));
  if (beyond.length > 0) {
    refuse(
      `${what}: workers versions ${beyond.map((v) => v.canonical).join(', ')} ${beyond.length === 1 ? 'is' : 'are'} not below the target`,
    );
  }
  return parsed.filter((v) => above(v, workers));
}

/** The control plane's steps from `cp` (exclusive) to `to` (inclusive), refused when a minor has no version. */
function planControlPlane(
  cp: KubeVersion,
  to: KubeVersion,
  pins: readonly KubeVersion[],
  policy: PlanPolicy,
  what: string,
): KubeVersion[] {
  const between = catalogEntriesBetween(policy.catalog, cp, to);
  let chosen: KubeVersion[];
  if (policy.controlPlane === 'every-patch') {
    chosen = [...between, ...pins];
  } else {
    // `between` is ascending: the last entry seen for a minor is its newest.
    const newest = new Map<bigint, KubeVersion>();
    for (const v of between) {
      newest.set(v.minor, v);
    }
    const pinned = new Set(pins.map((p) => p.minor));
    chosen = [...pins];
    for (let minor = cp.minor + 1n; minor < to.minor; minor++) {
      const step = pinned.has(minor) ? undefined : newest.get(minor);
      if (step !== undefined) {
        chosen.push(step);
      }
    }
  }
  const steps = sortVersions(dedupeByCanonical(chosen));
  const covered = new Set(steps.map((v) => v.minor));
  for (let minor = cp.minor + 1n; minor < to.minor; minor++) {
    if (!covered.has(minor)) {
      refuse(
        `${what}: no Kubernetes version known for minor v${to.major}.${minor} (${policy.catalog.source} catalog); every minor must be a step`,
      );
    }
  }
  return [...steps, to];
}
