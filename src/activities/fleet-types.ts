// The contract between the fleet rollout workflow and its activities
// (implemented in fleet.ts against the management cluster and Temporal).
import type { ClusterSelector, ClusterUpgradeProgress, SelectedCluster } from '../model/fleet-rollout.ts';

export interface SetVersionResult {
  uid: string;
  /**
   * set: changed by us now; already: at the target (our earlier try); changed: someone else moved it;
   * deferred: left alone because CAPI's pacing annotations defer some of its workers.
   */
  outcome: 'set' | 'already' | 'changed' | 'gone' | 'deferred';
  /** spec.topology.version as found, when not set by us. */
  found?: string;
  /** With `deferred`: which annotation and workers (`deferred by CAPI annotation … (MachineDeployment md-1)`). */
  deferredBy?: string;
}

export interface FleetActivities {
  /** Clusters matching the selector, with their uid and spec.topology.version. */
  selectClusters(input: { selector: ClusterSelector }): Promise<SelectedCluster[]>;
  /**
   * Moves each cluster's spec.topology.version from the version it was selected at to `target`
   * (a JSON patch that tests the old value: a concurrent change is reported, never overwritten),
   * marks it with the rollout's annotation and records an Event on it. Idempotent. A cluster whose
   * worker topologies carry CAPI's defer-upgrade / hold-upgrade-sequence annotation is left alone
   * (`deferred`): CAPI would move its control plane but never complete the upgrade.
   */
  setClusterVersions(input: {
    rollout: string;
    target: string;
    clusters: SelectedCluster[];
  }): Promise<SetVersionResult[]>;
  /**
   * Follows each cluster's upgrade through its cluster-upgrade workflow: returns as soon as one
   * differs from `known` (or after `waitMs`), with every cluster's progress. Heartbeats.
   */
  awaitClusterUpgrades(input: {
    target: string;
    clusters: { cluster: SelectedCluster; known: ClusterUpgradeProgress['state'] }[];
    waitMs: number;
  }): Promise<ClusterUpgradeProgress[]>;
  /**
   * The health check after a wave's soak, per cluster: the unhealthy ones with their summary. With scope `pre`,
   * the check an upgrade's gate makes before it starts (the look ahead at the next wave; `version` unused).
   */
  checkClustersHealth(input: {
    clusters: SelectedCluster[];
    version: string;
    scope?: 'pre' | 'post';
  }): Promise<{ uid: string; summary: string }[]>;
  /**
   * The readiness of each cluster before its upgrade to `version` (the look ahead at the next wave): one readiness
   * run each (the readinessWorkflow `capi-upgrades readiness` runs, joined when one runs already), a few at a time,
   * under the built-in settings and each Cluster's annotations; the clusters that are not Ready, each with what
   * holds it (Blocked) or why it could not tell (Unknown). Heartbeats.
   */
  checkClustersReadiness(input: { clusters: SelectedCluster[]; version: string }): Promise<ClusterReadinessFinding[]>;
  /** Signals `abort` to the cluster upgrades still in flight. */
  abortClusterUpgrades(input: { clusters: SelectedCluster[]; reason: string }): Promise<void>;
}

/** A cluster of the next wave that is not Ready, in its readiness run's words. */
export interface ClusterReadinessFinding {
  uid: string;
  verdict: 'Blocked' | 'Unknown';
  /** The blocking checks (`check: message`, at most three), or the checks (or the run) that could not tell. */
  finding: string;
}
