// Gauges read from Temporal visibility: running cluster upgrades (those delayed,
// and each readiness check's verdict of those waiting to start, from their memo)
// and machine updates by phase (the CapiUpgradePhase search attribute the
// workflows keep current), and each running fleet rollout's clusters by state
// (its memo). One list call per refresh, off any request path; a failed refresh
// keeps the last figures (the temporal_reachable metric says why).
import type { FleetRolloutMemo } from '../model/fleet-rollout.ts';
import { UpgradePhase } from '../model/search-attributes.ts';
import { workflowTypes } from '../model/workflow-types.ts';
import {
  machineUpdatesInFlight,
  rolloutClusters,
  upgradeReadinessChecks,
  upgradesByPhase,
  upgradesDelayed,
} from './metrics.ts';
import { clusterUpgradeMemo, fleetRolloutMemo, readMemo } from '../platform/temporal/memo.ts';
import type { VisibilityPort } from '../platform/temporal/visibility.ts';

const QUERY = `ExecutionStatus = 'Running' AND WorkflowType IN ('${workflowTypes.clusterUpgrade}', '${workflowTypes.machineUpdate}', '${workflowTypes.fleetRollout}')`;
/** A fleet is thousands, not millions: past this the figures stop growing rather than the scrape. */
const MAX_COUNTED = 50_000;

export async function refreshVisibilityGauges(visibility: VisibilityPort): Promise<void> {
  const upgrades = new Map<string, number>();
  const updates = new Map<string, number>();
  const rollouts = new Map<string, FleetRolloutMemo['counts']>();
  /** `check verdict` → upgrades waiting to start whose last re-check says so. */
  const readiness = new Map<string, number>();
  let delayed = 0;
  let n = 0;
  for await (const wf of visibility.list(QUERY, 1_000)) {
    if (wf.type === workflowTypes.fleetRollout) {
      const memo = readMemo(fleetRolloutMemo, wf.memo);
      if (memo) rollouts.set(wf.workflowId.replace(/^fleet-rollout\//, ''), memo.counts);
      continue;
    }
    const phase = wf.typedSearchAttributes.get(UpgradePhase) ?? 'Unknown';
    const into = wf.type === workflowTypes.clusterUpgrade ? upgrades : updates;
    into.set(phase, (into.get(phase) ?? 0) + 1);
    if (wf.type === workflowTypes.clusterUpgrade) {
      const memo = readMemo(clusterUpgradeMemo, wf.memo);
      if (memo?.delayed && memo.phase === 'Pending') delayed++;
      if (memo?.phase === 'Pending')
        for (const [check, verdict] of Object.entries(memo.readiness?.checks ?? {}))
          readiness.set(`${check} ${verdict}`, (readiness.get(`${check} ${verdict}`) ?? 0) + 1);
    }
    if (++n >= MAX_COUNTED) break;
  }
  upgradesByPhase.reset();
  for (const [phase, count] of upgrades) upgradesByPhase.set({ phase }, count);
  upgradesDelayed.set(delayed);
  upgradeReadinessChecks.reset();
  for (const [key, count] of readiness) {
    const [check = '', verdict = ''] = key.split(' ');
    upgradeReadinessChecks.set({ check, verdict }, count);
  }
  machineUpdatesInFlight.reset();
  for (const [phase, count] of updates) machineUpdatesInFlight.set({ phase }, count);
  rolloutClusters.reset();
  for (const [rollout, counts] of rollouts)
    for (const [state, count] of Object.entries(counts)) rolloutClusters.set({ rollout, state }, count);
}

export function startVisibilityGauges(visibility: VisibilityPort, intervalMs = 30_000): { stop(): void } {
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  const round = async () => {
    try {
      await refreshVisibilityGauges(visibility);
    } catch {
      // Temporal unreachable: keep the last figures.
    }
    if (!stopped) timer = setTimeout(() => void round(), intervalMs).unref();
  };
  void round();
  return {
    stop() {
      stopped = true;
      clearTimeout(timer);
    },
  };
}
