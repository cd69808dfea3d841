// What draining each node would do, worked out without evicting anything: the
// pods the drain would evict, skip and be blocked by (drain.ts decides, as the
// real drain does), and every PodDisruptionBudget that would hold it: one that
// allows no disruption now (status.disruptionsAllowed 0), or whose minAvailable
// one eviction from that node would break. Pure: the readiness activity reads
// the nodes, pods and budgets; this decides. Lists are sorted and capped, so the
// result is deterministic and bounded whatever the cluster's size.
import type { V1PodDisruptionBudget } from '@kubernetes/client-node';
import { pdbSelectorMatches } from './cluster-health.ts';
import { filterPodsForDrain, podKey, type DrainOptions, type DrainPod } from './drain.ts';

/** How many names a list of the simulation keeps before only counting. */
export const SIMULATION_LIST_CAP = 10;
/** How many nodes it details (those held first): a large cluster's report stays far below Temporal's payload limits. */
export const SIMULATION_NODE_CAP = 100;

/** A pod as the simulation reads it: the drain's view plus whether it is Ready. */
export interface SimulatedPod extends DrainPod {
  readonly status?: {
    readonly phase?: string | undefined;
    readonly conditions?: readonly { readonly type: string; readonly status: string }[] | undefined;
  };
}

/** A capped, sorted list of names and how many there were. */
export interface NameList {
  names: string[];
  total: number;
}

/** A budget that holds the drain of a node, and why. */
export interface PdbHold {
  /** `namespace/name` of the PodDisruptionBudget. */
  pdb: string;
  /** Why it allows no eviction, e.g. `disruptionsAllowed 0: minAvailable 2 with 2 healthy`. */
  reason: string;
  /** The pods it covers (all nodes). */
  covers: NameList;
}

export interface NodeDrainSimulation {
  node: string;
  evict: NameList;
  /** `namespace/name (reason)`. */
  skip: NameList;
  /** `namespace/name (reason)`: pods the drain stops at under its options. */
  blockers: NameList;
  /** Budgets that would refuse the evictions of this node's pods. */
  pdbs: PdbHold[];
}

export interface DrainSimulation {
  /** The nodes whose drain something would hold, then the others, each by name; at most SIMULATION_NODE_CAP. */
  nodes: NodeDrainSimulation[];
  /** Over every node, detailed or not. */
  totals: { nodes: number; held: number; evict: number; skip: number };
}

const isHeld = (n: NodeDrainSimulation) => n.blockers.total > 0 || n.pdbs.length > 0;

const byText = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

function capped(items: readonly string[]): NameList {
  const names = [...items].sort(byText);
  return { names: names.slice(0, SIMULATION_LIST_CAP), total: names.length };
}

/** `a, b and 3 more` of a capped list. */
export function listText(list: NameList, limit = SIMULATION_LIST_CAP): string {
  const shown = list.names.slice(0, limit);
  const more = list.total - shown.length;
  return more > 0 ? `${shown.join(', ')} and ${more} more` : shown.join(', ');
}

function isReady(pod: SimulatedPod): boolean {
  return (pod.status?.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True');
}

/** minAvailable as a number of pods: a percentage of the expected pods, rounded up as the API server does. */
function minAvailableOf(pdb: V1PodDisruptionBudget, expected: number): number | undefined {
  const min = pdb.spec?.minAvailable;
  if (min === undefined || min === null) return undefined;
  if (typeof min === 'number') return min;
  const percent = /^(\d+)%$/.exec(min.trim());
  if (percent) return Math.ceil((Number(percent[1]) * expected) / 100);
  const n = Number(min);
  return Number.isInteger(n) ? n : undefined;
}

interface Budget {
  key: string;
  pdb: V1PodDisruptionBudget;
  covered: SimulatedPod[];
}

function budgetsOf(pods: readonly SimulatedPod[], pdbs: readonly V1PodDisruptionBudget[]): Budget[] {
  return pdbs
    .map((pdb) => {
      const namespace = pdb.metadata?.namespace ?? '';
      const covered = pods.filter(
        (p) =>
          (p.metadata?.namespace ?? '') === namespace &&
          pdbSelectorMatches(pdb.spec?.selector, { ...(p.metadata?.labels ?? {}) }),
      );
      return { key: `${namespace}/${pdb.metadata?.name ?? ''}`, pdb, covered };
    })
    .sort((a, b) => byText(a.key, b.key));
}

/**
 * Why `budget` refuses the next eviction of its pods, or undefined when it lets one go: the drain
 * evicts one at a time and waits for replacements, so a budget holds it only when it allows no
 * disruption now (status), or when its minAvailable would break with one pod fewer (a budget the
 * disruption controller has not counted yet, or one over unhealthy pods).
 */
function holdReason(budget: Budget): string | undefined {
  const status = budget.pdb.status;
  const healthy = status?.currentHealthy ?? budget.covered.filter(isReady).length;
  const min = minAvailableOf(budget.pdb, status?.expectedPods ?? budget.covered.length);
  const minText = min === undefined ? undefined : `minAvailable ${min} with ${healthy} healthy`;
  if (status?.disruptionsAllowed === 0) return minText ? `disruptionsAllowed 0: ${minText}` : 'disruptionsAllowed 0';
  if (min !== undefined && healthy - 1 < min) return `${minText}: evicting one leaves ${healthy - 1}`;
  return undefined;
}

/** The drain of every node in `nodes` (sorted), each from the cluster as it is now. */
export function simulateDrain(
  nodes: readonly string[],
  pods: readonly SimulatedPod[],
  pdbs: readonly V1PodDisruptionBudget[],
  options: DrainOptions,
): DrainSimulation {
  const budgets = budgetsOf(pods, pdbs);
  const all = [...new Set(nodes)].sort(byText).map((node): NodeDrainSimulation => {
    const verdict = filterPodsForDrain(
      pods.filter((p) => p.spec?.nodeName === node),
      options,
    );
    const evicted = new Set(verdict.evict.map(podKey));
    const holds: PdbHold[] = [];
    for (const budget of budgets) {
      const reason = budget.covered.some((p) => evicted.has(podKey(p))) ? holdReason(budget) : undefined;
      if (reason !== undefined) holds.push({ pdb: budget.key, reason, covers: capped(budget.covered.map(podKey)) });
    }
    return {
      node,
      evict: capped(verdict.evict.map(podKey)),
      skip: capped(verdict.skip.map((v) => `${podKey(v.pod)} (${v.reason})`)),
      blockers: capped(verdict.blockers.map((v) => `${podKey(v.pod)} (${v.reason})`)),
      pdbs: holds,
    };
  });
  const held = all.filter(isHeld);
  return {
    nodes: [...held, ...all.filter((n) => !isHeld(n))].slice(0, SIMULATION_NODE_CAP),
    totals: {
      nodes: all.length,
      held: held.length,
      evict: all.reduce((n, node) => n + node.evict.total, 0),
      skip: all.reduce((n, node) => n + node.skip.total, 0),
    },
  };
}
