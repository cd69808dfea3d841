// GenerateUpgradePlan throughput: our hook server side by side with Cluster
// API's own Go test extension (sigs.k8s.io/cluster-api/test/extension), the
// reference Runtime Extension CAPI's e2e tests run. A benchmark, not a test.
//
//   eval "$(scripts/tools-capi.sh test-extension)"   # builds it once into the tool cache
//   node bench/upgrade-plan-vs-go.ts [--duration 10] [--warmup 2] [--concurrency 32] [--rounds 2]
//        [--log-level info] [--cpu-prof DIR]
//
// Both servers run at once on free loopback ports with the same serving
// certificate; one client (this process: keep-alive HTTPS, no Content-Type,
// like CAPI's) drives each in turn with the same body and concurrency. Rounds
// alternate the order (ours, Go, Go, ours, ...) so that drift in the machine's
// load (2 shared cores) does not favour one side. Any answer that is not a
// 200 with status Success and the expected four-step plan fails the run.
//
// What each side computes: ours plans from its release catalog; the Go
// extension plans from the Kubernetes versions of kind's node images (its
// kind mapper) with CAPI's GetUpgradePlanFromClusterClassVersions. Both
// answer this body with a real four-step control-plane chain ending at
// v1.33.0 (the intermediate patch versions differ). The Go extension needs a
// kubeconfig to start its controller manager, but nothing it runs here
// talks to an API server, so it gets one that points at a closed loopback
// port. Each side logs one line per call as it does in production (ours at
// LOG_LEVEL=info unless --log-level says otherwise; the Go one through klog,
// which cannot be silenced), both into files.
//
// Server CPU and peak RSS come from /proc for both processes (Linux only),
// so they are measured the same way for a Node and a Go process.
import { fork, spawn, type ChildProcess } from 'node:child_process';
import { closeSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { Agent } from 'node:https';
import { createServer, type AddressInfo } from 'node:net';
import { loadavg, tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { HOOKS_PATH_PREFIX } from '../src/api/hooks/contract.ts';
import { chainedPlanRequestBody, postHook, type Target } from './lib/hook-client.ts';
import { startBenchHookServer, writeServingCertificate } from '../support/hook-server.ts';
import { closedLoop, type Phase } from './lib/load.ts';
import { formatMs, machineLine, numberOption, percentile, runMain, table } from './lib/report.ts';
import { cpuSecondsOf, memoryOf } from './lib/proc.ts';

// Both servers register the handler under the same name, so one path fits both.
const PLAN_PATH = `${HOOKS_PATH_PREFIX}/generateupgradeplan/generate-upgrade-plan?timeout=10s`;
// Bounds each phase in count as well as in time.
const MAX_REQUESTS_PER_PHASE = 1_000_000;
const DISCOVERY_PATH = `${HOOKS_PATH_PREFIX}/discovery`;
const DISCOVERY_BODY = Buffer.from(
  JSON.stringify({ apiVersion: 'hooks.runtime.cluster.x-k8s.io/v1alpha1', kind: 'DiscoveryRequest' }),
);

type ServerMessage = { type: 'ready'; port: number } | { type: 'failed'; message: string };

// ---------------------------------------------------------------- our server (child process)

/** The real hook server, as bench/hooks.ts runs it: TLS, fastify, routes, no Temporal needed for plans. */
async function runOurServer(): Promise<void> {
  const send = (message: ServerMessage) => process.send?.(message);
  try {
    const server = await startBenchHookServer(process.env.TLS_CERT_DIR, process.env.LOG_LEVEL ?? 'info');
    // Exiting through process.exit lets --cpu-prof write its profile; a
    // vanished parent must not leave a server behind.
    const stop = () => void server.close().finally(() => process.exit(0));
    process.on('disconnect', stop);
    process.on('message', (message: { type: string }) => message.type === 'stop' && stop());
    send({ type: 'ready', port: Number(new URL(server.url).port) });
  } catch (err) {
    send({ type: 'failed', message: err instanceof Error ? err.message : String(err) });
    process.exit(1);
  }
}

// ---------------------------------------------------------------- the two server processes

interface Server {
  name: string;
  child: ChildProcess;
  port: number;
  stop(): Promise<void>;
}

const exited = (child: ChildProcess) => child.exitCode !== null || child.signalCode !== null;

function stopChild(child: ChildProcess, graceful: () => void): Promise<void> {
  return new Promise((done) => {
    if (exited(child)) return done();
    const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
    child.once('exit', () => {
      clearTimeout(timer);
      done();
    });
    graceful();
  });
}

const logTail = (file: string) => readFileSync(file, 'utf8').split('\n').slice(-15).join('\n');

async function startOurs(certDir: string, logFile: string, logLevel: string, cpuProfDir?: string): Promise<Server> {
  const log = openSync(logFile, 'a');
  const child = fork(fileURLToPath(import.meta.url), ['--server'], {
    env: { ...process.env, TLS_CERT_DIR: certDir, LOG_LEVEL: logLevel },
    execArgv: [...process.execArgv, ...(cpuProfDir ? ['--cpu-prof', `--cpu-prof-dir=${cpuProfDir}`] : [])],
    stdio: ['ignore', log, log, 'ipc'],
  });
  closeSync(log);
  const port = await new Promise<number>((ready, fail) => {
    child.once('exit', (code) => fail(new Error(`our server exited (code ${code}):\n${logTail(logFile)}`)));
    child.on('message', (m: ServerMessage) =>
      m.type === 'ready' ? ready(m.port) : fail(new Error(`our server failed: ${m.message}`)),
    );
  });
  child.removeAllListeners('exit');
  return {
    name: 'ours (Node)',
    child,
    port,
    stop: () => stopChild(child, () => child.send({ type: 'stop' })),
  };
}

async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((ok) => probe.listen(0, '127.0.0.1', ok));
  const { port } = probe.address() as AddressInfo;
  await new Promise((ok) => probe.close(ok));
  return port;
}

async function startGo(binary: string, certDir: string, ca: string, dir: string, logFile: string): Promise<Server> {
  const kubeconfig = join(dir, 'kubeconfig');
  writeFileSync(
    kubeconfig,
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'none', cluster: { server: 'https://127.0.0.1:1' } }],
      users: [{ name: 'none', user: { token: 'none' } }],
      contexts: [{ name: 'none', context: { cluster: 'none', user: 'none' } }],
      'current-context': 'none',
    }),
  );
  const port = await freePort();
  const log = openSync(logFile, 'a');
  // Loopback only: the health probe on an ephemeral port, no diagnostics
  // (metrics) listener; the webhook server binds 127.0.0.1 because
  // scripts/tools-capi.sh builds it with a patched controller-runtime.
  const child = spawn(
    binary,
    [
      `--kubeconfig=${kubeconfig}`,
      `--webhook-port=${port}`,
      `--webhook-cert-dir=${certDir}`,
      '--health-addr=127.0.0.1:0',
      '--diagnostics-address=0',
    ],
    { stdio: ['ignore', log, log] },
  );
  closeSync(log);
  const target: Target = { port, ca, agent: false };
  for (const start = Date.now(); ; await sleep(100)) {
    if (exited(child)) throw new Error(`the Go test extension exited (code ${child.exitCode}):\n${logTail(logFile)}`);
    if (Date.now() - start > 30_000) {
      child.kill('SIGKILL');
      throw new Error(`the Go test extension did not answer discovery within 30 s:\n${logTail(logFile)}`);
    }
    const answered = await postHook(target, DISCOVERY_PATH, DISCOVERY_BODY).then(
      () => true,
      () => false,
    );
    if (answered) break;
  }
  return { name: 'Go test extension', child, port, stop: () => stopChild(child, () => child.kill('SIGTERM')) };
}

// ---------------------------------------------------------------- measuring

/** The control-plane versions of a plan answer, or a problem. */
function planVersions(answer: Record<string, unknown>): string[] {
  const versions = ((answer.controlPlaneUpgrades ?? []) as { version: string }[]).map((s) => s.version);
  if (versions.length !== 4 || versions[3] !== 'v1.33.0')
    throw new Error(`unexpected controlPlaneUpgrades ${JSON.stringify(versions)}`);
  return versions;
}

interface Totals {
  server: Server;
  /** The first answer's control-plane chain, printed so a reader sees what each side computes. */
  plan: string[];
  /** One measured phase per round. */
  phases: Phase[];
  serverCpuSeconds: number;
  clientCpuSeconds: number;
}

interface Options {
  durationSeconds: number;
  warmupSeconds: number;
  concurrency: number;
  rounds: number;
  logLevel: string;
  cpuProfDir: string | undefined;
}

async function measure(totals: Totals, ca: string, body: Buffer, options: Options): Promise<void> {
  const agent = new Agent({ keepAlive: true, maxSockets: options.concurrency, ca });
  const target: Target = { port: totals.server.port, ca, agent };
  const send = async () => planVersions(await postHook(target, PLAN_PATH, body));
  try {
    // Warm-up (JIT, Go's and V8's heaps, the connection pool), not counted.
    await closedLoop(options.concurrency, options.warmupSeconds, MAX_REQUESTS_PER_PHASE, send);
    const pid = totals.server.child.pid!;
    const before = cpuSecondsOf(pid);
    const clientBefore = process.cpuUsage();
    totals.phases.push(await closedLoop(options.concurrency, options.durationSeconds, MAX_REQUESTS_PER_PHASE, send));
    const client = process.cpuUsage(clientBefore);
    totals.serverCpuSeconds += cpuSecondsOf(pid) - before;
    totals.clientCpuSeconds += (client.user + client.system) / 1e6;
  } finally {
    agent.destroy();
  }
}

const sum = (phases: Phase[], f: (p: Phase) => number) => phases.reduce((total, p) => total + f(p), 0);
const rate = (p: Phase) => p.requests / p.seconds;
/** Throughput over all rounds: all requests over all measured seconds. */
const throughput = (t: Totals) => sum(t.phases, (p) => p.requests) / sum(t.phases, (p) => p.seconds);
const answers = (t: Totals) => sum(t.phases, (p) => p.latencies.length);
/** Server CPU seconds per successful answer: moves less than req/s with the machine's other load. */
const cpuPerAnswer = (t: Totals) => t.serverCpuSeconds / Math.max(1, answers(t));

function report(all: Totals[], options: Options, commandLine: string, loadBefore: number): string {
  const header = 'server|requests|errors|req/s|per round|p50 ms|p99 ms|max ms|srv CPU|CPU µs/req|cli CPU|peak RSS';
  const rows = [
    header.split('|'),
    ...all.map((t) => {
      const sorted = Float64Array.from(t.phases.flatMap((p) => p.latencies)).sort();
      const seconds = sum(t.phases, (p) => p.seconds);
      return [
        t.server.name,
        String(sum(t.phases, (p) => p.requests)),
        String(sum(t.phases, (p) => p.errors)),
        throughput(t).toFixed(0),
        t.phases.map((p) => rate(p).toFixed(0)).join(' / '),
        formatMs(percentile(sorted, 50)),
        formatMs(percentile(sorted, 99)),
        formatMs(sorted.length > 0 ? sorted[sorted.length - 1]! : NaN),
        `${((t.serverCpuSeconds / seconds) * 100).toFixed(0)}%`,
        (cpuPerAnswer(t) * 1e6).toFixed(0),
        `${((t.clientCpuSeconds / seconds) * 100).toFixed(0)}%`,
        `${((memoryOf(t.server.child.pid!)?.hwmKiB ?? NaN) / 1024).toFixed(1)} MiB`,
      ];
    }),
  ];
  const [ours, go] = all as [Totals, Totals];
  const ratio = throughput(ours) / throughput(go);
  const roundRatios = ours.phases.map((p, i) => (rate(p) / rate(go.phases[i]!)).toFixed(2)).join(' / ');
  return [
    `command: ${commandLine}`,
    `GenerateUpgradePlan v1.29.0 -> v1.33.0, concurrency ${options.concurrency}, ${options.rounds} round(s) of` +
      ` ${options.warmupSeconds} s warm-up + ${options.durationSeconds} s per server, keep-alive HTTPS, no Content-Type`,
    '',
    table(rows, (i) => i > 0),
    '',
    `ratio ours / Go throughput: ${ratio.toFixed(2)}x (per round ${roundRatios}); target >= 1.0x: ${ratio >= 1 ? 'met' : 'NOT met'}`,
    `server CPU per answer, Go / ours: ${(cpuPerAnswer(go) / cpuPerAnswer(ours)).toFixed(2)}x`,
    `plans: ours ${ours.plan.join(' ')}; Go ${go.plan.join(' ')}`,
    '  (both compute a real chain: ours from its release catalog, the Go extension from kind node-image versions)',
    `logging: ours LOG_LEVEL=${options.logLevel}, Go klog -v=2 (one line per call); both into files`,
    machineLine(loadBefore),
    'srv CPU / cli CPU: % of one core over the measured windows (server process / this load generator);' +
      ' peak RSS: the server process since its start (VmHWM).',
  ].join('\n');
}

// ---------------------------------------------------------------- main

function parseOptions(): Options & { server: boolean } {
  const { values } = parseArgs({
    options: {
      server: { type: 'boolean', default: false },
      duration: { type: 'string', default: '10' },
      warmup: { type: 'string', default: '2' },
      concurrency: { type: 'string', default: '32' },
      rounds: { type: 'string', default: '2' },
      'log-level': { type: 'string', default: 'info' },
      'cpu-prof': { type: 'string' },
    },
    strict: true,
  });
  return {
    server: values.server,
    durationSeconds: numberOption('duration', values.duration, 0.1, 600, false),
    warmupSeconds: numberOption('warmup', values.warmup, 0, 60, false),
    concurrency: numberOption('concurrency', values.concurrency, 1, 1024, true),
    rounds: numberOption('rounds', values.rounds, 1, 20, true),
    logLevel: values['log-level'],
    cpuProfDir: values['cpu-prof'] === undefined ? undefined : resolve(values['cpu-prof']),
  };
}

async function main(): Promise<number> {
  const options = parseOptions();
  if (options.server) {
    await runOurServer();
    return -1; // keeps running until told to stop
  }
  const binary = process.env.CAPI_TEST_EXTENSION_BINARY;
  if (!binary)
    throw new Error('CAPI_TEST_EXTENSION_BINARY is not set: run eval "$(scripts/tools-capi.sh test-extension)" first');
  const script = relative(process.cwd(), process.argv[1] ?? 'bench/upgrade-plan-vs-go.ts');
  const commandLine = ['node', ...process.execArgv, script, ...process.argv.slice(2)].join(' ');

  const dir = mkdtempSync(join(tmpdir(), 'capi-uo-bench-vs-go-'));
  const servers: Server[] = [];
  const cleanUp = () => {
    for (const s of servers) s.child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  };
  process.once('SIGINT', () => {
    cleanUp();
    process.exit(130);
  });
  try {
    // The certificates get a directory of their own: our server watches its
    // certificate directory for rotation, and the logs written next to them
    // on every call would make it re-read the key pair each time.
    const certDir = join(dir, 'certs');
    mkdirSync(certDir);
    const ca = writeServingCertificate(certDir);
    servers.push(await startOurs(certDir, join(dir, 'ours.log'), options.logLevel, options.cpuProfDir));
    servers.push(await startGo(binary, certDir, ca, dir, join(dir, 'go.log')));
    const body = chainedPlanRequestBody();
    const all: Totals[] = [];
    for (const server of servers) {
      // One answer each up front: a server that cannot plan this body fails before any load.
      const plan = planVersions(await postHook({ port: server.port, ca, agent: false }, PLAN_PATH, body));
      all.push({ server, plan, phases: [], serverCpuSeconds: 0, clientCpuSeconds: 0 });
    }
    const loadBefore = loadavg()[0] ?? 0;
    for (let round = 0; round < options.rounds; round++) {
      for (const totals of round % 2 === 0 ? all : [...all].reverse()) {
        process.stderr.write(`round ${round + 1}/${options.rounds}: ${totals.server.name}...\n`);
        await measure(totals, ca, body, options);
      }
    }
    console.log(report(all, options, commandLine, loadBefore));
    for (const s of servers) await s.stop();
    if (options.cpuProfDir) console.log(`CPU profile of our server: ${options.cpuProfDir}/*.cpuprofile`);
    const failed = all.filter((t) => sum(t.phases, (p) => p.errors) > 0);
    for (const t of failed) {
      console.log(`ERRORS from ${t.server.name}:`);
      for (const [message, count] of t.phases.flatMap((p) => [...p.errorSamples]).slice(0, 5))
        console.log(`  ${count} x ${message}`);
    }
    if (failed.length > 0) console.log('RESULT: FAILED (requests with errors)');
    return failed.length > 0 ? 1 : 0;
  } finally {
    cleanUp();
  }
}

runMain(main);
