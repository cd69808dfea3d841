// The fleet rollout's input, state and messages as the workflow, its
// activities, the CLI and the tests share them. Pure types and names.
/** Which clusters a rollout upgrades: resolved once, when it starts. */
export interface ClusterSelector {
  /** A Kubernetes label selector (`env=prod,tier in (a,b)`); empty selects every cluster. */
  labelSelector: string;
  /** Only these namespaces (default: all). */
  namespaces?: string[];
  /** Only clusters of this ClusterClass (`spec.topology.classRef.name`). */
  clusterClass?: string;
}

export interface FleetRolloutInput {
  /** Names the rollout: its workflow id is `fleet-rollout/<name>`. */
  name: string;
  selector: ClusterSelector;
  targetVersion: string;
  /** Cumulative sizes: counts or percentages of the selected clusters, the last one `100%`. */
  waves: string[];
  /** Wait after each wave before its health re-check (Go duration, e.g. `30m`; `0s` for none). */
  soak: string;
  /** Clusters upgrading at once, across the rollout. */
  maxConcurrent: number;
  /** The rollout stops when more than this many clusters of one wave fail. */
  failureBudget: number;
  /** A cluster whose upgrade takes longer counts as failed (Go duration; default 6h). */
  clusterDeadline?: string;
  /** Waves (1-based) that wait for `approve` before they start / after they finish. */
  approveBefore?: number[];
  approveAfter?: number[];
  /** History length at which a run continues as new (default 1,500; tests set it low). */
  continueAsNewAtEvents?: number;
  /** How often a cluster deferred by CAPI's annotations is looked at again, in ms (default 60,000; tests set it low). */
  deferralRecheckMs?: number;
}

/** One cluster as the selection found it. */
export interface SelectedCluster {
  namespace: string;
  name: string;
  uid: string;
  /** `spec.topology.version` when selected. */
  version: string;
  /** Why the selection found it but the rollout must leave it alone (being deleted, no topology). */
  skip?: string;
}

/**
 * `deferred`: its worker topologies carry CAPI's defer-upgrade / hold-upgrade-sequence annotation, so
 * CAPI would not complete its upgrade; the rollout leaves its version alone and looks again later.
 */
export type RolloutClusterState = 'pending' | 'upgrading' | 'done' | 'failed' | 'skipped' | 'deferred';

export interface RolloutCluster extends SelectedCluster {
  /** 1-based wave; absent for clusters skipped at selection. */
  wave?: number;
  state: RolloutClusterState;
  /** Why it failed or was skipped; the upgrade's own message while upgrading. */
  reason?: string;
  startedAt?: string;
  finishedAt?: string;
}

export type RolloutWaveState =
  'pending' | 'waiting-approval' | 'running' | 'soaking' | 'checking' | 'waiting-approval-after' | 'done' | 'stopped';

export interface RolloutWave {
  wave: number;
  size: number;
  state: RolloutWaveState;
  approvedBeforeBy?: string;
  approvedAfterBy?: string;
}

export type RolloutPhase =
  'Running' | 'Paused' | 'WaitingForApproval' | 'Soaking' | 'Completed' | 'Stopped' | 'Aborted';

export interface FleetRolloutStatus {
  name: string;
  targetVersion: string;
  phase: RolloutPhase;
  /** One line: what the rollout does or waits for now (deterministic for a given state). */
  message: string;
  startTime: string;
  completeTime?: string;
  waves: RolloutWave[];
  clusters: RolloutCluster[];
  /** The look ahead at the next wave while the current one runs or soaks (advisory: it holds nothing). */
  nextWave?: NextWaveCheck;
}

/** A cluster of the next wave whose check fails now: its upgrade would stop at that gate when the wave opens. */
export interface NextWaveHold {
  /** `namespace/name`. */
  cluster: string;
  /** What the check found, in its own words. */
  finding: string;
}

export interface NextWaveCheck {
  /** The wave looked at (1-based). */
  wave: number;
  /** `checking` while the look runs; the last result stays until the new one comes. */
  state: 'checking' | 'checked';
  /** How many of its clusters the last look checked. */
  checked: number;
  holding: NextWaveHold[];
  /** One line, deterministic: the clusters that will hold the wave and why, or that none will. */
  message: string;
}

/** The memo: counts for `list` and the metrics, without the whole cluster list. */
export interface FleetRolloutMemo {
  phase: RolloutPhase;
  message: string;
  currentWave?: number;
  /** `deferred` only when some are (the memo of a rollout without any stays as it was). */
  counts: Record<Exclude<RolloutClusterState, 'deferred'>, number> & { deferred?: number };
  /** The last look at the next wave, once there is one: the clusters that will hold it (at most a few). */
  nextWave?: { wave: number; holding: string[]; message: string };
}

export const FLEET_ROLLOUT_MEMO_KEY = 'rollout';

export interface ApproveInput {
  /** The wave the approval is for (1-based). */
  wave: number;
  /** Who approved: recorded in the status and history. */
  by: string;
}

export interface RolloutAbortInput {
  reason?: string;
  /** Also abort the cluster upgrades this rollout started that are still in flight. */
  abortInFlight?: boolean;
}

export function fleetRolloutWorkflowId(name: string): string {
  return `fleet-rollout/${name}`;
}

/** What the rollout's activities read of one cluster's upgrade (from its workflow's memo). */
export interface ClusterUpgradeProgress {
  uid: string;
  state: 'upgrading' | 'done' | 'failed';
  /** The upgrade's phase and reason, or why it counts as failed. */
  message?: string;
}

/** The annotation the rollout sets beside the version: the api tags the upgrade's workflow with it. */
export const FLEET_ROLLOUT_ANNOTATION = 'upgrades.capi-orchestrator.io/fleet-rollout';
