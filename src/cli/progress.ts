// The compact progress views `status --watch` and `rollout status --watch`
// redraw: a few lines an operator reads at a glance (where it is, how far, what
// holds it), and whether the run has ended and how.
import type { Client } from '@temporalio/client';
import type { FleetRolloutStatus, RolloutClusterState } from '../model/fleet-rollout.ts';
import { haltedMessage, type GateState } from '../model/cluster-upgrade.ts';
import { MachineName, UpgradePhase as PhaseKey } from '../model/search-attributes.ts';
import { workflowTypes } from '../model/workflow-types.ts';
import { holdLines, nextWaveLines, rolloutHoldLines } from './held.ts';
import { quote, type ClusterKey, type UpgradeReport } from './operations.ts';

/** A view and, once the run has ended, the exit code (0: done as asked; 1: failed, aborted, stopped). */
export interface Progress {
  text: string;
  exitCode?: number;
}

/** Machine updates of one upgrade run (the latest run of each machine's update since the upgrade started). */
export interface MachineTally {
  total: number;
  byPhase: Record<string, number>;
}

/** Every machine update of the cluster started since `since` (the upgrade's start), by phase. */
export async function machineTally(client: Client, cluster: ClusterKey, since: string): Promise<MachineTally> {
  const query = [
    `WorkflowType = '${workflowTypes.machineUpdate}'`,
    `CapiClusterNamespace = ${quote(cluster.namespace)}`,
    `CapiClusterName = ${quote(cluster.name)}`,
    `StartTime >= ${quote(since)}`,
  ].join(' AND ');
  // A machine updated again (a newer desired spec) has several runs: its newest counts.
  const latest = new Map<string, { start: number; phase: string }>();
  for await (const wf of client.workflow.list({ query, pageSize: 500 })) {
    const machine = wf.typedSearchAttributes.get(MachineName) ?? wf.workflowId;
    const start = wf.startTime.getTime();
    if ((latest.get(machine)?.start ?? -Infinity) > start) continue;
    latest.set(machine, { start, phase: wf.typedSearchAttributes.get(PhaseKey) ?? wf.status.name });
    if (latest.size >= 10_000) break;
  }
  const byPhase: Record<string, number> = {};
  for (const { phase } of latest.values()) byPhase[phase] = (byPhase[phase] ?? 0) + 1;
  return { total: latest.size, byPhase };
}

const count = (n: number, what: string) => `${n} ${what}`;

/** What holds the upgrade now: the hooks' halt, a freeze, a delay, else the first waiting step. */
function holding(r: UpgradeReport): string | undefined {
  if (r.memo?.halted) return r.memo.halted;
  // The status query answered (no memo read): the hooks' halt as the workflow words it.
  const halted = r.status ? haltedMessage(r.status) : undefined;
  if (halted) return halted;
  const schedule = r.status?.schedule;
  if (schedule?.freeze) return `freeze "${schedule.freeze.reason}" until ${schedule.freeze.to}`;
  const gates = Object.values(r.status?.gates ?? r.memo?.gates ?? {});
  const waiting = gates.find((g) => g.state === 'Waiting');
  if (waiting) return waiting.message;
  if (schedule?.nextWindowOpens) return `maintenance window opens ${schedule.nextWindowOpens}`;
  return undefined;
}

export function upgradeProgress(r: UpgradeReport, machines?: MachineTally): Progress {
  const phase = r.status?.phase ?? r.memo?.phase ?? r.run.phase;
  const target = r.status?.targetVersion ?? r.memo?.targetVersion ?? r.run.targetVersion;
  const from = r.status?.fromVersion ? `${r.status.fromVersion} → ` : '';
  const reason = r.status?.reason ?? r.memo?.reason;
  const gates = Object.values(r.status?.gates ?? r.memo?.gates ?? {});
  const states = (s: GateState) => gates.filter((g) => g.state === s).length;
  const lines = [
    `${r.run.cluster}  ${from}${target}  ${phase}${reason ? ` (${reason})` : ''}`,
    `steps:     ${count(states('Open'), 'done')}, ${count(states('Waiting'), 'waiting')}, ${count(states('Failed'), 'failed')}`,
  ];
  if (machines && machines.total > 0) {
    const done = machines.byPhase.Succeeded ?? 0;
    const others = Object.entries(machines.byPhase)
      .filter(([p]) => p !== 'Succeeded')
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([p, n]) => `${n} ${p.toLowerCase()}`);
    lines.push(
      `machines:  ${done}/${machines.total} updated in place${others.length ? ` (${others.join(', ')})` : ''}`,
    );
  }
  // Each gate that holds it (calendar, removed APIs, alerts, a machine's pacing) and each override, as `status` says them.
  const held = holdLines(r);
  const holds = holding(r);
  // A waiting step whose message is a gate's (alerts, removed APIs) is said once, by the gate's line.
  const gateMessages = [r.status?.alerts?.held?.message, r.status?.removedApis?.message].filter(
    (m): m is string => m !== undefined && m !== '',
  );
  const saidByGate = holds !== undefined && gateMessages.some((m) => holds.includes(m));
  if (holds && phase !== 'Upgraded' && !saidByGate) lines.push(`holds:     ${holds}`);
  lines.push(...held);
  // Failed and Aborted runs stay open for `retry` / `resume`: the watch ends there, a person acts next.
  const closed = r.run.status !== 'RUNNING';
  if (closed) lines.push(`workflow:  ${r.run.status}`);
  const exitCode = phase === 'Upgraded' ? 0 : phase === 'Failed' || phase === 'Aborted' || closed ? 1 : undefined;
  return { text: lines.join('\n'), ...(exitCode !== undefined ? { exitCode } : {}) };
}

const CLUSTER_STATES: RolloutClusterState[] = ['done', 'upgrading', 'pending', 'deferred', 'failed', 'skipped'];

export function rolloutProgress(s: FleetRolloutStatus): Progress {
  const selected = s.clusters.filter((c) => c.state !== 'skipped').length;
  const tally = CLUSTER_STATES.map((state) => [state, s.clusters.filter((c) => c.state === state).length] as const)
    .filter(([state, n]) => n > 0 && state !== 'done')
    .map(([state, n]) => `${n} ${state}`);
  const wave = s.waves.find((w) => w.state !== 'done' && w.state !== 'pending') ?? s.waves.at(-1);
  const lines = [
    `rollout ${s.name} → ${s.targetVersion}  ${s.phase}`,
    `waves:     ${s.waves.filter((w) => w.state === 'done').length}/${s.waves.length} done${wave && wave.state !== 'done' ? `, wave ${wave.wave} ${wave.state}` : ''}`,
    `clusters:  ${s.clusters.filter((c) => c.state === 'done').length}/${selected} upgraded${tally.length ? ` (${tally.join(', ')})` : ''}`,
    `now:       ${s.message}`,
    ...rolloutHoldLines(s),
    ...nextWaveLines(s),
  ];
  const exitCode = s.phase === 'Completed' ? 0 : s.phase === 'Stopped' || s.phase === 'Aborted' ? 1 : undefined;
  return { text: lines.join('\n'), ...(exitCode !== undefined ? { exitCode } : {}) };
}
