// The readiness report's gate checks, each by its gate's own reader, read-only: the capacity
// reservation's plan and shortfall (capacity.ts), the in-place hooks' node agent and node upgrader
// Leases, and the alert gate's checkAlerts (alerts.ts); domain/readiness-gates.ts decides.
import type { KubeConfig } from '@kubernetes/client-node';
import type { MachineInfo } from '../domain/cluster-health.ts';
import { allowedForExecutor, DEFAULT_ALLOWED_PATHS, parseDeclaredPaths } from '../domain/in-place-policy.ts';
import { alertsCheck, capacityCheck, inPlaceCheck, type InPlaceSurvey } from '../domain/readiness-gates.ts';
import { unknownCheck, type ReadinessCheck, type ReadinessCheckName } from '../domain/readiness.ts';
import { DEFAULT_NODE_UPGRADER_NAMESPACE } from '../model/machine-update.ts';
import { createNodeAgentCheck } from '../platform/kube/node-agents.ts';
import { createNodeUpgraderCheck } from '../platform/kube/node-upgraders.ts';
import { stableError } from '../platform/kube/stable-error.ts';
import { createAlertActivities } from './alerts.ts';
import { previewCapacityReservation } from './capacity.ts';
import { DEFAULT_WORKLOAD_NAMESPACE } from './machine-update.ts';
import type { DrainSurveyInput } from './readiness-types.ts';

/** How many Leases the in-place check reads at once. */
const LEASE_READS = 8;

async function mapBounded<T, R>(items: readonly T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array<R>(items.length);
  let next = 0;
  const run = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i] as T);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, run));
  return out;
}

/** `fn`'s check, or Unknown naming what could not be read (one gate's failure is not the survey's). */
async function guarded(name: ReadinessCheckName, fn: () => Promise<ReadinessCheck>): Promise<ReadinessCheck> {
  try {
    return await fn();
  } catch (err) {
    return unknownCheck(name, `could not read: ${stableError(err).message}`);
  }
}

export interface ReadinessActivityOptions {
  /** Where the management executor's node upgraders keep their Leases; default capi-upgrade-orchestrator-system. */
  nodeUpgraderNamespace?: string;
}

export function createGateReads(management: KubeConfig, opts: ReadinessActivityOptions = {}) {
  const alerts = createAlertActivities(management);
  // The in-place hooks' own Lease checks, without their cache: the report says what is true now.
  const nodeAgents = createNodeAgentCheck({ management, namespace: DEFAULT_WORKLOAD_NAMESPACE, cacheMs: 0 });
  const nodeUpgraders = createNodeUpgraderCheck({
    management,
    namespace: opts.nodeUpgraderNamespace ?? DEFAULT_NODE_UPGRADER_NAMESPACE,
    cacheMs: 0,
  });
  const versionPath = parseDeclaredPaths(DEFAULT_ALLOWED_PATHS[0], 'the version path');

  /** What CanUpdate* would find for these nodes and machines now. */
  async function inPlaceSurvey(
    input: NonNullable<NonNullable<DrainSurveyInput['gates']>['inPlace']>,
    cluster: DrainSurveyInput['cluster'],
    nodes: string[],
    machines: MachineInfo[],
  ): Promise<InPlaceSurvey> {
    const survey: InPlaceSurvey = { ...input, checked: 0, missing: [], unreadable: [] };
    if (!input.enabled || input.executor === 'job') return survey;
    const sort = (lines: string[]) => lines.sort();
    if (input.executor === 'delegate') {
      const answers = await mapBounded(nodes, LEASE_READS, (node) => nodeAgents.missing(cluster, node));
      survey.checked = nodes.length;
      for (const a of answers)
        if (a !== undefined) (a.startsWith('cannot check') ? survey.unreadable : survey.missing).push(a);
    } else {
      const kinds = [...new Set(machines.flatMap((m) => (m.infrastructureKind ? [m.infrastructureKind] : [])))].sort();
      survey.checked = kinds.length;
      for (const kind of kinds) {
        const answer = await nodeUpgraders.declared(kind);
        if (!answer.ok)
          (answer.reason.startsWith('cannot check') ? survey.unreadable : survey.missing).push(answer.reason);
        else if (
          allowedForExecutor({ enabled: true, allowedPaths: versionPath }, 'management', answer.paths).allowedPaths
            .length === 0
        )
          survey.missing.push(
            `the node upgrader for ${kind} does not apply Machine /spec/version (Lease ${answer.lease})`,
          );
      }
    }
    sort(survey.missing);
    sort(survey.unreadable);
    return survey;
  }

  /** capacity, in-place and alerts, each by its gate's reader; undefined when the input asks for none. */
  async function gateChecks(
    input: DrainSurveyInput,
    nodes: string[],
    machines: MachineInfo[],
  ): Promise<ReadinessCheck[] | undefined> {
    const g = input.gates;
    if (!g) return undefined;
    const inPlace = g.inPlace;
    return await Promise.all([
      guarded('capacity', async () =>
        capacityCheck(
          g.capacityReservation,
          g.capacityReservation > 0
            ? await previewCapacityReservation(management, input.cluster, g.capacityReservation)
            : undefined,
        ),
      ),
      ...(inPlace
        ? [guarded('in-place', async () => inPlaceCheck(await inPlaceSurvey(inPlace, input.cluster, nodes, machines)))]
        : []),
      guarded('alerts', async () => {
        if (!g.alerts?.prometheusUrl) return alertsCheck(g.targetVersion, undefined);
        // As the gate: a source that cannot be read (or configured) is a report, not a failure.
        const report = await alerts
          .checkAlerts({ cluster: input.cluster, policy: g.alerts })
          .catch((err: unknown) => ({ reachable: false as const, cause: stableError(err).message }));
        return alertsCheck(g.targetVersion, report);
      }),
    ]);
  }
  return { gateChecks };
}
