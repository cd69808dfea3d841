// Gauges read from Temporal visibility: running cluster upgrades and machine
// updates by phase (the CapiUpgradePhase search attribute the workflows keep
// current). One list call per refresh, off any request path; a failed refresh
// keeps the last figures (the temporal_reachable metric says why).
import type { Client } from '@temporalio/client';
import { UpgradePhase } from '../workflows/search-attributes.ts';
import { machineUpdatesInFlight, upgradesByPhase } from './metrics.ts';

const QUERY = "ExecutionStatus = 'Running' AND WorkflowType IN ('clusterUpgradeWorkflow', 'machineUpdateWorkflow')";
/** A fleet is thousands, not millions: past this the figures stop growing rather than the scrape. */
const MAX_COUNTED = 50_000;

export async function refreshVisibilityGauges(client: Client): Promise<void> {
  const upgrades = new Map<string, number>();
  const updates = new Map<string, number>();
  let n = 0;
  for await (const wf of client.workflow.list({ query: QUERY, pageSize: 1_000 })) {
    const phase = wf.typedSearchAttributes.get(UpgradePhase) ?? 'Unknown';
    const into = wf.type === 'clusterUpgradeWorkflow' ? upgrades : updates;
    into.set(phase, (into.get(phase) ?? 0) + 1);
    if (++n >= MAX_COUNTED) break;
  }
  upgradesByPhase.reset();
  for (const [phase, count] of upgrades) upgradesByPhase.set({ phase }, count);
  machineUpdatesInFlight.reset();
  for (const [phase, count] of updates) machineUpdatesInFlight.set({ phase }, count);
}

export function startVisibilityGauges(client: Client, intervalMs = 30_000): { stop(): void } {
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  const round = async () => {
    try {
      await refreshVisibilityGauges(client);
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
