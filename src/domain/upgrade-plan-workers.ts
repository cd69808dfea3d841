// The workers half of a chained upgrade plan (upgrade-plan.ts): which of the control plane's steps
// the workers go through, for the `every-minor` strategy or an explicit list of versions, with a
// step inserted wherever workers would move more minors than the skew rules allow.
//
// Pure module: no I/O.
import { MAX_WORKER_MINOR_SKEW } from './upgrade-plan-validator.ts';
import { compareVersions } from './versions.ts';
import type { KubeVersion } from './versions.ts';

/** A workers step: the string to put in the plan and its parsed form. */
interface Step {
  readonly text: string;
  readonly version: KubeVersion;
}

export interface WorkersPlanInput {
  /** The current control plane version, as Cluster API sent it, and parsed. */
  readonly fromControlPlane: string;
  readonly controlPlane: KubeVersion;
  /** The control plane plan, ascending, ending with the target. */
  readonly controlPlaneSteps: readonly KubeVersion[];
  /** The workers' current version (below the target). */
  readonly workers: KubeVersion;
  readonly to: KubeVersion;
  /** `every-minor`, or the explicit versions still ahead of the workers, ascending. */
  readonly strategy: 'every-minor' | readonly KubeVersion[];
}

/**
 * The workers plan, or undefined when no step is ahead of the workers. Steps workers may use: the
 * current control plane version (if ahead of the workers) and the control plane plan, ascending.
 */
export function planWorkers(input: WorkersPlanInput): string[] | undefined {
  const { workers, to, strategy } = input;
  const available: Step[] = [];
  const aheadOfWorkers = (v: KubeVersion): boolean => {
    const c = compareVersions(v, workers);
    return c === 1 || c === 2;
  };
  if (aheadOfWorkers(input.controlPlane)) {
    available.push({ text: input.fromControlPlane, version: input.controlPlane });
  }
  for (const v of input.controlPlaneSteps) {
    if (aheadOfWorkers(v)) {
      available.push({ text: v.canonical, version: v });
    }
  }
  const last = available[available.length - 1];
  if (last === undefined) {
    return undefined;
  }
  const steps = strategy === 'every-minor' ? lastOfEachMinor(available, workers) : listedSteps(available, strategy);
  const end = steps[steps.length - 1];
  if (end === undefined || compareVersions(end.version, to) !== 0) {
    steps.push(last);
  }
  return bridgeSkew(workers, steps, available).map((s) => s.text);
}

/** The last available step of every minor above the workers' one (walks the steps, not the minors). */
function lastOfEachMinor(available: readonly Step[], workers: KubeVersion): Step[] {
  const steps: Step[] = [];
  for (const [i, step] of available.entries()) {
    const next = available[i + 1];
    if (step.version.minor > workers.minor && (next === undefined || next.version.minor !== step.version.minor)) {
      steps.push(step);
    }
  }
  return steps;
}

/** The available steps the explicit list names, in its order. */
function listedSteps(available: readonly Step[], explicit: readonly KubeVersion[]): Step[] {
  const byCanonical = new Map<string, Step>();
  for (const s of available) {
    if (!byCanonical.has(s.version.canonical)) {
      byCanonical.set(s.version.canonical, s);
    }
  }
  const steps: Step[] = [];
  for (const v of explicit) {
    const step = byCanonical.get(v.canonical);
    if (step !== undefined) {
      steps.push(step);
    }
  }
  return steps;
}

const SKEW = BigInt(MAX_WORKER_MINOR_SKEW);

/**
 * Inserts a step wherever workers would move more than MAX_WORKER_MINOR_SKEW minors: the last
 * available step of the minor three above the current one. Leaves a gap it cannot bridge (the
 * validation then reports it). Each pass of the inner loop consumes a later available step or
 * stops, so the work is bounded by the number of steps, not by the distance between minors.
 */
function bridgeSkew(from: KubeVersion, steps: readonly Step[], available: readonly Step[]): Step[] {
  const out: Step[] = [];
  let current = from;
  for (const step of steps) {
    while (step.version.minor - current.minor > SKEW) {
      const minor = current.minor + SKEW;
      const ofMinor = available.filter((s) => s.version.minor === minor && compareVersions(s.version, current) === 1);
      const bridge = ofMinor[ofMinor.length - 1];
      if (bridge === undefined) {
        break;
      }
      out.push(bridge);
      current = bridge.version;
    }
    out.push(step);
    current = step.version;
  }
  return out;
}
