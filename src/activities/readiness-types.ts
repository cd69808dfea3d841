// The contract between the readiness workflow and its own activities
// (readiness.ts). The other checks reuse the upgrade's activities as they are:
// checkDeprecatedApis and checkClusterHealth (upgrade-types.ts).
import type { DrainSimulation } from '../domain/drain-simulation.ts';
import type { InPlaceExecutor } from '../domain/readiness-gates.ts';
import type { Kubelet, ReadinessCheck } from '../domain/readiness.ts';
import type { AlertPolicy } from '../model/alerts.ts';
import type { ClusterRef } from '../model/cluster-upgrade.ts';

/** What the readiness checks need of the Cluster object (management cluster). */
export interface ReadinessTarget {
  uid?: string;
  /** spec.topology.version: the version the control plane is at or moving to. */
  version?: string;
  /** The Cluster's policy annotations (our prefix only). */
  annotations: Record<string, string>;
}

export interface DrainSurveyInput {
  cluster: ClusterRef;
  deleteEmptyDirData: boolean;
  force: boolean;
  /** drainSkipPodSelector (label selector text); unset = none. */
  skipPodSelector?: string;
  /**
   * The other gates to check with the survey (each unset = that check is left out: a caller from
   * before them). The target names the upgrade in the alert gate's words.
   */
  gates?: {
    targetVersion: string;
    /** capacityReservation: extra machines per MachineDeployment (0 = none). */
    capacityReservation: number;
    /** The alert gate's policy; unset = no alert gate. */
    alerts?: AlertPolicy;
    /** Unset: not checked (the caller does not know the ExtensionConfig's settings). */
    inPlace?: { enabled: boolean; executor: InPlaceExecutor };
  };
}

/** The workload cluster's kubelets and what draining each node would do, read once. */
export interface DrainSurvey {
  kubelets: (Kubelet & { controlPlane: boolean })[];
  simulation: DrainSimulation;
  /** capacity, in-place and alerts (domain/readiness-gates.ts) when the input asked for them. */
  gates?: ReadinessCheck[];
}

export interface ReadinessActivities {
  /** Reads the Cluster; a missing one fails (non-retryable), naming it. */
  readinessTarget(input: { cluster: ClusterRef }): Promise<ReadinessTarget>;
  /** Lists the nodes of the Cluster's Machines, pods and PodDisruptionBudgets, and simulates each node's drain. */
  surveyDrain(input: DrainSurveyInput): Promise<DrainSurvey>;
}
