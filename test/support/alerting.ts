// Real Prometheus and Alertmanager (Debian's `prometheus` and `prometheus-alertmanager`,
// installed by `source scripts/env.sh --alerts`) for the alert gate's integration tests,
// started by the global setup on loopback ports and stopped by its teardown. Prometheus scrapes
// the targets tests list in `targets/*.json` (file_sd) every second and evaluates, every second,
// one rule per name in ALERT_NAMES over `capi_test_alert{alert="<name>"}`; a test makes an
// alert fire by serving that metric above 0 (alertTarget) and stops it by serving 0.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:http';
import { mkdirSync, openSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { logTail } from '../../src/local/log-tail.ts';
import { freePort } from '../../src/local/free-ports.ts';

/** Alerts that fire as soon as their metric is above 0 (`for: 0s`). */
export const ALERT_NAMES = ['KubeNodeNotReady', 'KubePodCrashLooping', 'TargetDown', 'Watchdog'] as const;
/** An alert whose rule waits an hour (`for: 1h`): it stays pending. */
export const PENDING_ALERT = 'SlowBurn';

export interface Alerting {
  prometheusUrl: string;
  alertmanagerUrl: string;
  targetsDir: string;
  /** `prometheus --version` and `alertmanager --version`, first lines. */
  versions: string[];
  stop(): Promise<void>;
}

function binary(envName: string, fallback: string): string {
  const found =
    process.env[envName] ??
    spawnSync('sh', ['-c', `command -v ${fallback}`])
      .stdout?.toString()
      .trim();
  if (!found)
    throw new Error(
      `the alert gate's integration tests need ${fallback} (Debian package ${fallback === 'prometheus' ? 'prometheus' : 'prometheus-alertmanager'}): run them with \`make test\` or \`source scripts/env.sh --testbed --alerts\` first`,
    );
  return found;
}

function versionOf(bin: string): string {
  return spawnSync(bin, ['--version'], { encoding: 'utf8' }).stdout.split('\n')[0]?.trim() ?? '';
}

async function ready(url: string, child: ChildProcess, log: string): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null)
      throw new Error(`${url}: the process exited with ${child.exitCode}; the end of ${log}:\n${logTail(log)}`);
    try {
      if ((await fetch(`${url}/-/ready`, { signal: AbortSignal.timeout(1000) })).ok) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`${url} did not become ready; the end of ${log}:\n${logTail(log)}`);
    await sleep(200);
  }
}

function stopper(child: ChildProcess): () => Promise<void> {
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
  };
}

/**
 * Started once more, on new ports in a new directory, when the first start fails: the
 * ports are chosen before the servers bind them, and the stacks the test setup starts
 * beside this one can take one in between.
 */
export async function startAlerting(dir: string): Promise<Alerting> {
  try {
    return await startAlertingOnce(dir);
  } catch (err) {
    console.warn(`${String(err)}\nstarting Prometheus and Alertmanager again on new ports`);
    return await startAlertingOnce(`${dir}-again`);
  }
}

async function startAlertingOnce(dir: string): Promise<Alerting> {
  const prometheus = binary('PROMETHEUS_BIN', 'prometheus');
  const alertmanager = binary('ALERTMANAGER_BIN', 'prometheus-alertmanager');
  const targetsDir = join(dir, 'targets');
  mkdirSync(targetsDir, { recursive: true });
  const [promPort, amPort] = [await freePort(), await freePort()];
  const alertmanagerUrl = `http://127.0.0.1:${amPort}`;
  const prometheusUrl = `http://127.0.0.1:${promPort}`;
  writeFileSync(join(dir, 'alertmanager.yml'), 'route:\n  receiver: none\nreceivers:\n  - name: none\n');
  const rules = [...ALERT_NAMES.map((name) => ({ name, for: '0s' })), { name: PENDING_ALERT, for: '1h' }].map(
    (r) => `      - alert: ${r.name}\n        expr: capi_test_alert{alert="${r.name}"} > 0\n        for: ${r.for}\n`,
  );
  writeFileSync(
    join(dir, 'rules.yml'),
    `groups:\n  - name: capi-test\n    interval: 1s\n    rules:\n${rules.join('')}`,
  );
  writeFileSync(
    join(dir, 'prometheus.yml'),
    [
      'global:',
      '  scrape_interval: 1s',
      '  evaluation_interval: 1s',
      'rule_files:',
      `  - ${join(dir, 'rules.yml')}`,
      'alerting:',
      '  alertmanagers:',
      '    - static_configs:',
      `        - targets: ['127.0.0.1:${amPort}']`,
      'scrape_configs:',
      '  - job_name: capi-test',
      '    file_sd_configs:',
      `      - files: ['${join(targetsDir, '*.json')}']`,
      '        refresh_interval: 1s',
      '',
    ].join('\n'),
  );
  const amLog = join(dir, 'alertmanager.log');
  const am = spawn(
    alertmanager,
    [
      `--config.file=${join(dir, 'alertmanager.yml')}`,
      `--storage.path=${join(dir, 'alertmanager-data')}`,
      `--web.listen-address=127.0.0.1:${amPort}`,
      // No gossip: a single instance on loopback.
      '--cluster.listen-address=',
    ],
    { stdio: ['ignore', openSync(amLog, 'a'), openSync(amLog, 'a')] },
  );
  const promLog = join(dir, 'prometheus.log');
  const prom = spawn(
    prometheus,
    [
      `--config.file=${join(dir, 'prometheus.yml')}`,
      `--storage.tsdb.path=${join(dir, 'prometheus-data')}`,
      `--web.listen-address=127.0.0.1:${promPort}`,
    ],
    { stdio: ['ignore', openSync(promLog, 'a'), openSync(promLog, 'a')] },
  );
  const stops = [stopper(prom), stopper(am)];
  const stop = async () => {
    await Promise.all(stops.map((s) => s()));
  };
  try {
    await Promise.all([ready(alertmanagerUrl, am, amLog), ready(prometheusUrl, prom, promLog)]);
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    prometheusUrl,
    alertmanagerUrl,
    targetsDir,
    versions: [versionOf(prometheus), versionOf(alertmanager)],
    stop,
  };
}

export interface AlertTarget {
  /** Serves `capi_test_alert{alert, cluster} value` from now on. */
  set(alert: string, cluster: string, value: number): void;
  close(): Promise<void>;
}

/** A scrape target of the test's own, listed to Prometheus through file_sd while it is open. */
export async function alertTarget(targetsDir: string, id: string): Promise<AlertTarget> {
  const values = new Map<string, number>();
  const server = createServer((_req, res) => {
    const lines = [...values].map(([labels, v]) => `capi_test_alert{${labels}} ${v}`);
    res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' });
    res.end(`# TYPE capi_test_alert gauge\n${lines.join('\n')}\n`);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  const file = join(targetsDir, `${id}.json`);
  writeFileSync(`${file}.tmp`, JSON.stringify([{ targets: [`127.0.0.1:${port}`], labels: { test: id } }]));
  renameSync(`${file}.tmp`, file);
  return {
    set(alert, cluster, value) {
      values.set(`alert=${JSON.stringify(alert)},cluster=${JSON.stringify(cluster)}`, value);
    },
    async close() {
      rmSync(file, { force: true });
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
