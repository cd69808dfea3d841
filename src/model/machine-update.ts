// The machine update's data model: plain JSON types and pure helpers shared by
// the api, the workflows and the activities (no Temporal imports).
import type { UpgradeCondition } from './cluster-upgrade.ts';

/** Where management-executor node upgraders renew their Leases unless NODE_UPGRADER_NAMESPACE says otherwise. */
export const DEFAULT_NODE_UPGRADER_NAMESPACE = 'capi-upgrade-orchestrator-system';

export type MachineUpdateStep =
  | 'Queued'
  | 'Preflight'
  | 'BlockingPods'
  | 'Cordon'
  | 'Drain'
  | 'UpgradeNode'
  | 'WaitForNode'
  | 'Uncordon'
  | 'PostUpdateDelay'
  | 'Done';
export type MachineUpdatePhase = 'Updating' | 'Succeeded' | 'Failed' | 'Aborted';

export interface MachineUpdateInput {
  machine: { namespace: string; name: string };
  clusterName: string;
  version: string;
  /** v1 only: the desired bootstrap files inline (secrets in history). v2 passes `bootstrapConfig`. */
  files?: unknown[];
  /**
   * The desired KubeadmConfig in the management cluster (CAPI applies it before calling
   * UpdateMachine): activities read its files there, so no file content enters history.
   */
  bootstrapConfig?: { namespace: string; name: string };
  specHash: string;
  executor: 'delegate' | 'job' | 'management';
  /** management executor: the infrastructure machine and bootstrap config as CAPI sent them, for the request's spec. */
  objectRefs?: MachineObjectRefs;
  pdbForceDrainTimeoutMs?: number;
  /** Label selector of pods the drain leaves alone (setting drainSkipPodSelector; the Cluster annotation wins). */
  drainSkipPodSelector?: string;
  deleteEmptyDirData: boolean;
  forceDrainUnmanagedPods: boolean;
  drainTimeoutMs: number;
  nodeUpgradeTimeoutMs: number;
  /** First wait before a failed update may start over (v2; default 1 minute). */
  retryBackoffMs?: number;
  /** How long the preflight waits for a Ready node and room under maxUnavailable (unset: the activity's own retries). */
  preflightTimeoutMs?: number;
  /** Machines of the cluster updating at once, held by the cluster's slots workflow; 0 or unset = no limit. */
  maxConcurrentMachineUpdates?: number;
  /** Hold before the cordon while pods matching this label selector run on the node (setting blockingPodSelector). */
  blockingPodSelector?: string;
  /** How long that hold lasts before the update fails (default 30m). */
  blockingPodTimeoutMs?: number;
  /** Wait after the node is given back, before the update reports done and frees its place (setting postUpdateDelay). */
  postUpdateDelayMs?: number;
  /** Started by the cluster's slots workflow when it let this update in: it holds a slot from its first step. */
  startedWithSlot?: boolean;
  /** Started by the slots workflow only to record an abort that came while the update was queued. */
  abortedWhileQueued?: string;
}

/** `{apiVersion, kind, name}` of an object in the Machine's namespace. */
export interface TypedObjectRef {
  apiVersion: string;
  kind: string;
  name: string;
}

/** The objects of a Machine an upgrader in the management cluster reads (NodeUpgradeRequest spec refs). */
export interface MachineObjectRefs {
  infrastructureMachine?: TypedObjectRef;
  bootstrapConfig?: TypedObjectRef;
}

export interface MachineUpdateStatus {
  machine: { namespace: string; name: string };
  version: string;
  phase: MachineUpdatePhase;
  step: MachineUpdateStep;
  /** Deterministic for a given state: UpdateMachine answers it. */
  message: string;
  nodeName?: string;
  /** The node was unschedulable before we came: never uncordon it. */
  wasCordoned?: boolean;
  upgraded: boolean;
  reason?: string;
  abortRequested?: string;
  /** 1 for the first try; each retry after a failure starts over from the preflight. */
  attempt?: number;
  /** Failed: UpdateMachine called after this starts a retry. */
  retryNotBefore?: string;
  /** Failed: a retry was asked for (the api signalled once). */
  retryRequested?: boolean;
  /** Step BlockingPods: what holds the node (the selector as quoted, with its source, and the pods last seen). */
  blockingPods?: { selector: string; count: number; first?: string };
  /** Step PostUpdateDelay: when the delay after the node ends. */
  delayUntil?: string;
  steps: UpgradeCondition[];
}

export const MACHINE_UPDATE_MEMO_KEY = 'machineUpdate';

/** What a running machine update says; the api answers the first one before the workflow has run. */
export function machineUpdateMessage(
  machine: { namespace: string; name: string },
  version: string,
  detail: string,
): string {
  return `updating machine ${machine.namespace}/${machine.name} to ${version}: ${detail}`;
}

/** Failure type raised when the Machine is being deleted: the workflow ends the update as aborted. */
export const MACHINE_DELETED = 'MachineDeleted';

/** Failure type of an update no node agent took: the node was not touched (activities raise it, the workflow reads it). */
export const NODE_AGENT_MISSING = 'NodeAgentMissing';

/**
 * Failure type of a node upgrade refused before its executor created anything (no pinned checksums,
 * bootstrap files over their limits): the node was not touched.
 */
export const NODE_UPGRADE_REFUSED = 'NodeUpgradeRefused';

/** What a failed attempt says, before how it will be retried: the workflow and the api both spell it here. */
export function machineUpdateFailure(
  machine: { namespace: string; name: string },
  version: string,
  step: MachineUpdateStep,
  reason: string,
): string {
  return `update of machine ${machine.namespace}/${machine.name} to ${version} failed at ${step}: ${reason}`;
}

/**
 * What an update aborted after its node upgrade started says (the node's state is unknown: it is
 * not given back). Final for the desired spec, like any abort.
 */
export function machineUpdateAbortedAfterExecutor(
  machine: { namespace: string; name: string },
  version: string,
  nodeName: string,
  reason: string,
): string {
  return (
    `update of machine ${machine.namespace}/${machine.name} to ${version} aborted after the node upgrade started: ` +
    `node ${nodeName} stays cordoned and marked InPlaceUpdateFailed (${reason})`
  );
}

export interface MachineUpdateMemo {
  phase: MachineUpdatePhase;
  step: MachineUpdateStep;
  message: string;
  reason?: string;
  abortRequested?: string;
  retryNotBefore?: string;
  retryRequested?: boolean;
}

export function machineUpdateWorkflowId(machine: { namespace: string; name: string }, specHash: string): string {
  return `machine-update/${machine.namespace}/${machine.name}/${specHash}`;
}

/**
 * A place asked of the cluster's slots workflow (maxConcurrentMachineUpdates), either by
 * a running machine update run (`runId`: told with `slotGranted`), or by the api for an
 * update not started yet (`start`: the slots workflow starts the run when it lets it in,
 * so a queued update costs nothing until its turn).
 */
export interface MachineUpdateSlotRequest {
  workflowId: string;
  /** The run that asked; for `start` requests, set once the slots workflow started it. */
  runId?: string;
  /** The limit in force when asked (settings may change; the latest ask wins). */
  limit: number;
  /** The update to start when let in. */
  start?: MachineUpdateInput;
  /** The api saw an earlier run with this id that ended without an answer (terminated): a new run may reuse the id. */
  restart?: boolean;
}

/** Abort of queued updates, sent to the slots workflow (`abort`, as to any workflow of ours). */
export interface MachineUpdateSlotsAbortInput {
  reason?: string;
  /** Cluster deletion: abort every queued update, then end once no update holds a slot. */
  final?: boolean;
  /** Only this queued update (its machine update workflow id); unset = every queued update. */
  workflowId?: string;
}

export interface MachineUpdateSlotsInput {
  cluster: { namespace: string; name: string };
  limit: number;
  /** Runs holding a slot, oldest first (carried over continue-as-new). */
  holders: MachineUpdateSlotRequest[];
  /** Runs waiting, first come first served. */
  waiting: MachineUpdateSlotRequest[];
  /** How often holders are checked for runs that ended without giving their slot back (default 2 minutes). */
  livenessCheckMs?: number;
  /** Carried over continue-as-new: the workflow ids of the runs started last (a late ask for one is ignored). */
  started?: string[];
  /** Carried over continue-as-new: the final abort (cluster deletion) that came. */
  abortRequested?: string;
}

export interface MachineUpdateSlotsStatus {
  limit: number;
  holders: string[];
  waiting: string[];
  /** An abort with `final` came (cluster deletion): queued updates are aborted as they come. */
  abortRequested?: string;
}

/** The slots workflow's memo: what BeforeClusterDelete reads to signal its abort once. */
export const MACHINE_UPDATE_SLOTS_MEMO_KEY = 'machineUpdateSlots';
export interface MachineUpdateSlotsMemo {
  abortRequested?: string;
}

export function machineUpdateSlotsWorkflowId(cluster: { namespace: string; name: string }): string {
  return `machine-update-slots/${cluster.namespace}/${cluster.name}`;
}

/** What a machine update waiting for a slot says: deterministic (no position or count that changes). */
export function machineUpdateQueuedDetail(clusterName: string, limit: number): string {
  return `waiting: ${limit} machine(s) of cluster ${clusterName} are updating (maxConcurrentMachineUpdates)`;
}
