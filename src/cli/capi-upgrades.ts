#!/usr/bin/env node
// capi-upgrades: the operator's view of cluster upgrades, by cluster name.
//   capi-upgrades list [--phase P] [--namespace NS] [--all] [-o json]
//   capi-upgrades status <ns>/<cluster> [-o json]
//   capi-upgrades abort <ns>/<cluster> [--reason TEXT]
//   capi-upgrades resume|retry <ns>/<cluster>
//   capi-upgrades history <ns>/<cluster> [-o json]
//   capi-upgrades rollout start|status|list|approve|pause|resume|abort … (fleet rollouts)
// It reads the same TEMPORAL_* settings as the extension (address, namespace,
// TLS, API key). The `temporal` and `tctl` commands in the README and docs/operations.md do the same
// by workflow id.
import { parseArgs } from 'node:util';
import { Client, Connection } from '@temporalio/client';
import { ConfigError, parseConfig } from '../config/index.ts';
import type { UpgradePhase } from '../model/cluster-upgrade.ts';
import { table } from './table.ts';
import { connectFailureMessage, connectionOptions, readTemporalCredentials } from '../temporal-connection.ts';
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
  ROLLOUT_USAGE,
  rolloutInput,
  rolloutStatus,
  rolloutText,
  startRollout,
  type RolloutControl,
  type RolloutFlags,
} from './rollouts.ts';

const USAGE = `usage: capi-upgrades <command> [options]

  list [--phase Pending|Upgrading|Upgraded|Failed|Aborted] [--namespace NS] [--all]
                                 running cluster upgrades (--all: closed ones too)
  status <namespace>/<cluster>   phase, steps, conditions (blocking pods and PDBs), machine updates
  abort <namespace>/<cluster> [--reason TEXT]
                                 stop the upgrade: every hook answers Failure until "resume"
  resume <namespace>/<cluster>   continue an aborted or failed upgrade where it stopped
  retry <namespace>/<cluster>    run a failed step again
  history <namespace>/<cluster>  every run for the cluster, and the versions it went through
${ROLLOUT_USAGE}

  -o json                        machine-readable output
Temporal: TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE and the TLS / API key settings of the extension.`;

const PHASES: UpgradePhase[] = ['Pending', 'Upgrading', 'Upgraded', 'Failed', 'Aborted'];

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
  const alerts = r.status?.alerts;
  if (alerts?.held)
    out.push(`gate:      alerts holds ${alerts.held.step} since ${alerts.held.since}: ${alerts.held.message}`);
  if (alerts?.silence)
    out.push(`silence:   ${alerts.silence.id ?? '(being created)'} for ${alerts.silence.step} (Alertmanager)`);
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

async function main(argv: string[]): Promise<number> {
  const parse = () =>
    parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
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
        help: { type: 'boolean', short: 'h' },
      },
    });
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse();
  } catch (err) {
    // Unknown option, missing value: a usage error (exit 2), one line.
    throw new UsageError((err instanceof Error ? err.message : String(err)).split('\n')[0] ?? 'bad arguments');
  }
  const { values, positionals } = parsed;
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
  if (!['list', 'status', 'abort', 'resume', 'retry', 'history', 'rollout'].includes(command))
    throw new UsageError(`unknown command ${JSON.stringify(command)}`);
  const rollout = command === 'rollout' ? { sub: target ?? '', name: positionals[2] } : undefined;
  const ROLLOUT_COMMANDS = ['start', 'status', 'list', 'approve', 'pause', 'resume', 'abort'];
  if (rollout && !ROLLOUT_COMMANDS.includes(rollout.sub))
    throw new UsageError(`rollout ${JSON.stringify(rollout.sub)}: expected one of ${ROLLOUT_COMMANDS.join(', ')}`);
  if (rollout && rollout.sub !== 'list' && !rollout.name)
    throw new UsageError(`rollout ${rollout.sub}: name the rollout`);
  // Checked before connecting: a typo is refused even while Temporal is away.
  const flags = values as RolloutFlags;
  const rolloutStart = rollout?.sub === 'start' ? rolloutInput(rollout.name, flags) : undefined;
  const cluster = command === 'list' || rollout ? undefined : parseClusterKey(target);

  const settings = parseConfig(process.env).temporal;
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
      } else if (rollout.sub === 'status') {
        const status = await rolloutStatus(client, name);
        print(status, rolloutText(status));
      } else if (rollout.sub === 'list') {
        const rows = await listRollouts(client);
        print(
          rows,
          rows.length === 0
            ? 'no rollouts found'
            : table(
                rows.map((r) => ({ ...r })),
                ['name', 'phase', 'status', 'startTime', 'message'],
              ),
        );
      } else {
        const control = rollout.sub as RolloutControl;
        const sent = await controlRollout(client, name, control, flags);
        print({ signalled: control, workflowId: sent.workflowId }, `${control} sent to ${sent.workflowId}`);
      }
    } else if (command === 'list') {
      const rows = await listUpgrades(client, {
        ...(phase ? { phase } : {}),
        ...(values.namespace ? { namespace: values.namespace } : {}),
        ...(values.all ? { all: true } : {}),
      });
      print(rows, runsTable(rows));
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
      const run = await controlUpgrade(client, cluster!, control, values.reason);
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
      console.error(`capi-upgrades: ${err.message}`);
      process.exit(2);
    }
    console.error(err);
    process.exit(1);
  },
);
