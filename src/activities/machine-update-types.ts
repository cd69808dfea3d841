// The contract between the machine update workflow and its activities.
import type { BlockingPods, NodePacing } from '../domain/node-pacing.ts';
import type { MachineObjectRefs } from '../model/machine-update.ts';

export interface MachineRef {
  namespace: string;
  name: string;
}

/** The Cluster's pacing annotations, when set, each winning over its setting (node-pacing.ts). */
export interface PreflightResult extends NodePacing {
  nodeName: string;
  clusterName: string;
  /** The Cluster's pdb-force-drain-timeout annotation, when set: it wins over the setting. */
  pdbForceDrainTimeoutMs?: number;
  /** The Cluster's drain-skip-pod-selector annotation, when set: it wins over the setting. */
  drainSkipPodSelector?: string;
}

export interface DrainOptions {
  /** After this long since the drain started, PDB-blocked pods are deleted instead of evicted; unset = never. */
  pdbForceDrainTimeoutMs?: number;
  /** Delete pods with emptyDir volumes (their data is lost), as `kubectl drain --delete-emptydir-data`. */
  deleteEmptyDirData: boolean;
  /** Delete pods without a controller, as `kubectl drain --force`. */
  force: boolean;
  /** Grace period for evicted pods; unset = each pod's own. */
  gracePeriodSeconds?: number;
  /** The drain fails after this long. */
  timeoutMs: number;
  /** Label selector of pods the drain leaves alone (not evicted, deleted or waited for); unset or blank = none. */
  skipPodSelector?: string;
  /** Skip PDB checks right away (on-call `forceDrain`). */
  forceNow?: boolean;
  /**
   * When the drain began (epoch ms, kept in workflow state): the timeouts count from here,
   * so neither worker restarts nor on-call restarts of the drain reset them.
   */
  startedAtMs?: number;
}

export interface DrainResult {
  evicted: number;
  deleted: number;
  forceDeleted: number;
  skipped: number;
}

/** What the drain heartbeats: the workflow status names what blocks. */
export interface DrainProgress {
  remaining: number;
  summary: string;
}

export type ExecutorKind = 'delegate' | 'job' | 'management';

export interface NodeUpgradeInput {
  cluster: MachineRef;
  machine: MachineRef;
  nodeName: string;
  version: string;
  /**
   * v1 only: bootstrap files inline (KubeadmConfig spec.files). Kept so old histories replay;
   * upgradeNode refuses a non-empty list (contents must not travel through workflow history).
   */
  files?: unknown[];
  /** v2: the desired KubeadmConfig in the management cluster; its files are read there, never passed in. */
  bootstrapConfig?: MachineRef;
  executor: ExecutorKind;
  /** management: the Machine's infrastructure machine and bootstrap config, for the request's spec. */
  objectRefs?: MachineObjectRefs;
  /** Workflow id: names the request so a retry finds the same one. */
  requestName: string;
  timeoutMs: number;
  /** delegate, management: fail (node untouched) when nobody set any status within this; default 5 minutes. */
  agentPickupTimeoutMs?: number;
}

/** Reasons of the Events a machine update records on its Machine (stable: alerts match them). */
export type MachineEventReason =
  | 'MachineUpdateStarted'
  | 'NodeDrained'
  | 'NodeUpgraded'
  | 'MachineUpdateSucceeded'
  | 'NodeUpdateHeld'
  | 'NodeUpdatePaused'
  | 'MachineUpdateFailed'
  | 'MachineUpdateAborted';

export interface MachineEventInput {
  machine: MachineRef;
  reason: MachineEventReason;
  type: 'Normal' | 'Warning';
  message: string;
  /** Names the Event: the same key is the same Event (retries add none). */
  key: string;
}

export interface MachineUpdateActivities {
  preflight(input: { machine: MachineRef }): Promise<PreflightResult>;
  /** Pods matching `selector` (a validated label selector) that run on the node: they hold its update. */
  blockingPods(input: { cluster: MachineRef; nodeName: string; selector: string }): Promise<BlockingPods>;
  // `event`: the milestone Event the step reaches, recorded once it succeeded (step-events.ts).
  cordon(input: {
    cluster: MachineRef;
    nodeName: string;
    event?: MachineEventInput;
  }): Promise<{ wasUnschedulable: boolean }>;
  uncordon(input: { cluster: MachineRef; nodeName: string; event?: MachineEventInput }): Promise<void>;
  /** `machine`: checked each round; a Machine being deleted stops the drain (MachineDeleted). */
  drain(input: {
    cluster: MachineRef;
    nodeName: string;
    options: DrainOptions;
    machine?: MachineRef;
    event?: MachineEventInput;
  }): Promise<DrainResult>;
  upgradeNode(input: NodeUpgradeInput): Promise<{ message: string }>;
  waitForNodeVersion(input: {
    cluster: MachineRef;
    nodeName: string;
    version: string;
    timeoutMs: number;
    event?: MachineEventInput;
  }): Promise<void>;
  /** v1 only (replay): the annotation without the condition. */
  markNodeFailed(input: { cluster: MachineRef; nodeName: string; reason: string }): Promise<void>;
  /** Node condition InPlaceUpdateFailed=True (MachineHealthCheck can match it) and the update-failed annotation. */
  setNodeUpdateFailed(input: { cluster: MachineRef; nodeName: string; reason: string }): Promise<void>;
  /** After a success: the condition False, the annotation gone. */
  clearNodeUpdateFailed(input: { cluster: MachineRef; nodeName: string }): Promise<void>;
  /**
   * While the kubelet may restart: the Machine annotation `cluster.x-k8s.io/skip-remediation` (a
   * MachineHealthCheck leaves the Machine alone) with our marker; one someone else set is left as it is.
   */
  holdRemediation(input: { machine: MachineRef }): Promise<{ message: string }>;
  /** Removes skip-remediation and the marker, only when the marker says we set it; idempotent. */
  releaseRemediation(input: { machine: MachineRef }): Promise<void>;
  /** A Kubernetes Event on the Machine; none when the Machine is gone. */
  recordMachineEvent(input: MachineEventInput): Promise<void>;
  /** Deletes what the executor created for `requestName` (Job or NodeUpgradeRequest, and their Secrets); idempotent. */
  cleanupNodeUpgrade(input: NodeUpgradeRef): Promise<void>;
  /**
   * An abort after the executor started: keeps what it said last (the result, in history), then
   * stops it (deletes the Job or the NodeUpgradeRequest); idempotent.
   */
  stopNodeUpgrade(input: NodeUpgradeRef): Promise<NodeUpgradeStopped>;
}

/** The executor's object of one node upgrade. */
export interface NodeUpgradeRef {
  cluster: MachineRef;
  nodeName: string;
  executor: ExecutorKind;
  requestName: string;
}

export interface NodeUpgradeStopped {
  /** The executor had started on the node: the Job existed, or an agent had set a status on the request. */
  started: boolean;
  /** What the Job or the request said when it was stopped. */
  observed: string;
  /** job: the tail of its newest pod's log, read before the Job (and its pods) were deleted. */
  log?: { pod?: string; lines: string[]; unavailable?: string };
}
