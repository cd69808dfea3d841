// The contract between the machine update workflow and its activities.
export interface MachineRef {
  namespace: string;
  name: string;
}

export interface PreflightResult {
  nodeName: string;
  clusterName: string;
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
  /** Skip PDB checks right away (on-call `forceDrain`). */
  forceNow?: boolean;
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

export type ExecutorKind = 'delegate' | 'job';

export interface NodeUpgradeInput {
  cluster: MachineRef;
  machine: MachineRef;
  nodeName: string;
  version: string;
  /** Bootstrap files desired for the node (KubeadmConfig spec.files). */
  files: unknown[];
  executor: ExecutorKind;
  /** Workflow id: names the request so a retry finds the same one. */
  requestName: string;
  timeoutMs: number;
}

export interface MachineUpdateActivities {
  preflight(input: { machine: MachineRef }): Promise<PreflightResult>;
  cordon(input: { cluster: MachineRef; nodeName: string }): Promise<{ wasUnschedulable: boolean }>;
  uncordon(input: { cluster: MachineRef; nodeName: string }): Promise<void>;
  drain(input: { cluster: MachineRef; nodeName: string; options: DrainOptions }): Promise<DrainResult>;
  upgradeNode(input: NodeUpgradeInput): Promise<{ message: string }>;
  waitForNodeVersion(input: {
    cluster: MachineRef;
    nodeName: string;
    version: string;
    timeoutMs: number;
  }): Promise<void>;
  markNodeFailed(input: { cluster: MachineRef; nodeName: string; reason: string }): Promise<void>;
}
