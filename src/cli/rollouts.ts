// `capi-upgrades rollout …`: start, watch, approve, pause, resume and abort a
// fleet rollout by name. Input is checked here with the same rules the
// workflow applies, so a typo is refused before anything starts.
import { WorkflowExecutionAlreadyStartedError, WorkflowNotFoundError, type Client } from '@temporalio/client';
import { checkRolloutInput } from '../domain/fleet-rollout-plan.ts';
import { fleetRolloutWorkflowId, type FleetRolloutInput, type FleetRolloutStatus } from '../model/fleet-rollout.ts';
import { FleetRollout } from '../model/search-attributes.ts';
import { workflowTypes } from '../model/workflow-types.ts';
import { UsageError } from './operations.ts';
import { nextWaveLines, rolloutHoldLines } from './held.ts';
import { table } from './table.ts';
import {
  abortRolloutSignal,
  approveWaveSignal,
  fleetRolloutStatusQuery,
  pauseRolloutSignal,
  resumeSignal,
} from '../workflows/messages.ts';
import { fleetRolloutMemo, readMemo } from '../platform/temporal/memo.ts';
import { variable } from '../config/environment.ts';

export const ROLLOUT_USAGE = `  rollout start <name> --selector SEL --version V --waves 1,10%,100%
                [--namespaces A,B] [--cluster-class C] [--soak 30m] [--max-concurrent 5]
                [--failure-budget 0] [--cluster-deadline 6h] [--approve-before 2,3] [--approve-after 1]
                                 upgrade the selected clusters in waves (waves are cumulative, end at 100%)
  rollout status <name> [--watch] waves, clusters and what the rollout waits for
                                 (--watch: redraw a compact view until the rollout ends)
  rollout list                   rollouts, newest first
  rollout approve <name> --wave N [--by NAME]
  rollout pause|resume <name>    stop / restart starting clusters (those in flight go on)
  rollout abort <name> [--reason TEXT] [--abort-in-flight]
                                 stop for good (--abort-in-flight: abort the cluster upgrades still running)`;

export const ROLLOUT_COMMANDS = ['start', 'status', 'list', 'approve', 'pause', 'resume', 'abort'] as const;

export interface RolloutFlags {
  selector?: string;
  namespaces?: string;
  'cluster-class'?: string;
  version?: string;
  waves?: string;
  soak?: string;
  'max-concurrent'?: string;
  'failure-budget'?: string;
  'cluster-deadline'?: string;
  'approve-before'?: string;
  'approve-after'?: string;
  wave?: string;
  by?: string;
  reason?: string;
  'abort-in-flight'?: boolean;
}

const list = (text: string | undefined) =>
  (text ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
const whole = (flag: string, text: string | undefined, fallback: number) => {
  if (text === undefined) return fallback;
  if (!/^-?\d+$/.test(text)) throw new UsageError(`--${flag} ${text}: expected a whole number`);
  return Number(text);
};
const waveList = (flag: string, text: string | undefined) => list(text).map((w) => whole(flag, w, 0));

/** The workflow input from the flags; refused (exit 2) with the field named, as the workflow would. */
export function rolloutInput(name: string | undefined, f: RolloutFlags): FleetRolloutInput {
  if (!name) throw new UsageError('rollout start: name the rollout');
  if (f.selector === undefined)
    throw new UsageError('rollout start: --selector is required ("" selects every cluster)');
  if (!f.version) throw new UsageError('rollout start: --version is required');
  const input: FleetRolloutInput = {
    name,
    selector: {
      labelSelector: f.selector,
      ...(f.namespaces ? { namespaces: list(f.namespaces) } : {}),
      ...(f['cluster-class'] ? { clusterClass: f['cluster-class'] } : {}),
    },
    targetVersion: f.version,
    waves: list(f.waves ?? '100%'),
    soak: f.soak ?? '0s',
    maxConcurrent: whole('max-concurrent', f['max-concurrent'], 1),
    failureBudget: whole('failure-budget', f['failure-budget'], 0),
    ...(f['cluster-deadline'] ? { clusterDeadline: f['cluster-deadline'] } : {}),
    ...(f['approve-before'] ? { approveBefore: waveList('approve-before', f['approve-before']) } : {}),
    ...(f['approve-after'] ? { approveAfter: waveList('approve-after', f['approve-after']) } : {}),
  };
  const checked = checkRolloutInput(input);
  if (!checked.ok) throw new UsageError(`rollout start: ${checked.message}`);
  return input;
}

/** Starts the rollout and waits (up to 30 s) until it has resolved its selection, or refused it. */
export async function startRollout(client: Client, taskQueue: string, input: FleetRolloutInput) {
  const workflowId = fleetRolloutWorkflowId(input.name);
  let handle;
  try {
    handle = await client.workflow.start(workflowTypes.fleetRollout, {
      workflowId,
      taskQueue,
      args: [input],
      // A name is reusable once its rollout ended, not while it runs.
      workflowIdReusePolicy: 'ALLOW_DUPLICATE',
      typedSearchAttributes: [{ key: FleetRollout, value: input.name }],
    });
  } catch (err) {
    if (err instanceof WorkflowExecutionAlreadyStartedError)
      throw new UsageError(`rollout ${input.name} is already running (${workflowId})`);
    throw err;
  }
  const deadline = Date.now() + 30_000;
  for (;;) {
    const d = await handle.describe();
    if (d.status.name === 'FAILED') {
      const failure = await handle.result().catch((e: unknown) => e as { cause?: { message?: string } });
      throw new UsageError(`rollout ${input.name} refused: ${failure?.cause?.message ?? 'see the workflow history'}`);
    }
    const status = await handle.query(fleetRolloutStatusQuery).catch(() => undefined);
    if ((status && status.message !== 'starting' && status.message !== 'selecting clusters') || Date.now() > deadline)
      return { workflowId, status };
    await new Promise((r) => setTimeout(r, 250));
  }
}

export async function rolloutStatus(client: Client, name: string): Promise<FleetRolloutStatus> {
  try {
    return await client.workflow.getHandle(fleetRolloutWorkflowId(name)).query(fleetRolloutStatusQuery);
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) throw new UsageError(`no rollout named ${name}`);
    throw err;
  }
}

export interface RolloutRow {
  name: string;
  phase: string;
  message: string;
  status: string;
  startTime: string;
}

export async function listRollouts(client: Client): Promise<RolloutRow[]> {
  const rows: RolloutRow[] = [];
  for await (const wf of client.workflow.list({ query: `WorkflowType = "${workflowTypes.fleetRollout}"` })) {
    const memo = readMemo(fleetRolloutMemo, wf.memo);
    rows.push({
      name: wf.workflowId.replace(/^fleet-rollout\//, ''),
      phase: memo?.phase ?? '',
      message: memo?.message ?? '',
      status: wf.status.name,
      startTime: wf.startTime.toISOString(),
    });
  }
  return rows.sort((a, b) => (a.startTime < b.startTime ? 1 : -1));
}

export type RolloutControl = 'approve' | 'pause' | 'resume' | 'abort';

export async function controlRollout(client: Client, name: string, control: RolloutControl, f: RolloutFlags) {
  const handle = client.workflow.getHandle(fleetRolloutWorkflowId(name));
  const d = await handle.describe().catch((err: unknown) => {
    if (err instanceof WorkflowNotFoundError) throw new UsageError(`no rollout named ${name}`);
    throw err;
  });
  if (d.status.name !== 'RUNNING') throw new UsageError(`rollout ${name} has ended (${d.status.name})`);
  if (control === 'approve') {
    const wave = whole('wave', f.wave, 0);
    if (wave < 1) throw new UsageError('rollout approve: --wave N is required');
    await handle.signal(approveWaveSignal, { wave, by: f.by ?? variable('USER') ?? 'unknown' });
  } else if (control === 'abort') {
    await handle.signal(abortRolloutSignal, {
      ...(f.reason ? { reason: f.reason } : {}),
      abortInFlight: f['abort-in-flight'] === true,
    });
  } else if (control === 'pause') {
    await handle.signal(pauseRolloutSignal);
  } else {
    await handle.signal(resumeSignal);
  }
  return { workflowId: d.workflowId };
}

export function rolloutText(s: FleetRolloutStatus): string {
  const out = [
    `rollout:   ${s.name} → ${s.targetVersion}`,
    `phase:     ${s.phase}`,
    `now:       ${s.message}`,
    ...rolloutHoldLines(s),
    ...nextWaveLines(s),
    '',
    table(
      s.waves.map((w) => ({
        wave: String(w.wave),
        size: String(w.size),
        state: w.state,
        approved: [
          w.approvedBeforeBy && `before by ${w.approvedBeforeBy}`,
          w.approvedAfterBy && `after by ${w.approvedAfterBy}`,
        ]
          .filter(Boolean)
          .join(', '),
      })),
      ['wave', 'size', 'state', 'approved'],
    ),
    '',
    table(
      s.clusters.map((c) => ({
        cluster: `${c.namespace}/${c.name}`,
        wave: c.wave ? String(c.wave) : '-',
        from: c.version,
        state: c.state,
        reason: c.reason ?? '',
      })),
      ['cluster', 'wave', 'from', 'state', 'reason'],
    ),
  ];
  return out.join('\n');
}
