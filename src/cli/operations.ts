// What the operator CLI does, as functions over a Temporal client (the CLI's
// own entry point only parses arguments and prints). Everything here is what
// `temporal workflow list/query/signal` would do, by cluster name instead of
// workflow id.
import { WorkflowNotFoundError, type Client, type WorkflowExecutionInfo } from '@temporalio/client';
import { type ClusterUpgradeMemo, type ClusterUpgradeStatus, type UpgradePhase } from '../model/cluster-upgrade.ts';
import type { MachineUpdateStatus } from '../model/machine-update.ts';
import {
  abortSignal,
  clusterUpgradeStatusQuery,
  machineUpdateStatusQuery,
  resumeSignal,
  retrySignal,
} from '../workflows/messages.ts';
import {
  ClusterName,
  ClusterNamespace,
  MachineName,
  TargetVersion,
  UpgradePhase as PhaseKey,
} from '../model/search-attributes.ts';
import { workflowTypes } from '../model/workflow-types.ts';
import { machineUpdateHold } from './held.ts';
import { clusterUpgradeMemo, readMemo } from '../platform/temporal/memo.ts';

export interface ClusterKey {
  namespace: string;
  name: string;
}

/** `<namespace>/<name>`, both Kubernetes names. */
export function parseClusterKey(arg: string | undefined): ClusterKey {
  const m = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?)\/([a-z0-9]([-.a-z0-9]*[a-z0-9])?)$/.exec(arg ?? '');
  if (!m) throw new UsageError(`expected <namespace>/<cluster>, got ${JSON.stringify(arg ?? '')}`);
  return { namespace: m[1]!, name: m[3]! };
}

export class UsageError extends Error {}

/** Visibility query values are single-quoted strings: names never hold quotes, but be exact anyway. */
export const quote = (v: string) => `'${v.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;

export interface UpgradeRow {
  cluster: string;
  targetVersion: string;
  phase: string;
  status: string;
  workflowId: string;
  runId: string;
  startTime: string;
  closeTime?: string;
}

function row(wf: WorkflowExecutionInfo): UpgradeRow {
  return {
    cluster: `${wf.typedSearchAttributes.get(ClusterNamespace) ?? '?'}/${wf.typedSearchAttributes.get(ClusterName) ?? '?'}`,
    targetVersion: wf.typedSearchAttributes.get(TargetVersion) ?? '',
    phase: wf.typedSearchAttributes.get(PhaseKey) ?? '',
    status: wf.status.name,
    workflowId: wf.workflowId,
    runId: wf.runId,
    startTime: wf.startTime.toISOString(),
    ...(wf.closeTime ? { closeTime: wf.closeTime.toISOString() } : {}),
  };
}

async function collect(client: Client, query: string, limit: number): Promise<UpgradeRow[]> {
  const rows: UpgradeRow[] = [];
  for await (const wf of client.workflow.list({ query, pageSize: Math.min(limit, 1_000) })) {
    rows.push(row(wf));
    if (rows.length >= limit) break;
  }
  return rows;
}

/** Cluster upgrades by search attributes: running ones unless `all`; filtered by phase and namespace. */
export async function listUpgrades(
  client: Client,
  filter: { phase?: UpgradePhase; namespace?: string; all?: boolean; limit?: number },
): Promise<UpgradeRow[]> {
  const parts = [`WorkflowType = '${workflowTypes.clusterUpgrade}'`];
  if (!filter.all) parts.push("ExecutionStatus = 'Running'");
  if (filter.phase) parts.push(`CapiUpgradePhase = ${quote(filter.phase)}`);
  if (filter.namespace) parts.push(`CapiClusterNamespace = ${quote(filter.namespace)}`);
  return await collect(client, parts.join(' AND '), filter.limit ?? 500);
}

/** Every run for one cluster, newest first (a recreated cluster or a replaced run has several). */
export async function upgradeRuns(client: Client, cluster: ClusterKey): Promise<UpgradeRow[]> {
  const query = [
    `WorkflowType = '${workflowTypes.clusterUpgrade}'`,
    `CapiClusterNamespace = ${quote(cluster.namespace)}`,
    `CapiClusterName = ${quote(cluster.name)}`,
  ].join(' AND ');
  const rows = await collect(client, query, 200);
  return rows.sort((a, b) => b.startTime.localeCompare(a.startTime));
}

async function latestRun(client: Client, cluster: ClusterKey): Promise<UpgradeRow> {
  const [latest] = await upgradeRuns(client, cluster);
  if (!latest) throw new UsageError(`no upgrade found for cluster ${cluster.namespace}/${cluster.name}`);
  return latest;
}

export interface MachineUpdateRow {
  machine: string;
  phase: string;
  status: string;
  message?: string;
  /** The machine update's gate that holds it now (blocking pods, post-update delay). */
  held?: string;
  workflowId: string;
}

export interface UpgradeReport {
  run: UpgradeRow;
  /** The full status (a worker answered the query), else what the memo holds. */
  status?: ClusterUpgradeStatus;
  memo?: ClusterUpgradeMemo;
  machineUpdates: MachineUpdateRow[];
}

/** The latest upgrade of a cluster: phase, gates, conditions (which name blocking pods and PDBs), machine updates. */
export async function upgradeStatus(client: Client, cluster: ClusterKey): Promise<UpgradeReport> {
  const run = await latestRun(client, cluster);
  const handle = client.workflow.getHandle(run.workflowId, run.runId);
  let status: ClusterUpgradeStatus | undefined;
  let memo: ClusterUpgradeMemo | undefined;
  try {
    // A query needs a worker; a few seconds at most, then the memo (always there) answers.
    status = await client.connection.withDeadline(Date.now() + 5_000, () => handle.query(clusterUpgradeStatusQuery));
  } catch {
    memo = readMemo(clusterUpgradeMemo, (await handle.describe()).memo);
  }
  const machineUpdates: MachineUpdateRow[] = [];
  const query = [
    `WorkflowType = '${workflowTypes.machineUpdate}'`,
    "ExecutionStatus = 'Running'",
    `CapiClusterNamespace = ${quote(cluster.namespace)}`,
    `CapiClusterName = ${quote(cluster.name)}`,
  ].join(' AND ');
  for await (const wf of client.workflow.list({ query, pageSize: 200 })) {
    let state: MachineUpdateStatus | undefined;
    try {
      state = await client.connection.withDeadline(Date.now() + 2_000, () =>
        client.workflow.getHandle(wf.workflowId).query(machineUpdateStatusQuery),
      );
    } catch {
      // No worker: the search attribute still says the phase.
    }
    const held = machineUpdateHold(state);
    machineUpdates.push({
      machine: `${cluster.namespace}/${wf.typedSearchAttributes.get(MachineName) ?? '?'}`,
      phase: state?.phase ?? wf.typedSearchAttributes.get(PhaseKey) ?? '',
      status: wf.status.name,
      ...(state?.message ? { message: state.message } : {}),
      ...(held ? { held } : {}),
      workflowId: wf.workflowId,
    });
  }
  return { run, ...(status ? { status } : {}), ...(memo ? { memo } : {}), machineUpdates };
}

export type Control = 'abort' | 'resume' | 'retry';

/** The upgrade's phase now: its status query (a worker answers within a few seconds), else its memo, else the search attribute. */
async function currentPhase(client: Client, run: UpgradeRow): Promise<string> {
  const handle = client.workflow.getHandle(run.workflowId, run.runId);
  try {
    return (await client.connection.withDeadline(Date.now() + 5_000, () => handle.query(clusterUpgradeStatusQuery)))
      .phase;
  } catch {
    const memo = readMemo(clusterUpgradeMemo, (await handle.describe()).memo);
    return memo?.phase ?? run.phase;
  }
}

/** Signals the latest run of the cluster's upgrade; returns its workflow id. */
export async function controlUpgrade(
  client: Client,
  cluster: ClusterKey,
  control: Control,
  reason?: string,
  /** How the operator ran the CLI, for the command a refusal names. */
  program = 'capi-upgrades',
): Promise<UpgradeRow> {
  const run = await latestRun(client, cluster);
  const key = `${cluster.namespace}/${cluster.name}`;
  if (run.status !== 'RUNNING') throw new UsageError(`the latest upgrade of ${key} is ${run.status}, not running`);
  const handle = client.workflow.getHandle(run.workflowId);
  if (control === 'retry') {
    // The workflow takes a retry only while Failed (src/workflows/cluster-upgrade/state.ts, onRetry): say so
    // here rather than "retry sent" for a signal it will ignore.
    const phase = await currentPhase(client, run);
    if (phase === 'Aborted')
      throw new UsageError(
        `the upgrade of ${key} is Aborted: retry only runs a failed step again and cannot undo an abort; to continue: ${program} resume ${key}`,
      );
    if (phase !== 'Failed')
      throw new UsageError(`the upgrade of ${key} is ${phase || 'not Failed'}: retry only runs a failed step again`);
  }
  if (control === 'resume') {
    // The workflow takes a resume only while Aborted or Failed (state.ts, onResume): anything else would be
    // "resume sent" for a signal it ignores.
    const phase = await currentPhase(client, run);
    if (phase !== 'Aborted' && phase !== 'Failed')
      throw new UsageError(
        `the upgrade of ${key} is ${phase || 'running'}: resume only continues an aborted or failed upgrade`,
      );
  }
  try {
    if (control === 'abort') await handle.signal(abortSignal, { reason: reason ?? 'aborted by operator' });
    if (control === 'resume') await handle.signal(resumeSignal);
    if (control === 'retry') await handle.signal(retrySignal);
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) throw new UsageError(`upgrade ${run.workflowId} is no longer running`);
    throw err;
  }
  return run;
}
