// Signals, queries, updates and the plain-JSON state they carry: imported by
// the workflows, the api and the tests, so each name is spelled once.
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import type { UpgradePolicy } from '../domain/upgrade-policy.ts';

/** Operator abort: `temporal workflow signal --workflow-id … --name abort --input '{"reason":"…"}'`. */
export interface AbortInput {
  reason?: string;
  /** No resume afterwards: the workflow cleans up and ends (cluster deletion). */
  final?: boolean;
}

export const abortSignal = defineSignal<[AbortInput?]>('abort');
/** Operator resume after an abort or a failure: `temporal workflow signal --workflow-id … --name resume`. */
export const resumeSignal = defineSignal<[]>('resume');

// ---- cluster upgrades ---------------------------------------------------------

export interface ClusterRef {
  namespace: string;
  name: string;
}

/** The lifecycle hooks an upgrade workflow gates. */
export type UpgradeHook =
  | 'BeforeClusterUpgrade'
  | 'BeforeControlPlaneUpgrade'
  | 'AfterControlPlaneUpgrade'
  | 'BeforeWorkersUpgrade'
  | 'AfterWorkersUpgrade'
  | 'AfterClusterUpgrade';

export const upgradeHooks: readonly UpgradeHook[] = [
  'BeforeClusterUpgrade',
  'BeforeControlPlaneUpgrade',
  'AfterControlPlaneUpgrade',
  'BeforeWorkersUpgrade',
  'AfterWorkersUpgrade',
  'AfterClusterUpgrade',
];

/** One hook call as the workflow records it: which hook, for which step version. */
export interface HookCall {
  hook: UpgradeHook;
  /** The version the call is about (the step's target, or the version just reached). */
  version: string;
  /** The whole upgrade's target (Cluster spec.topology.version). */
  targetVersion: string;
  /** Current control plane version when known (BeforeClusterUpgrade's from). */
  fromVersion?: string;
  controlPlaneUpgrades?: string[];
  workersUpgrades?: string[];
  /** Policy as resolved for this call; the workflow adopts the newest. */
  policy: UpgradePolicy;
}

export type GateState = 'Waiting' | 'Open' | 'Failed';

/** What a hook answers for one `hook@version`: all CAPI ever sees of the workflow. */
export interface Gate {
  state: GateState;
  /** Deterministic for a given state: CAPI copies it into conditions. */
  message: string;
  retryAfterSeconds: number;
}

export function gateKey(hook: UpgradeHook, version: string): string {
  return `${hook}@${version}`;
}

/** How often CAPI should come back while a gate is closed. */
export const GATE_RETRY_AFTER_SECONDS = 10;

/** The gate of a call just recorded: the api answers it before the workflow has run, so both spell it here. */
export function queuedGate(call: Pick<HookCall, 'hook' | 'version'>): Gate {
  return {
    state: 'Waiting',
    message: `${call.hook} ${call.version}: queued behind the steps before it`,
    retryAfterSeconds: GATE_RETRY_AFTER_SECONDS,
  };
}

export type UpgradePhase = 'Pending' | 'Upgrading' | 'Upgraded' | 'Failed' | 'Aborted';

export type ConditionStatus = 'True' | 'False' | 'Unknown';

/** One step's condition, after managed-upgrade-operator's UpgradeConfig status. */
export interface UpgradeCondition {
  type: string;
  status: ConditionStatus;
  reason: string;
  message: string;
  startTime?: string;
  completeTime?: string;
  lastProbeTime?: string;
  lastTransitionTime?: string;
}

export interface VersionHistory {
  version: string;
  phase: UpgradePhase;
  startTime?: string;
  completeTime?: string;
  conditions: UpgradeCondition[];
}

export interface ReservedCapacity {
  /** MachineDeployment topology name (or object name) → replicas before and during the reservation. */
  machineDeployment: string;
  originalReplicas: number;
  reservedReplicas: number;
}

/** The `status` query: the whole story of one upgrade. */
export interface ClusterUpgradeStatus {
  cluster: ClusterRef;
  fromVersion?: string;
  targetVersion: string;
  phase: UpgradePhase;
  /** Why the upgrade failed or was aborted. */
  reason?: string;
  startTime: string;
  completeTime?: string;
  /** Cluster-wide steps: Scheduled, PreHealthCheck, ScaleUpExtraNodes, RemoveExtraNodes, PostHealthCheck. */
  conditions: UpgradeCondition[];
  /** One entry per version the cluster passes through. */
  history: VersionHistory[];
  gates: Record<string, Gate>;
  reservedCapacity: ReservedCapacity[];
  policy: UpgradePolicy;
}

/** The memo: what hook handlers read with `describe`, without a worker and without adding history. */
export interface ClusterUpgradeMemo {
  targetVersion: string;
  phase: UpgradePhase;
  reason?: string;
  abortRequested?: string;
  gates: Record<string, Gate>;
}

export const CLUSTER_UPGRADE_MEMO_KEY = 'upgrade';

export interface ClusterUpgradeInput {
  cluster: ClusterRef;
  /** The call that started it (recorded like any later call). */
  firstCall: HookCall;
  /** Set when a run continues as new: the state to pick up. */
  carried?: ClusterUpgradeStatus;
  carriedQueue?: HookCall[];
}

export const clusterUpgradeStatusQuery = defineQuery<ClusterUpgradeStatus>('status');
/** A hook call that brings something new; the validator rejects repeats, which leaves no history. */
export const recordHookUpdate = defineUpdate<Gate, [HookCall]>('recordHook');

export function clusterUpgradeWorkflowId(cluster: ClusterRef): string {
  return `cluster-upgrade/${cluster.namespace}/${cluster.name}`;
}

// ---- machine updates ----------------------------------------------------------

export type MachineUpdateStep = 'Preflight' | 'Cordon' | 'Drain' | 'UpgradeNode' | 'WaitForNode' | 'Uncordon' | 'Done';
export type MachineUpdatePhase = 'Updating' | 'Succeeded' | 'Failed' | 'Aborted';

export interface MachineUpdateInput {
  machine: { namespace: string; name: string };
  clusterName: string;
  version: string;
  files: unknown[];
  specHash: string;
  executor: 'delegate' | 'job';
  pdbForceDrainTimeoutMs?: number;
  deleteEmptyDirData: boolean;
  forceDrainUnmanagedPods: boolean;
  drainTimeoutMs: number;
  nodeUpgradeTimeoutMs: number;
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

export interface MachineUpdateMemo {
  phase: MachineUpdatePhase;
  step: MachineUpdateStep;
  message: string;
  reason?: string;
  abortRequested?: string;
}
export const machineUpdateStatusQuery = defineQuery<MachineUpdateStatus>('status');
/** On-call: stop draining and go on with the upgrade. */
export const skipDrainSignal = defineSignal<[]>('skipDrain');
/** On-call: delete PDB-blocked pods now instead of waiting for pdbForceDrainTimeout. */
export const forceDrainSignal = defineSignal<[]>('forceDrain');

export function machineUpdateWorkflowId(machine: { namespace: string; name: string }, specHash: string): string {
  return `machine-update/${machine.namespace}/${machine.name}/${specHash}`;
}
