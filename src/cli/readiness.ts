// `capi-upgrades readiness <namespace>/<cluster> --to <version>`: runs the
// readiness workflow (so the run and what each check read are in the Web UI)
// and prints its report as a table. Exit 1 when a check is Blocked, 3 when none
// is but one could not tell (Unknown), 0 when every check is Ready. `--all` (or
// several clusters) runs one readiness run per Cluster and ranks the fleet.
import type * as K8s from '@kubernetes/client-node';
import { WorkflowFailedError, type Client } from '@temporalio/client';
import type { ReadinessReport } from '../domain/readiness.ts';
import { tryParseVersion } from '../domain/versions.ts';
import type { ReadinessInput } from '../model/readiness.ts';
import { executeReadiness } from '../platform/temporal/readiness-run.ts';
import { parseClusterKey, UsageError, type ClusterKey } from './operations.ts';
import { table } from './table.ts';
import { CAPI_CORE, type ClusterObject } from '../platform/kube/capi-api.ts';
import { stableError } from '../platform/kube/stable-error.ts';
import { variable } from '../config/environment.ts';

export const READINESS_USAGE = `  readiness <namespace>/<cluster> --to <version> [--setting KEY=VALUE ...]
                                 what would block an upgrade to <version> now: the plan, removed APIs,
                                 a drain simulation, version skew, health and when the calendar lets it
                                 start; read-only (exit 0 Ready, 1 Blocked, 3 Unknown). --setting: the
                                 ExtensionConfig settings to read the policy with (default: built-in)`;

/** The run's input from the command line; a bad version or setting is a usage error before connecting. */
export function readinessInput(cluster: ClusterKey, to: string | undefined, settings: string[] = []): ReadinessInput {
  if (!to) throw new UsageError('readiness: name the target version with --to, e.g. --to v1.35.0');
  if (!tryParseVersion(to).ok)
    throw new UsageError(`readiness: --to ${JSON.stringify(to)} is not a Kubernetes version`);
  const parsed: Record<string, string> = {};
  for (const s of settings) {
    const eq = s.indexOf('=');
    if (eq <= 0) throw new UsageError(`readiness: --setting ${JSON.stringify(s)}: expected KEY=VALUE`);
    parsed[s.slice(0, eq)] = s.slice(eq + 1);
  }
  return {
    cluster: { namespace: cluster.namespace, name: cluster.name },
    targetVersion: to,
    ...(settings.length > 0 ? { settings: parsed } : {}),
  };
}

/** Runs the check (joining one already running for the same cluster and target) and returns its report. */
export async function runReadiness(client: Client, taskQueue: string, input: ReadinessInput): Promise<ReadinessReport> {
  const { cluster } = input;
  try {
    return await executeReadiness(client, taskQueue, input);
  } catch (err) {
    if (err instanceof WorkflowFailedError)
      throw new UsageError(`readiness of ${cluster.namespace}/${cluster.name}: ${err.cause?.message ?? err.message}`);
    throw err;
  }
}

export function readinessText(r: ReadinessReport): string {
  return [
    `cluster:   ${r.cluster}`,
    `upgrade:   ${r.fromVersion ? `${r.fromVersion} → ` : ''}${r.targetVersion}`,
    `verdict:   ${r.verdict}`,
    '',
    table(
      r.checks.map((c) => ({ check: c.check, verdict: c.verdict, message: c.message })),
      ['check', 'verdict', 'message'],
    ),
  ].join('\n');
}

export function readinessExitCode(r: ReadinessReport): number {
  return r.verdict === 'Blocked' ? 1 : r.verdict === 'Unknown' ? 3 : 0;
}

// ---- the fleet: `readiness --all` or several clusters ----------------------------------

export const READINESS_FLEET_USAGE = `  readiness --all [--namespace NS] --to <version> [--max-concurrent N] [--setting KEY=VALUE ...]
  readiness <namespace>/<cluster> <namespace>/<cluster> ... --to <version>
                                 the same checks for every Cluster (of NS, else of every namespace,
                                 read with MANAGEMENT_KUBECONFIG, else KUBECONFIG), one readiness run
                                 each, N at a time (default 4); a table ranking them Blocked, Unknown,
                                 Ready with the first blocking check (exit 1 when any is Blocked, else
                                 3 when any is Unknown, else 0)`;

/** How many readiness runs `--all` keeps going at once by default. */
export const DEFAULT_FLEET_CONCURRENCY = 4;

/** One cluster's line: its report, or why it has none (its run failed). */
export type FleetResult = { report: ReadinessReport } | { cluster: string; error: string };

export interface FleetRow {
  cluster: string;
  verdict: ReadinessReport['verdict'];
  upgrade: string;
  /** The first Blocked check (else the first Unknown one); empty when Ready. */
  check: string;
  message: string;
}

const RANK = { Blocked: 0, Unknown: 1, Ready: 2 } as const;

function fleetRow(r: FleetResult): FleetRow {
  if (!('report' in r)) return { cluster: r.cluster, verdict: 'Unknown', upgrade: '', check: '', message: r.error };
  const { report } = r;
  const first =
    report.checks.find((c) => c.verdict === 'Blocked') ?? report.checks.find((c) => c.verdict === 'Unknown');
  return {
    cluster: report.cluster,
    verdict: report.verdict,
    upgrade: `${report.fromVersion ? `${report.fromVersion} → ` : ''}${report.targetVersion}`,
    check: first?.check ?? '',
    message: first?.message ?? '',
  };
}

/** The fleet ranked: Blocked first, then Unknown, then Ready; by cluster within each. */
export function rankFleet(results: readonly FleetResult[]): FleetRow[] {
  return results
    .map(fleetRow)
    .sort((a, b) => RANK[a.verdict] - RANK[b.verdict] || (a.cluster < b.cluster ? -1 : a.cluster > b.cluster ? 1 : 0));
}

export function fleetText(rows: readonly FleetRow[]): string {
  if (rows.length === 0) return 'no Cluster found';
  const count = (v: FleetRow['verdict']) => rows.filter((r) => r.verdict === v).length;
  return [
    `${rows.length} ${rows.length === 1 ? 'cluster' : 'clusters'}: ${count('Blocked')} Blocked, ${count('Unknown')} Unknown, ${count('Ready')} Ready`,
    '',
    table(
      rows.map((r) => ({ ...r })),
      ['cluster', 'verdict', 'upgrade', 'check', 'message'],
    ),
  ].join('\n');
}

/** 1 when any cluster is Blocked, else 3 when any is Unknown, else 0 (the single form's codes). */
export function fleetExitCode(rows: readonly FleetRow[]): number {
  if (rows.some((r) => r.verdict === 'Blocked')) return 1;
  return rows.some((r) => r.verdict === 'Unknown') ? 3 : 0;
}

/**
 * One readiness run per cluster (each its own run, in the Web UI as the single form's), at most
 * `concurrency` at once; a run that fails is that cluster's line, never the others'.
 */
export async function runFleetReadiness(
  client: Client,
  taskQueue: string,
  inputs: readonly ReadinessInput[],
  concurrency: number,
): Promise<FleetResult[]> {
  const out: FleetResult[] = new Array<FleetResult>(inputs.length);
  let next = 0;
  const lane = async () => {
    while (next < inputs.length) {
      const i = next++;
      const input = inputs[i]!;
      try {
        out[i] = { report: await runReadiness(client, taskQueue, input) };
      } catch (err) {
        if (!(err instanceof UsageError)) throw err;
        out[i] = { cluster: `${input.cluster.namespace}/${input.cluster.name}`, error: err.message };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(concurrency, inputs.length)) }, lane));
  return out;
}

/**
 * The management cluster to list Clusters from: MANAGEMENT_KUBECONFIG, else kubectl's (KUBECONFIG,
 * ~/.kube/config). The Kubernetes client is loaded here, not at the CLI's start: every other
 * command talks to Temporal only, and loading it costs each of them its start-up time.
 */
function fleetKubeConfig(kubeconfig: string | undefined, k8s: typeof K8s): K8s.KubeConfig {
  const kc = new k8s.KubeConfig();
  try {
    if (kubeconfig) kc.loadFromFile(kubeconfig);
    else kc.loadFromDefault();
  } catch (err) {
    throw new UsageError(
      `readiness --all: cannot read the management cluster's kubeconfig: ${err instanceof Error ? err.message : String(err)}`,
    );
  }
  return kc;
}

/** Every Cluster of `namespace` (of every namespace when unset), sorted: list calls only. */
export async function listClusters(
  namespace: string | undefined,
  kubeconfig: string | undefined = variable('MANAGEMENT_KUBECONFIG'),
): Promise<ClusterKey[]> {
  const k8s = await import('@kubernetes/client-node');
  const custom = fleetKubeConfig(kubeconfig, k8s).makeApiClient(k8s.CustomObjectsApi);
  const keys: ClusterKey[] = [];
  let page: string | undefined;
  try {
    do {
      const opts = { ...CAPI_CORE, plural: 'clusters', limit: 500, ...(page ? { _continue: page } : {}) };
      const list = (await (namespace
        ? custom.listNamespacedCustomObject({ ...opts, namespace })
        : custom.listClusterCustomObject(opts))) as {
        items?: ClusterObject[];
        metadata?: { continue?: string };
      };
      for (const c of list.items ?? [])
        if (c.metadata?.namespace && c.metadata.name)
          keys.push({ namespace: c.metadata.namespace, name: c.metadata.name });
      page = list.metadata?.continue || undefined;
    } while (page);
  } catch (err) {
    if (err instanceof UsageError) throw err;
    const e = stableError(err);
    throw new UsageError(`readiness --all: cannot list Clusters${namespace ? ` in ${namespace}` : ''}: ${e.message}`);
  }
  return keys.sort((a, b) =>
    a.namespace !== b.namespace ? (a.namespace < b.namespace ? -1 : 1) : a.name < b.name ? -1 : a.name > b.name ? 1 : 0,
  );
}

export interface ReadinessFleet {
  all: boolean;
  namespace?: string;
  clusters: ClusterKey[];
  concurrency: number;
}

/** `readiness --all [--namespace NS]` or several clusters; undefined for the single form. */
export function readinessFleet(
  values: { all?: boolean; namespace?: string; to?: string; setting?: string[]; 'max-concurrent'?: string },
  targets: string[],
): ReadinessFleet | undefined {
  const all = values.all === true;
  if (!all && targets.length <= 1) {
    if (values.namespace !== undefined) throw new UsageError('readiness: --namespace goes with --all');
    if (values['max-concurrent'] !== undefined) throw new UsageError('readiness: --max-concurrent goes with --all');
    return undefined;
  }
  if (all && targets.length > 0) throw new UsageError('readiness: either --all or the clusters to check, not both');
  const clusters = targets.map((t) => parseClusterKey(t));
  // The version and settings are checked once here, before anything is listed or started.
  readinessInput(clusters[0] ?? { namespace: 'default', name: 'fleet' }, values.to, values.setting);
  const raw = values['max-concurrent'];
  const concurrency = raw === undefined ? DEFAULT_FLEET_CONCURRENCY : Number(raw);
  if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 64)
    throw new UsageError(`readiness: --max-concurrent ${JSON.stringify(raw)}: expected a whole number from 1 to 64`);
  return { all, ...(values.namespace ? { namespace: values.namespace } : {}), clusters, concurrency };
}

/** Every cluster's readiness run, ranked (Blocked first). */
export async function fleetReadiness(
  client: Client,
  taskQueue: string,
  fleet: ReadinessFleet,
  to: string | undefined,
  settings: string[] | undefined,
): Promise<FleetRow[]> {
  const keys = fleet.all ? await listClusters(fleet.namespace) : fleet.clusters;
  const inputs = keys.map((k) => readinessInput(k, to, settings));
  return rankFleet(await runFleetReadiness(client, taskQueue, inputs, fleet.concurrency));
}
