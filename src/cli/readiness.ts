// `capi-upgrades readiness <namespace>/<cluster> --to <version>`: runs the
// readiness workflow (so the run and what each check read are in the Web UI)
// and prints its report as a table. Exit 1 when a check is Blocked, 3 when none
// is but one could not tell (Unknown), 0 when every check is Ready.
import { WorkflowFailedError, type Client } from '@temporalio/client';
import type { ReadinessReport } from '../domain/readiness.ts';
import { tryParseVersion } from '../domain/versions.ts';
import { readinessWorkflowId, type ReadinessInput } from '../model/readiness.ts';
import { ClusterName, ClusterNamespace, TargetVersion } from '../model/search-attributes.ts';
import { workflowTypes } from '../model/workflow-types.ts';
import { UsageError, type ClusterKey } from './operations.ts';
import { table } from './table.ts';

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
  const { cluster, targetVersion } = input;
  try {
    return (await client.workflow.execute(workflowTypes.readiness, {
      workflowId: readinessWorkflowId(cluster, targetVersion),
      taskQueue,
      args: [input],
      workflowIdConflictPolicy: 'USE_EXISTING',
      // Reads only: a run that cannot finish in this time is ended rather than left waiting.
      workflowExecutionTimeout: '10 minutes',
      typedSearchAttributes: [
        { key: ClusterNamespace, value: cluster.namespace },
        { key: ClusterName, value: cluster.name },
        { key: TargetVersion, value: targetVersion },
      ],
    })) as ReadinessReport;
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
