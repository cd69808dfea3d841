// Machine update policy from ExtensionConfig settings (the in-place hooks
// carry no Cluster, so there are no annotations to read).
import { parseSkipPodSelector } from './drain.ts';
import { parseGoDuration } from './durations.ts';
import { parseNodePacing, type NodePacing } from './node-pacing.ts';
import { valueOverLimit } from './policy-keys.ts';

/** Who applies an update on the node (docs/node-upgrade-request.md, docs/node-upgrade-job.md). */
export type NodeUpgradeExecutor = 'delegate' | 'job' | 'management';
export const NODE_UPGRADE_EXECUTORS: readonly NodeUpgradeExecutor[] = ['delegate', 'job', 'management'];

export interface MachineUpdatePolicy {
  executor: NodeUpgradeExecutor;
  pdbForceDrainTimeoutMs?: number;
  /** Label selector of pods the drain leaves alone (validated; unset = none). */
  drainSkipPodSelector?: string;
  drainTimeoutMs: number;
  nodeUpgradeTimeoutMs: number;
  deleteEmptyDirData: boolean;
  forceDrainUnmanagedPods: boolean;
  /** Machines of one cluster updating at once; 0 = no limit. */
  maxConcurrentMachineUpdates: number;
  /** First wait before a failed update may start over; doubles per failure, at most 30×. */
  retryBackoffMs: number;
  /** How long the preflight waits for a Ready node and room under maxUnavailable before failing. */
  preflightTimeoutMs: number;
  /** Blocking pod selector and delay after each node (node-pacing.ts); the Cluster's annotations win. */
  pacing: NodePacing;
}

export const machineUpdateSettings = {
  executor: 'nodeUpgradeExecutor',
  pdbForceDrainTimeout: 'pdbForceDrainTimeout',
  drainTimeout: 'drainTimeout',
  nodeUpgradeTimeout: 'nodeUpgradeTimeout',
  deleteEmptyDirData: 'deleteEmptyDirData',
  forceDrainUnmanagedPods: 'forceDrainUnmanagedPods',
  maxConcurrentMachineUpdates: 'maxConcurrentMachineUpdates',
  retryBackoff: 'machineUpdateRetryBackoff',
  preflightTimeout: 'preflightTimeout',
  drainSkipPodSelector: 'drainSkipPodSelector',
} as const;

export type MachineUpdatePolicyResult = { ok: true; policy: MachineUpdatePolicy } | { ok: false; message: string };

export function resolveMachineUpdatePolicy(settings: Readonly<Record<string, string>> = {}): MachineUpdatePolicyResult {
  const problems: string[] = [];
  const get = (key: string) => {
    const tooLong = valueOverLimit(`setting ${key}`, key, settings[key] ?? '');
    if (tooLong !== undefined) {
      problems.push(tooLong);
      return undefined;
    }
    const v = settings[key]?.trim();
    return v === undefined || v === '' ? undefined : v;
  };
  const duration = (key: string, fallback: number | undefined): number | undefined => {
    const v = get(key);
    if (v === undefined) return fallback;
    const ms = parseGoDuration(v);
    if (ms === undefined) problems.push(`setting ${key}=${JSON.stringify(v)}: not a duration (use e.g. 30m, 2h)`);
    return ms ?? fallback;
  };
  const bool = (key: string): boolean => {
    const v = get(key);
    if (v === undefined) return false;
    if (v === 'true' || v === 'false') return v === 'true';
    problems.push(`setting ${key}=${JSON.stringify(v)}: expected true or false`);
    return false;
  };
  // `job` by default: it needs nothing on the node, so a default never waits on an agent that isn't there.
  const executor = get(machineUpdateSettings.executor) ?? 'job';
  const known = NODE_UPGRADE_EXECUTORS.find((e) => e === executor);
  if (known === undefined)
    problems.push(
      `setting ${machineUpdateSettings.executor}=${JSON.stringify(executor)}: expected delegate, job or management`,
    );
  const limitText = get(machineUpdateSettings.maxConcurrentMachineUpdates) ?? '0';
  const limit = Number(limitText);
  if (!Number.isInteger(limit) || limit < 0)
    problems.push(
      `setting ${machineUpdateSettings.maxConcurrentMachineUpdates}=${JSON.stringify(limitText)}: expected a whole number (0 = no limit)`,
    );
  const pdb = duration(machineUpdateSettings.pdbForceDrainTimeout, undefined);
  const skipText = get(machineUpdateSettings.drainSkipPodSelector);
  if (skipText !== undefined) {
    const skip = parseSkipPodSelector(`setting ${machineUpdateSettings.drainSkipPodSelector}`, skipText);
    if (!skip.ok) problems.push(skip.message);
  }
  const pacing = parseNodePacing(settings, 'setting');
  if (!pacing.ok) problems.push(pacing.message);
  const policy: MachineUpdatePolicy = {
    executor: known ?? 'delegate',
    drainTimeoutMs: duration(machineUpdateSettings.drainTimeout, 30 * 60_000) ?? 30 * 60_000,
    nodeUpgradeTimeoutMs: duration(machineUpdateSettings.nodeUpgradeTimeout, 30 * 60_000) ?? 30 * 60_000,
    deleteEmptyDirData: bool(machineUpdateSettings.deleteEmptyDirData),
    forceDrainUnmanagedPods: bool(machineUpdateSettings.forceDrainUnmanagedPods),
    maxConcurrentMachineUpdates: Number.isInteger(limit) && limit >= 0 ? limit : 0,
    retryBackoffMs: duration(machineUpdateSettings.retryBackoff, 60_000) ?? 60_000,
    preflightTimeoutMs: duration(machineUpdateSettings.preflightTimeout, 15 * 60_000) ?? 15 * 60_000,
    ...(pdb !== undefined ? { pdbForceDrainTimeoutMs: pdb } : {}),
    ...(skipText !== undefined ? { drainSkipPodSelector: skipText } : {}),
    pacing: pacing.ok ? pacing.pacing : {},
  };
  return problems.length ? { ok: false, message: problems.join('; ') } : { ok: true, policy };
}
