// The contract between the cluster upgrade workflow and its activities
// (implemented in upgrade.ts against the management and workload clusters).
import type { HealthCriteria, HealthReport, HealthScope } from '../domain/cluster-health.ts';
import type { DeprecatedApiScan } from '../domain/deprecated-apis.ts';
import type { ClusterRef, ReservedCapacity } from '../model/cluster-upgrade.ts';

export type { HealthReport, HealthScope };

/** A health check of one cluster; the verdict is domain/cluster-health.ts. */
export interface HealthCheckInput extends HealthCriteria {
  cluster: ClusterRef;
}

export interface CapacityInput {
  cluster: ClusterRef;
  /** Extra machines per MachineDeployment. */
  count: number;
}

/** Whether the machines a reservation added are up: every reserved MachineDeployment has `reservedReplicas` Ready. */
export interface CapacityReadiness {
  ready: boolean;
  /** One line per MachineDeployment still short, sorted, e.g. `MachineDeployment md-0: 2 of 3 machines Ready`. */
  pending: string[];
}

/** Stable reasons of the Events on a Cluster (kubectl get events --field-selector reason=...). */
export type ClusterEventReason =
  | 'UpgradeStarted'
  | 'UpgradeDelayed'
  | 'UpgradeStepWaiting'
  | 'UpgradeStepOpened'
  | 'UpgradeFailed'
  | 'UpgradeAborted'
  | 'UpgradeCompleted'
  | 'UpgradeGateOverridden'
  | 'UpgradeGateWarning'
  | 'UpgradeReadinessChanged'
  | 'UpgradeHeldByAlerts'
  | 'AlertSilenceCreated'
  | 'AlertSilenceExpired'
  | 'AlertSilenceFailed';

export interface ClusterEventInput {
  cluster: ClusterRef;
  reason: ClusterEventReason;
  type: 'Normal' | 'Warning';
  message: string;
  /** Names the Event: the same key is the same Event (retries add none). */
  key: string;
}

export interface UpgradeActivities {
  checkClusterHealth(input: HealthCheckInput): Promise<HealthReport>;
  /** Scales every MachineDeployment of the cluster up by `count`, recording what it did on the object (idempotent). */
  reserveCapacity(input: CapacityInput): Promise<ReservedCapacity[]>;
  /** Reads the reservation recorded on the Cluster and the readiness of the MachineDeployments it scaled. */
  checkReservedCapacity(input: { cluster: ClusterRef }): Promise<CapacityReadiness>;
  /** Undoes reserveCapacity from what it recorded (idempotent; a no-op when nothing is reserved). */
  releaseCapacity(input: { cluster: ClusterRef }): Promise<ReservedCapacity[]>;
  /** The workload kube-apiserver's apiserver_requested_deprecated_apis samples (activities/deprecated-apis.ts). */
  checkDeprecatedApis(input: { cluster: ClusterRef }): Promise<DeprecatedApiScan>;
  /** A Kubernetes Event on the Cluster (best effort: the workflow never fails on it). */
  recordClusterEvent(input: ClusterEventInput): Promise<void>;
}
