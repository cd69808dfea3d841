// The machine update's data model: plain JSON types and pure helpers shared by
// the api, the workflows and the activities (no Temporal imports).
import type { UpgradeCondition } from './cluster-upgrade.ts';

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

export function machineUpdateWorkflowId(machine: { namespace: string; name: string }, specHash: string): string {
  return `machine-update/${machine.namespace}/${machine.name}/${specHash}`;
}
