// What the machine update activities share across node.ts, drain/ and executors/:
// the failure types they raise, the checkpoint the waiting activities heartbeat,
// the labels on what they create in the workload cluster, and a few small text
// helpers. Kept apart so those modules need not import one another (or the
// entry point, machine-update.ts, which composes them).
import type { KubeConfig } from '@kubernetes/client-node';
import type { MachineRef } from './machine-update-types.ts';
import { MACHINE_DELETED, NODE_AGENT_MISSING, NODE_UPGRADE_REFUSED } from '../model/machine-update.ts';

export { truncate } from '../domain/strings.ts';

/** Types of the ApplicationFailures raised by the machine update activities. */
export const MACHINE_UPDATE_FAILURES = {
  machineNotFound: 'MachineNotFound',
  machineHasNoNode: 'MachineHasNoNode',
  machineHasNoCluster: 'MachineHasNoCluster',
  nodeNotFound: 'NodeNotFound',
  nodeBeingDeleted: 'NodeBeingDeleted',
  nodeNotReady: 'NodeNotReady',
  /** DiskPressure or PIDPressure: its kubelet rejects new pods. */
  nodeUnderPressure: 'NodeUnderPressure',
  /** Its MachineDeployment or control plane has as many machines out as maxUnavailable allows. */
  maxUnavailableReached: 'MaxUnavailableReached',
  drainBlocked: 'DrainBlocked',
  drainTimeout: 'DrainTimeout',
  nodeAgentFailed: 'NodeAgentFailed',
  /** No agent took the NodeUpgradeRequest: the node was not touched. */
  nodeAgentMissing: NODE_AGENT_MISSING,
  /** The Machine is gone or being deleted (scale-down, remediation): the update stops as aborted. */
  machineDeleted: MACHINE_DELETED,
  nodeUpgradeJobFailed: 'NodeUpgradeJobFailed',
  nodeUpgradeTimeout: 'NodeUpgradeTimeout',
  nodeVersionTimeout: 'NodeVersionTimeout',
  invalidInput: 'InvalidNodeUpgrade',
  /** upgradeNode's invalidInput before its executor created anything: the node was not touched. */
  nodeUpgradeRefused: NODE_UPGRADE_REFUSED,
} as const;

/** Throws a non-retryable {@link MACHINE_UPDATE_FAILURES.machineDeleted} when the Machine is gone or being deleted. */
export type MachineDeletionCheck = (machine: MachineRef) => Promise<void>;

/** A workload cluster's KubeConfig, by the Cluster API Cluster it belongs to. */
export type WorkloadKubeConfig = (cluster: MachineRef) => Promise<KubeConfig>;

/** Label on NodeUpgradeRequests and upgrade Jobs: the node they are for. */
export const NODE_NAME_LABEL = 'upgrades.capi-orchestrator.io/node-name';
export const MANAGED_BY_LABEL = 'app.kubernetes.io/managed-by';
export const MANAGED_BY = 'capi-upgrade-orchestrator';

/** What upgradeNode and waitForNodeVersion heartbeat. */
export interface WaitCheckpoint {
  startedAtMs: number;
  /** What was last seen: request phase, Job state, or kubelet version and readiness. */
  observed: string;
}

/** What an executor's object says when read: done, or what was seen (failures are thrown as ApplicationFailures). */
export type NodeUpgradeVerdict = { done: true; message: string } | { done: false; observed: string };

/**
 * One node upgrade through an executor: `ensure` creates its object (idempotent), `check` reads it
 * once, `changes` calls back whenever the object changes (so the waiter reads it then, not at its
 * next poll) until the returned function is called.
 */
export interface NodeUpgradeExecution {
  ensure(): Promise<void>;
  check(startedAtMs: number): Promise<NodeUpgradeVerdict>;
  changes(onChange: () => void): () => void;
}

/** The label selector of every object the executors create. */
export const MANAGED_BY_SELECTOR = `${MANAGED_BY_LABEL}=${MANAGED_BY}`;

export function waitCheckpoint(details: unknown): WaitCheckpoint | undefined {
  if (!isRecord(details) || typeof details.startedAtMs !== 'number') return undefined;
  return { startedAtMs: details.startedAtMs, observed: typeof details.observed === 'string' ? details.observed : '' };
}

export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export function seconds(ms: number): string {
  return `${Math.round(ms / 100) / 10}s`;
}

const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

/** The label `key`=`value`, or none when `value` is no valid label value (names may be longer than 63). */
export function labelIfValid(key: string, value: string): Record<string, string> {
  return value.length <= 63 && LABEL_VALUE.test(value) ? { [key]: value } : {};
}

/** The {@link NODE_NAME_LABEL} label, or none when the node name is no valid label value. */
export function nodeLabel(nodeName: string): Record<string, string> {
  return labelIfValid(NODE_NAME_LABEL, nodeName);
}
