#!/usr/bin/env node
// capi-upgrades: the operator's view of cluster upgrades, by cluster name.
//   capi-upgrades list [--phase P] [--namespace NS] [--all] [-o json]
//   capi-upgrades status <ns>/<cluster> [-o json | --watch]
//   capi-upgrades abort <ns>/<cluster> [--reason TEXT]
//   capi-upgrades resume|retry <ns>/<cluster>
//   capi-upgrades history <ns>/<cluster> [-o json]
//   capi-upgrades readiness <ns>/<cluster> --to <version> [--setting K=V …] [-o json]
//   capi-upgrades readiness --all [--namespace NS] --to <version> [--max-concurrent N] (or several clusters)
//   capi-upgrades rollout start|status|list|approve|pause|resume|abort … (fleet rollouts)
//   capi-upgrades completion bash|zsh
//   capi-upgrades demo …   (from a checkout: bin/capi-upgrades runs src/local/demo-cli.ts)
// Installed as `kubectl-capi_upgrades` it is the kubectl plugin `kubectl capi-upgrades`
// (krew naming), and as `kubectl_complete-capi_upgrades` that plugin's completion.
// It reads the same TEMPORAL_* settings as the extension (address, namespace,
// TLS, API key). The `temporal` and `tctl` commands in the README and docs/operations.md do the same
// by workflow id.
import { basename } from 'node:path';
import { parseArgs } from 'node:util';
import { Client, Connection } from '@temporalio/client';
import { ConfigError, parseConfig } from '../config/index.ts';
import { variable } from '../config/environment.ts';
import type { UpgradePhase } from '../model/cluster-upgrade.ts';
import { holdLines } from './held.ts';
import {
  fleetExitCode,
  fleetReadiness,
  fleetText,
  READINESS_FLEET_USAGE,
  READINESS_USAGE,
  readinessExitCode,
  readinessFleet,
  readinessInput,
  readinessText,
  runReadiness,
} from './readiness.ts';
import { table } from './table.ts';
import { complete, completionScript } from './completion.ts';
import { machineTally, rolloutProgress, upgradeProgress } from './progress.ts';
import { parseWatchDuration, watch } from './watch.ts';
import { connectFailureMessage, connectionOptions, readTemporalCredentials } from '../platform/temporal/connection.ts';
import {
  controlUpgrade,
  listUpgrades,
  parseClusterKey,
  upgradeRuns,
  upgradeStatus,
  UsageError,
  type UpgradeReport,
  type UpgradeRow,
} from './operations.ts';
import {
  controlRollout,
  listRollouts,
  ROLLOUT_COMMANDS,
  ROLLOUT_USAGE,
  rolloutInput,
  rolloutStatus,
  rolloutText,
  startRollout,
  type RolloutControl,
  type RolloutFlags,
} from './rollouts.ts';

// The name it was run by: `kubectl capi-upgrades` when kubectl runs it as a plugin.
const INVOKED_AS = variable('CAPI_UPGRADES_INVOKED_AS') ?? basename(process.argv[1] ?? 'capi-upgrades', '.js');
const PROGRAM = INVOKED_AS.startsWith('kubectl') ? 'kubectl capi-upgrades' : 'capi-upgrades';

const USAGE = `usage: ${PROGRAM} <command> [options]

  list [--phase Pending|Upgrading|Upgraded|Failed|Aborted] [--namespace NS] [--all]
                                 running cluster upgrades (--all: closed ones too)
  status <namespace>/<cluster>   phase, steps, conditions (blocking pods and PDBs), machine updates
         [--watch [--interval 2s] [--timeout 2h]]
                                 --watch: redraw steps, machines done/total and what holds it until
                                 the upgrade ends (exit 0 upgraded, 1 failed, aborted or timed out)
  abort <namespace>/<cluster> [--reason TEXT]
                                 stop the upgrade: every hook answers Failure until "resume"
  resume <namespace>/<cluster>   continue an aborted or failed upgrade where it stopped
  retry <namespace>/<cluster>    run a failed step again (an aborted upgrade needs resume)
  history <namespace>/<cluster>  every run for the cluster, and the versions it went through
${READINESS_USAGE}
${READINESS_FLEET_USAGE}
${ROLLOUT_USAGE}
  completion bash|zsh            the shell completion script (source <(${PROGRAM} completion bash))
  demo [--from v1.33.0] [--to v1.35.0] [--rolling-only] [--timeout 60m]
                                 on \`make dev\`, from a checkout: create in-memory Clusters and upgrade
                                 them through Cluster API and the extension, by replacement and in place

  -o json                        machine-readable output
Temporal: TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE and the TLS / API key settings of the extension.`;

const PHASES: UpgradePhase[] = ['Pending', 'Upgrading', 'Upgraded', 'Failed', 'Aborted'];

function rolloutsTable(rows: Awaited<ReturnType<typeof listRollouts>>): string {
  if (rows.length === 0) return 'no rollouts found';
  return table(
    rows.map((r) => ({ ...r })),
    ['name', 'phase', 'status', 'startTime', 'message'],
  );
}

function runsTable(rows: UpgradeRow[]): string {
  if (rows.length === 0) return 'no cluster upgrades found';
  return table(
    rows.map((r) => ({ ...r })),
    ['cluster', 'targetVersion', 'phase', 'status', 'startTime', 'workflowId'],
  );
}

function statusText(r: UpgradeReport): string {
  const out: string[] = [];
  const phase = r.status?.phase ?? r.memo?.phase ?? r.run.phase;
  const target = r.status?.targetVersion ?? r.memo?.targetVersion ?? r.run.targetVersion;
  out.push(`cluster:   ${r.run.cluster}`);
  out.push(`upgrade:   ${r.status?.fromVersion ? `${r.status.fromVersion} → ` : ''}${target}`);
  out.push(
    `phase:     ${phase}${(r.status?.reason ?? r.memo?.reason) ? ` (${r.status?.reason ?? r.memo?.reason})` : ''}`,
  );
  if (r.memo?.halted) out.push(`hooks say: ${r.memo.halted}`);
  const schedule = r.status?.schedule;
  const delayed = schedule?.delayedSince ?? r.memo?.delayed;
  if (delayed) out.push(`delayed:   since ${delayed} (not started delayedAfter past upgradeAt)`);
  if (schedule?.freeze)
    out.push(`freeze:    "${schedule.freeze.reason}" (${schedule.freeze.from} to ${schedule.freeze.to})`);
  if (schedule?.nextWindowOpens) out.push(`calendar:  next opens ${schedule.nextWindowOpens}`);
  const readiness = r.status?.readiness;
  if (readiness)
    out.push(`readiness: ${readiness.verdict} (checked ${readiness.checkedAt}; the Readiness condition says why)`);
  else if (r.memo?.readiness) out.push(`readiness: ${r.memo.readiness.verdict}`);
  out.push(...holdLines(r));
  out.push(`workflow:  ${r.run.workflowId} (run ${r.run.runId}, ${r.run.status})`);
  if (!r.status) out.push('(no worker answered the status query: showing the memo)');
  const gates = r.status?.gates ?? r.memo?.gates ?? {};
  if (Object.keys(gates).length > 0) {
    out.push('', 'steps:');
    out.push(
      table(
        Object.entries(gates).map(([gate, g]) => ({ gate, state: g.state, message: g.message })),
        ['gate', 'state', 'message'],
      ),
    );
  }
  const conditions = [...(r.status?.conditions ?? []), ...(r.status?.history.flatMap((h) => h.conditions) ?? [])];
  if (conditions.length > 0) {
    out.push('', 'conditions:');
    out.push(
      table(
        conditions.map((c) => ({ type: c.type, status: c.status, reason: c.reason, message: c.message })),
        ['type', 'status', 'reason', 'message'],
      ),
    );
  }
  if (r.machineUpdates.length > 0) {
    out.push('', 'machine updates:');
    out.push(
      table(
        r.machineUpdates.map((m) => ({ ...m })),
        ['machine', 'phase', 'message'],
      ),
    );
  }
  return out.join('\n');
}

/** Temporal for the names completion offers: a moment at most, else none (the fixed words still complete). */
async function completeWords(words: string[]): Promise<number> {
  let client: Client | undefined;
  let connection: Connection | undefined;
  const names = async (read: (c: Client) => Promise<string[]>) => {
    try {
      if (!client) {
        const settings = parseConfig().temporal;
        connection = await Connection.connect({
          ...connectionOptions(settings, readTemporalCredentials(settings)),
          connectTimeout: 2_000,
        });
        client = new Client({ connection, namespace: settings.namespace });
      }
      const c = client;
      return await c.connection.withDeadline(Date.now() + 2_000, () => read(c));
    } catch {
      return [];
    }
  };
  try {
    process.stdout.write(
      await complete(words, {
        clusters: () => names(async (c) => (await listUpgrades(c, { limit: 200 })).map((r) => r.cluster)),
        rollouts: () => names(async (c) => (await listRollouts(c)).map((r) => r.name)),
      }),
    );
  } finally {
    await connection?.close();
  }
  return 0;
}

/** The command line's options (every command's: each checks its own below). */
const OPTIONS = {
  phase: { type: 'string' },
  namespace: { type: 'string' },
  all: { type: 'boolean' },
  reason: { type: 'string' },
  output: { type: 'string', short: 'o' },
  // rollout
  selector: { type: 'string' },
  namespaces: { type: 'string' },
  'cluster-class': { type: 'string' },
  version: { type: 'string' },
  waves: { type: 'string' },
  soak: { type: 'string' },
  'max-concurrent': { type: 'string' },
  'failure-budget': { type: 'string' },
  'cluster-deadline': { type: 'string' },
  'approve-before': { type: 'string' },
  'approve-after': { type: 'string' },
  wave: { type: 'string' },
  by: { type: 'string' },
  'abort-in-flight': { type: 'boolean' },
  watch: { type: 'boolean', short: 'w' },
  interval: { type: 'string' },
  timeout: { type: 'string' },
  // readiness
  to: { type: 'string' },
  setting: { type: 'string', multiple: true },
  help: { type: 'boolean', short: 'h' },
} as const;

function parseCommandLine(argv: string[]) {
  try {
    return parseArgs({ args: argv, allowPositionals: true, options: OPTIONS });
  } catch (err) {
    // Unknown option, missing value: a usage error (exit 2), one line.
    throw new UsageError((err instanceof Error ? err.message : String(err)).split('\n')[0] ?? 'bad arguments');
  }
}

/** A checked command line, ready to run against Temporal. */
interface Plan {
  command: string;
  values: ReturnType<typeof parseCommandLine>['values'];
  rollout: { sub: string; name: string | undefined } | undefined;
  flags: RolloutFlags;
  rolloutStart: ReturnType<typeof rolloutInput> | undefined;
  fleet: ReturnType<typeof readinessFleet> | undefined;
  cluster: ReturnType<typeof parseClusterKey> | undefined;
  readiness: ReturnType<typeof readinessInput> | undefined;
  watching: boolean;
  json: boolean;
  phase: UpgradePhase | undefined;
  watchOn: (read: Parameters<typeof watch>[0]['read']) => ReturnType<typeof watch>;
}

async function main(argv: string[]): Promise<number> {
  if (INVOKED_AS.startsWith('kubectl_complete')) return await completeWords(argv);
  if (argv[0] === '__complete') return await completeWords(argv.slice(1));
  const { values, positionals } = parseCommandLine(argv);
  const [command, target] = positionals;
  if (values.help || !command) {
    console.log(USAGE);
    return values.help ? 0 : 2;
  }
  const json = values.output === 'json';
  if (values.output !== undefined && !json) throw new UsageError(`-o ${values.output}: only json is supported`);
  const phase = values.phase as UpgradePhase | undefined;
  if (phase !== undefined && !PHASES.includes(phase))
    throw new UsageError(`--phase ${phase}: expected one of ${PHASES.join(', ')}`);
  if (command === 'completion') {
    // kubectl completes its plugins itself, through kubectl_complete-capi_upgrades on PATH.
    if (PROGRAM !== 'capi-upgrades')
      throw new UsageError(
        'kubectl completes its plugins: source <(kubectl completion bash), with kubectl_complete-capi_upgrades on PATH',
      );
    console.log(completionScript(target ?? '', PROGRAM));
    return 0;
  }
  if (command === 'demo')
    // The demo drives `make dev`'s own management cluster: it is dev-only code (src/local), not in the image.
    throw new UsageError('the demo runs from a checkout beside `make dev`: make demo, or bin/capi-upgrades demo');
  if (!['list', 'status', 'abort', 'resume', 'retry', 'history', 'readiness', 'rollout'].includes(command))
    throw new UsageError(`unknown command ${JSON.stringify(command)}`);
  const rollout = command === 'rollout' ? { sub: target ?? '', name: positionals[2] } : undefined;
  if (rollout && !(ROLLOUT_COMMANDS as readonly string[]).includes(rollout.sub))
    throw new UsageError(`rollout ${JSON.stringify(rollout.sub)}: expected one of ${ROLLOUT_COMMANDS.join(', ')}`);
  if (rollout && rollout.sub !== 'list' && !rollout.name)
    throw new UsageError(`rollout ${rollout.sub}: name the rollout`);
  // Checked before connecting: a typo is refused even while Temporal is away.
  const flags = values as RolloutFlags;
  const rolloutStart = rollout?.sub === 'start' ? rolloutInput(rollout.name, flags) : undefined;
  // readiness --all, or several clusters: the fleet table (checked here, before connecting).
  const fleet = command === 'readiness' ? readinessFleet(values, positionals.slice(1)) : undefined;
  const cluster = command === 'list' || rollout || fleet ? undefined : parseClusterKey(target);
  const readiness = command === 'readiness' && !fleet ? readinessInput(cluster!, values.to, values.setting) : undefined;
  const watching = values.watch === true;
  if (watching && !(command === 'status' || rollout?.sub === 'status'))
    throw new UsageError('--watch: only status and rollout status watch');
  if (watching && json) throw new UsageError('--watch shows a view for people: leave out -o json');
  const intervalMs = parseWatchDuration('interval', values.interval, 2_000)!;
  const timeoutMs = parseWatchDuration('timeout', values.timeout);
  const watchOn = (read: Parameters<typeof watch>[0]['read']) =>
    watch({
      read,
      intervalMs,
      ...(timeoutMs !== undefined ? { timeoutMs } : {}),
      write: (t) => process.stdout.write(t),
      tty: process.stdout.isTTY === true,
    });

  const plan = { command, values, rollout, flags, rolloutStart, fleet, cluster, readiness, watching, json, phase };
  return await execute({ ...plan, watchOn });
}

/** Connects to Temporal and runs the command. */
async function execute(plan: Plan): Promise<number> {
  const { command, values, rollout, flags, rolloutStart, fleet, cluster, readiness, watching, json, phase, watchOn } =
    plan;
  const settings = parseConfig().temporal;
  let connection: Connection;
  try {
    connection = await Connection.connect(connectionOptions(settings, readTemporalCredentials(settings)));
  } catch (err) {
    throw new UsageError(connectFailureMessage(settings, err));
  }
  const client = new Client({ connection, namespace: settings.namespace });
  const print = (value: unknown, text: string) => console.log(json ? JSON.stringify(value, null, 2) : text);
  try {
    if (rollout) {
      const name = rollout.name ?? '';
      if (rolloutStart) {
        const started = await startRollout(client, settings.taskQueue, rolloutStart);
        print(started, `started ${started.workflowId}${started.status ? `\n\n${rolloutText(started.status)}` : ''}`);
      } else if (rollout.sub === 'status' && watching) {
        return await watchOn(async () => rolloutProgress(await rolloutStatus(client, name)));
      } else if (rollout.sub === 'status') {
        const status = await rolloutStatus(client, name);
        print(status, rolloutText(status));
      } else if (rollout.sub === 'list') {
        const rows = await listRollouts(client);
        print(rows, rolloutsTable(rows));
      } else {
        const control = rollout.sub as RolloutControl;
        const sent = await controlRollout(client, name, control, flags);
        print({ signalled: control, workflowId: sent.workflowId }, `${control} sent to ${sent.workflowId}`);
      }
    } else if (fleet) {
      const rows = await fleetReadiness(client, settings.taskQueue, fleet, values.to, values.setting);
      print(rows, fleetText(rows));
      return fleetExitCode(rows);
    } else if (readiness) {
      const report = await runReadiness(client, settings.taskQueue, readiness);
      print(report, readinessText(report));
      return readinessExitCode(report);
    } else if (command === 'list') {
      const rows = await listUpgrades(client, {
        ...(phase ? { phase } : {}),
        ...(values.namespace ? { namespace: values.namespace } : {}),
        ...(values.all ? { all: true } : {}),
      });
      print(rows, runsTable(rows));
    } else if (command === 'status' && watching) {
      return await watchOn(async () => {
        const report = await upgradeStatus(client, cluster!);
        return upgradeProgress(report, await machineTally(client, cluster!, report.run.startTime));
      });
    } else if (command === 'status') {
      const report = await upgradeStatus(client, cluster!);
      print(report, statusText(report));
    } else if (command === 'history') {
      const runs = await upgradeRuns(client, cluster!);
      let versions = '';
      if (runs[0]) {
        const report = await upgradeStatus(client, cluster!);
        versions = (report.status?.history ?? [])
          .map((h) => `${h.version}  ${h.phase}  ${h.startTime}${h.completeTime ? ` → ${h.completeTime}` : ''}`)
          .join('\n');
      }
      print(runs, `${runsTable(runs)}${versions ? `\n\nversions of the latest run:\n${versions}` : ''}`);
    } else {
      const control = command as 'abort' | 'resume' | 'retry';
      const run = await controlUpgrade(client, cluster!, control, values.reason, PROGRAM);
      print({ signalled: control, workflowId: run.workflowId }, `${control} sent to ${run.workflowId}`);
    }
  } finally {
    await connection.close();
  }
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    if (err instanceof UsageError || err instanceof ConfigError) {
      console.error(`${PROGRAM}: ${err.message}`);
      process.exit(2);
    }
    console.error(err);
    process.exit(1);
  },
);
