// Load benchmark for the HTTPS hook server (not a test).
//
//   node bench/hooks.ts [--duration 10] [--concurrency 32] [--warmup 1] [--max-requests 1000000]
//
// The script forks itself with --server to run the real hook server (TLS,
// fastify, routes, the handlers `make dev` wires without Temporal) on a free
// loopback port, so the load generator does not share the server's event
// loop. The parent drives a closed loop of N concurrent workers against
// 127.0.0.1 only, each scenario bounded in time and in request count, and at
// the end asks the server process for its peak RSS over IPC. Any error
// (non-200, status other than Success, unexpected body) fails the run.
import { fork, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { Agent } from 'node:https';
import { loadavg, tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { HOOKS_PATH_PREFIX, defaultHandlerName, type HookName } from '../src/api/hooks/contract.ts';
import { hookPath } from '../src/api/hooks/hook-route.ts';
import { sampleRequest } from '../support/capi-fixtures.ts';
import { chainedPlanRequestBody, postHook } from './lib/hook-client.ts';
import { startBenchHookServer, writeServingCertificate } from '../support/hook-server.ts';
import { closedLoop } from './lib/load.ts';
import { formatMs, machineLine, numberOption, percentile, runMain, table } from './lib/report.ts';

// ---------------------------------------------------------------- IPC

interface UsageReport {
  type: 'usage';
  /** Peak resident set size so far, KiB. */
  maxRSS: number;
  /** User + system CPU time so far, microseconds. */
  cpuMicros: number;
}
type ServerMessage = { type: 'ready'; port: number } | UsageReport | { type: 'failed'; message: string };
type ParentMessage = { type: 'usage' } | { type: 'stop' };

// ---------------------------------------------------------------- server side

async function runServer(): Promise<void> {
  const send = (message: ServerMessage) => process.send?.(message);
  try {
    const server = await startBenchHookServer(process.env.TLS_CERT_DIR, 'silent');
    // The parent going away (crash, Ctrl-C) must not leave a server behind.
    process.on('disconnect', () => process.exit(0));
    process.on('message', (message: ParentMessage) => {
      if (message.type === 'usage') {
        const usage = process.resourceUsage();
        send({ type: 'usage', maxRSS: usage.maxRSS, cpuMicros: usage.userCPUTime + usage.systemCPUTime });
      } else if (message.type === 'stop') {
        void server.close().finally(() => process.exit(0));
      }
    });
    send({ type: 'ready', port: Number(new URL(server.url).port) });
  } catch (err) {
    send({ type: 'failed', message: err instanceof Error ? err.message : String(err) });
    process.exit(1);
  }
}

// ---------------------------------------------------------------- load side

interface Scenario {
  name: string;
  path: string;
  body: Buffer;
  /** Keep-alive pool (true) or a new TLS connection per request (false). */
  keepAlive: boolean;
  concurrency: number;
  /** Returns a problem with a Success response body, or undefined. */
  check(response: Record<string, unknown>): string | undefined;
}

interface Result {
  scenario: Scenario;
  requests: number;
  errors: number;
  errorSamples: Map<string, number>;
  seconds: number;
  /** Milliseconds, successful requests only, sorted. */
  latencies: Float64Array;
  serverCpuPercent: number;
  clientCpuPercent: number;
  serverMaxRssKiB: number;
}

interface Options {
  durationSeconds: number;
  warmupSeconds: number;
  concurrency: number;
  maxRequests: number;
}

const expectKind =
  (kind: string, extra?: (r: Record<string, unknown>) => string | undefined) => (r: Record<string, unknown>) =>
    r.kind !== kind ? `kind ${JSON.stringify(r.kind)}, expected ${kind}` : extra?.(r);

function hookUrl(hook: HookName): string {
  return `${hookPath(hook, defaultHandlerName(hook))}?timeout=10s`;
}

function scenarios(concurrency: number): Scenario[] {
  const discovery = Buffer.from(
    JSON.stringify({ apiVersion: 'hooks.runtime.cluster.x-k8s.io/v1alpha1', kind: 'DiscoveryRequest' }),
  );
  const acpi = Buffer.from(JSON.stringify(sampleRequest('AfterControlPlaneInitialized')));
  const plan = chainedPlanRequestBody();
  const acpiCheck = expectKind('AfterControlPlaneInitializedResponse');
  return [
    {
      name: 'discovery',
      path: `${HOOKS_PATH_PREFIX}/discovery?timeout=10s`,
      body: discovery,
      keepAlive: true,
      concurrency,
      check: expectKind('DiscoveryResponse', (r) =>
        Array.isArray(r.handlers) && r.handlers.length > 0 ? undefined : 'no handlers listed',
      ),
    },
    {
      name: 'AfterControlPlaneInitialized',
      path: hookUrl('AfterControlPlaneInitialized'),
      body: acpi,
      keepAlive: true,
      concurrency,
      check: acpiCheck,
    },
    {
      name: 'GenerateUpgradePlan 1.29->1.33',
      path: hookUrl('GenerateUpgradePlan'),
      body: plan,
      keepAlive: true,
      concurrency,
      check: expectKind('GenerateUpgradePlanResponse', (r) => {
        const steps = r.controlPlaneUpgrades as { version: string }[] | undefined;
        const versions = (steps ?? []).map((s) => s.version);
        return versions.length === 4 && versions[3] === 'v1.33.0'
          ? undefined
          : `unexpected controlPlaneUpgrades ${JSON.stringify(versions)}`;
      }),
    },
    {
      name: 'AfterControlPlaneInitialized, new TLS conn/req',
      path: hookUrl('AfterControlPlaneInitialized'),
      body: acpi,
      keepAlive: false,
      concurrency: Math.min(8, concurrency),
      check: acpiCheck,
    },
  ];
}

/** One POST as CAPI sends it; resolves on a Success that passes the scenario's check. */
async function post(port: number, ca: string, agent: Agent | false, scenario: Scenario): Promise<void> {
  const problem = scenario.check(await postHook({ port, ca, agent }, scenario.path, scenario.body));
  if (problem) throw new Error(problem);
}

function drive(
  port: number,
  ca: string,
  agent: Agent | false,
  scenario: Scenario,
  seconds: number,
  maxRequests: number,
) {
  return closedLoop(scenario.concurrency, seconds, maxRequests, () => post(port, ca, agent, scenario));
}

class ServerProcess {
  readonly child: ChildProcess;
  #pending: ((report: UsageReport) => void)[] = [];

  constructor(child: ChildProcess) {
    this.child = child;
    child.on('message', (message: ServerMessage) => {
      if (message.type === 'usage') this.#pending.shift()?.(message);
    });
  }

  static start(certDir: string): Promise<{ server: ServerProcess; port: number }> {
    const child = fork(fileURLToPath(import.meta.url), ['--server'], {
      env: { ...process.env, TLS_CERT_DIR: certDir, LOG_LEVEL: 'silent' },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    const server = new ServerProcess(child);
    return new Promise((resolve, reject) => {
      const onExit = (code: number | null) => reject(new Error(`server process exited (code ${code}) before ready`));
      child.once('exit', onExit);
      child.on('message', (message: ServerMessage) => {
        if (message.type === 'ready') {
          child.off('exit', onExit);
          resolve({ server, port: message.port });
        } else if (message.type === 'failed') {
          reject(new Error(`server failed to start: ${message.message}`));
        }
      });
    });
  }

  usage(): Promise<UsageReport> {
    return new Promise((resolve, reject) => {
      if (!this.child.connected) return reject(new Error('server process is gone'));
      this.#pending.push(resolve);
      this.child.send({ type: 'usage' } satisfies ParentMessage);
    });
  }

  stop(): Promise<void> {
    return new Promise((resolve) => {
      if (this.child.exitCode !== null || !this.child.connected) return resolve();
      const timer = setTimeout(() => this.child.kill('SIGKILL'), 5_000);
      this.child.once('exit', () => {
        clearTimeout(timer);
        resolve();
      });
      this.child.send({ type: 'stop' } satisfies ParentMessage);
    });
  }
}

async function runScenario(
  server: ServerProcess,
  port: number,
  ca: string,
  scenario: Scenario,
  options: Options,
): Promise<Result> {
  const agent = scenario.keepAlive
    ? new Agent({ keepAlive: true, maxSockets: scenario.concurrency, ca })
    : (false as const);
  try {
    // Warm-up (JIT, connection pool) on the same agent, not counted.
    await drive(port, ca, agent, scenario, options.warmupSeconds, options.maxRequests);
    const before = await server.usage();
    const clientBefore = process.cpuUsage();
    const phase = await drive(port, ca, agent, scenario, options.durationSeconds, options.maxRequests);
    const clientCpu = process.cpuUsage(clientBefore);
    const after = await server.usage();
    const latencies = Float64Array.from(phase.latencies).sort();
    const wallMicros = phase.seconds * 1e6;
    return {
      scenario,
      requests: phase.requests,
      errors: phase.errors,
      errorSamples: phase.errorSamples,
      seconds: phase.seconds,
      latencies,
      serverCpuPercent: ((after.cpuMicros - before.cpuMicros) / wallMicros) * 100,
      clientCpuPercent: ((clientCpu.user + clientCpu.system) / wallMicros) * 100,
      serverMaxRssKiB: after.maxRSS,
    };
  } finally {
    if (agent) agent.destroy();
  }
}

function report(results: Result[], peakRssKiB: number, commandLine: string, loadBefore: number): string {
  const rows = [
    ['scenario', 'conc', 'requests', 'errors', 'req/s', 'p50 ms', 'p90 ms', 'p99 ms', 'max ms', 'srv CPU', 'cli CPU'],
    ...results.map((r) => [
      r.scenario.name,
      String(r.scenario.concurrency),
      String(r.requests),
      String(r.errors),
      (r.requests / r.seconds).toFixed(0),
      formatMs(percentile(r.latencies, 50)),
      formatMs(percentile(r.latencies, 90)),
      formatMs(percentile(r.latencies, 99)),
      formatMs(r.latencies.length > 0 ? r.latencies[r.latencies.length - 1]! : NaN),
      `${r.serverCpuPercent.toFixed(0)}%`,
      `${r.clientCpuPercent.toFixed(0)}%`,
    ]),
  ];
  return [
    `command: ${commandLine}`,
    '',
    table(rows, (i) => i > 0),
    '',
    `server peak RSS: ${(peakRssKiB / 1024).toFixed(1)} MiB` +
      ` (per scenario, cumulative: ${results.map((r) => (r.serverMaxRssKiB / 1024).toFixed(1)).join(' / ')} MiB)`,
    machineLine(loadBefore),
    'CPU columns: % of one core over the measured window (server process / load generator process).',
  ].join('\n');
}

function parseOptions(): Options & { server: boolean } {
  const { values } = parseArgs({
    options: {
      server: { type: 'boolean', default: false },
      duration: { type: 'string', default: '10' },
      warmup: { type: 'string', default: '1' },
      concurrency: { type: 'string', default: '32' },
      'max-requests': { type: 'string', default: '1000000' },
    },
    strict: true,
  });
  return {
    server: values.server,
    durationSeconds: numberOption('duration', values.duration, 0.1, 600, false),
    warmupSeconds: numberOption('warmup', values.warmup, 0, 60, false),
    concurrency: numberOption('concurrency', values.concurrency, 1, 1024, true),
    maxRequests: numberOption('max-requests', values['max-requests'], 1, 100_000_000, true),
  };
}

async function main(): Promise<number> {
  const options = parseOptions();
  if (options.server) {
    await runServer();
    return -1; // keeps running until told to stop
  }
  const commandLine = [
    'node',
    ...process.execArgv,
    relative(process.cwd(), process.argv[1] ?? 'bench/hooks.ts'),
    ...process.argv.slice(2),
  ].join(' ');

  const dir = mkdtempSync(join(tmpdir(), 'capi-uo-bench-'));
  let server: ServerProcess | undefined;
  const cleanUp = () => {
    server?.child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  };
  process.once('SIGINT', () => {
    cleanUp();
    process.exit(130);
  });
  try {
    const caPem = writeServingCertificate(dir);
    const started = await ServerProcess.start(dir);
    server = started.server;

    const loadBefore = loadavg()[0] ?? 0;
    const all = scenarios(options.concurrency);
    const results: Result[] = [];
    for (const scenario of all) {
      process.stderr.write(
        `running ${scenario.name} (concurrency ${scenario.concurrency}, ${options.warmupSeconds} s warm-up + ${options.durationSeconds} s)...\n`,
      );
      results.push(await runScenario(server, started.port, caPem, scenario, options));
    }
    const { maxRSS } = await server.usage();
    await server.stop();

    console.log(report(results, maxRSS, commandLine, loadBefore));
    const failed = results.filter((r) => r.errors > 0);
    if (failed.length > 0) {
      console.log('');
      for (const r of failed) {
        console.log(`ERRORS in ${r.scenario.name}: ${r.errors} of ${r.requests} requests failed`);
        for (const [message, count] of [...r.errorSamples].slice(0, 5)) console.log(`  ${count} x ${message}`);
      }
      console.log('RESULT: FAILED (requests with errors)');
      return 1;
    }
    return 0;
  } finally {
    cleanUp();
  }
}

runMain(main);
