// The whole product as separate processes on free loopback ports, for a
// benchmark: a Temporal dev server, the worker (`ROLE=worker`) and the hook
// server (`ROLE=api`), each the real entry point (main.js, compiled from src/
// as the image is) with the image's Node options and a prebuilt workflow
// bundle, as the Deployments run them. Everything is started under one temporary directory (certificates,
// SQLite file, logs) and stop() ends it all; a process that outlives its
// benchmark is a bug of this file.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, copyFileSync, cpSync, mkdtempSync, openSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePorts } from '../src/local/free-ports.ts';
import { startDevServer, type DevServer } from '../src/local/temporal-dev-server.ts';
import { startProductionTemporal, type ProductionTemporal } from '../src/local/temporal-production.ts';
import { imageMemoryEnv, imageNodeOptions } from './image-env.ts';
import { writeServingCertificate } from './hook-server.ts';

const execFileAsync = promisify(execFile);
// Preloaded (`node --import`) into the extension processes: when the benchmark dies without
// stopping them (SIGKILL, a crash), their IPC channel closes and they stop as a pod would,
// through their own SIGTERM handler, instead of staying behind on the machine. A data: URL of
// plain JavaScript, so no TypeScript is loaded into the processes (see buildExtension).
const EXIT_WITH_PARENT = `data:text/javascript,${encodeURIComponent(
  "process.on('disconnect', () => process.kill(process.pid, 'SIGTERM'));",
)}`;

/** Which Temporal the stack runs on: the CLI's dev server (one process, SQLite) or the server's services on PostgreSQL. */
export type TemporalKind = 'dev' | 'production';

export interface StackOptions {
  /** Default dev; production needs `source scripts/env.sh --temporal-production`. */
  temporal?: TemporalKind;
  /** Checkout whose src/main.ts and workflow code run (default: this one); lets a run measure another commit. */
  extensionRoot: string;
  taskQueue: string;
  logLevel: string;
  /** Node flags of the api and the worker (default: the image's NODE_OPTIONS). */
  nodeFlags: string[];
  log: (line: string) => void;
  /** Called before anything starts with what stops it, so a Ctrl-C during the start stops it too. */
  onStopper?: (stopper: Pick<Stack, 'stop' | 'killNow'>) => void;
  /**
   * A management cluster for both processes (MANAGEMENT_KUBECONFIG) and whether the api checks hook
   * requests against it; default none, and HOOK_REQUEST_CHECKS=off.
   */
  management?: { kubeconfig: string; requestChecks: boolean };
}

export interface ExtensionChild {
  role: 'api' | 'worker';
  child: ChildProcess;
  pid: number;
  opsUrl: string;
  logFile: string;
}

export interface Stack {
  dir: string;
  caPem: string;
  temporal: DevServer;
  temporalKind: TemporalKind;
  /** Temporal's processes by component (dev: one; production: each service and PostgreSQL, whose backends are its children). */
  temporalPids: Record<string, number>;
  /** http://127.0.0.1:<port>/metrics of the frontend (its per-operation request counters). */
  temporalMetricsUrl: string;
  api: ExtensionChild;
  hookPort: number;
  worker: ExtensionChild;
  stop(): Promise<void>;
  /** Last resort on process exit: SIGKILL whatever is still running (synchronous). */
  killNow(): void;
}

// The harness's free ports (left in TIME_WAIT, see src/local/free-ports.ts), for the bench and chaos runs too.
export { freePorts };

/** Ends a child: SIGTERM (its own graceful stop), SIGKILL after `graceMs`. */
export async function end(child: ChildProcess, graceMs: number): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}

export async function waitReady(c: ExtensionChild, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = 'no answer';
  while (Date.now() < deadline) {
    if (c.child.exitCode !== null)
      throw new Error(`the ${c.role} process exited (${c.child.exitCode}); see ${c.logFile}`);
    last = await fetch(`${c.opsUrl}/readyz`).then(
      async (r) => JSON.stringify(await r.json()),
      () => 'no answer',
    );
    if (last.startsWith('{"status":"ok"')) return;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`the ${c.role} process is not ready after ${timeoutMs} ms (${last}); see ${c.logFile}`);
}

export async function startStack(options: StackOptions): Promise<Stack> {
  const dir = mkdtempSync(join(tmpdir(), 'capi-uo-bench-fleet-'));
  const children: ChildProcess[] = [];
  let temporal: DevServer | ProductionTemporal | undefined;
  let stopped = false;
  const killNow = () => {
    if (stopped) return;
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    const pids = !temporal
      ? []
      : 'pids' in temporal
        ? Object.values((temporal as ProductionTemporal).pids)
        : [temporal.pid];
    for (const pid of pids) {
      if (pid <= 0) continue;
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  };
  const stop = async () => {
    // api first (it stops taking hook calls), then the worker, then the server they talk to.
    for (const c of [...children].reverse()) await end(c, 10_000);
    await temporal?.stop();
    stopped = true;
    rmSync(dir, { recursive: true, force: true });
  };
  options.onStopper?.({ stop, killNow });
  try {
    const caPem = writeServingCertificate(dir);
    const [metricsPort, hookPort, apiOpsPort, workerOpsPort] = await freePorts(4);
    // The dev server already serves per-operation request counters, on a random port unless told:
    // a wrapper adds --metrics-port, so startDevServer stays the one place that knows its flags.
    // Where util-linux's setpriv exists the server also gets SIGTERM when this process dies
    // without stopping it (SIGKILL, a crash): a Go binary has no IPC channel to notice that by.
    const cli = join(dir, 'temporal-with-metrics');
    const real = `'${(process.env.TEMPORAL_CLI ?? 'temporal').replaceAll("'", `'\\''`)}'`;
    writeFileSync(
      cli,
      [
        '#!/bin/sh',
        `if command -v setpriv >/dev/null; then exec setpriv --pdeathsig TERM -- ${real} "$@" --metrics-port ${metricsPort}; fi`,
        `exec ${real} "$@" --metrics-port ${metricsPort}`,
        '',
      ].join('\n'),
    );
    chmodSync(cli, 0o755);
    // The worker loads a prebuilt bundle, as the image does (webpack at start would change its memory).
    const bundle = join(dir, 'workflow-bundle.js');
    const kind = options.temporal ?? 'dev';
    const [server, , main] = await Promise.all([
      kind === 'production'
        ? startProductionTemporal({ stateDir: join(dir, 'temporal') })
        : startDevServer({
            executable: cli,
            dbFilename: join(dir, 'temporal.db'),
            logFile: join(dir, 'temporal.log'),
            port: 0,
          }),
      execFileAsync(
        process.execPath,
        ['--disable-warning=ExperimentalWarning', 'scripts/bundle-workflows.ts', bundle],
        { cwd: options.extensionRoot },
      ),
      buildExtension(options.extensionRoot, dir),
    ]);
    temporal = server;
    const production = kind === 'production' ? (server as ProductionTemporal) : undefined;
    const temporalPids: Record<string, number> = production ? { ...production.pids } : { 'dev server': server.pid };
    options.log(
      `Temporal ${kind === 'production' ? 'production-shaped' : 'dev server'} ${server.address} ` +
        `(${Object.entries(temporalPids)
          .map(([k, v]) => `${k} ${v}`)
          .join(', ')}), workflow bundle and ${main} built`,
    );

    const startChild = (role: 'api' | 'worker', opsPort: number, extra: Record<string, string>): ExtensionChild => {
      const child = spawnExtension({
        role,
        main,
        cwd: options.extensionRoot,
        nodeFlags: options.nodeFlags,
        logFile: join(dir, `${role}.log`),
        opsPort,
        env: {
          TEMPORAL_ADDRESS: server.address,
          TEMPORAL_NAMESPACE: server.namespace,
          TEMPORAL_TASK_QUEUE: options.taskQueue,
          LOG_LEVEL: options.logLevel,
          // Without a management cluster there is nothing to check hook requests against (the
          // repeat polls measured never read it; bench/fleet.ts --management testbed measures the checks).
          ...(options.management
            ? {
                MANAGEMENT_KUBECONFIG: options.management.kubeconfig,
                HOOK_REQUEST_CHECKS: options.management.requestChecks ? 'on' : 'off',
              }
            : { HOOK_REQUEST_CHECKS: 'off' }),
          ...extra,
        },
      });
      children.push(child.child);
      return child;
    };
    const worker = startChild('worker', workerOpsPort!, { WORKFLOW_BUNDLE_PATH: bundle });
    const api = startChild('api', apiOpsPort!, {
      HOOK_SERVER_HOST: '127.0.0.1',
      HOOK_SERVER_PORT: String(hookPort),
      TLS_CERT_DIR: dir,
    });
    await Promise.all([waitReady(worker, 120_000), waitReady(api, 60_000)]);
    options.log(`worker (pid ${worker.pid}) and api (pid ${api.pid}) ready; logs in ${dir}`);
    return {
      dir,
      caPem,
      temporal: server,
      temporalKind: kind,
      temporalPids,
      temporalMetricsUrl: production ? production.metricsUrls.frontend : `http://127.0.0.1:${metricsPort}/metrics`,
      api,
      hookPort: hookPort!,
      worker,
      stop,
      killNow,
    };
  } catch (err) {
    await stop().catch(() => killNow());
    throw err;
  }
}

/**
 * Starts main.js (see buildExtension) as the image does: the image's memory environment, `nodeFlags`,
 * ROLE=`role`, its ops server on 127.0.0.1:`opsPort`, output to `logFile`. Only what the process
 * needs is passed (PATH, HOME and `env`): nothing such as KUBERNETES_SERVICE_HOST leaks in from
 * the caller. It stops on its own when the benchmark dies (EXIT_WITH_PARENT).
 */
export function spawnExtension(o: {
  role: 'api' | 'worker';
  main: string;
  cwd: string;
  nodeFlags: string[];
  logFile: string;
  opsPort: number;
  env: Record<string, string>;
}): ExtensionChild {
  const out = openSync(o.logFile, 'a');
  const child = spawn(
    process.execPath,
    ['--disable-warning=ExperimentalWarning', ...o.nodeFlags, '--import', EXIT_WITH_PARENT, o.main],
    {
      cwd: o.cwd,
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        ROLE: o.role,
        OPS_SERVER_HOST: '127.0.0.1',
        OPS_SERVER_PORT: String(o.opsPort),
        ...imageMemoryEnv(),
        ...o.env,
      },
      stdio: ['ignore', out, out, 'ipc'],
    },
  );
  return { role: o.role, child, pid: child.pid ?? -1, opsUrl: `http://127.0.0.1:${o.opsPort}`, logFile: o.logFile };
}

/**
 * Compiles `root`'s src/ as the image does (`tsconfig.build.json`: tsc to JavaScript) into
 * `dir`/dist and returns its main.js. Running src/main.ts instead would load Node's type
 * stripper (a WebAssembly compiler, ~18 MiB of resident memory) into processes whose memory
 * the benchmark measures; the image has none of it. `dir` gets the checkout's package.json
 * (ESM) and a link to its node_modules, as /app has in the image.
 */
export async function buildExtension(root: string, dir: string): Promise<string> {
  const outDir = join(dir, 'dist');
  await execFileAsync(
    process.execPath,
    [join(root, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json', '--outDir', outDir],
    { cwd: root, maxBuffer: 16 << 20 },
  ).catch((err: unknown) => {
    const out = (err as { stdout?: string }).stdout ?? '';
    throw new Error(`tsc -p tsconfig.build.json failed in ${root}:\n${out.slice(0, 2000)}`, { cause: err });
  });
  // What tsc does not copy and the code reads next to itself (the job executor's upgrade-node.sh; the Dockerfile copies it too).
  cpSync(join(root, 'src'), outDir, {
    recursive: true,
    filter: (from) => !from.endsWith('.ts') && !from.includes('/src/local'),
  });
  copyFileSync(join(root, 'package.json'), join(dir, 'package.json'));
  symlinkSync(join(root, 'node_modules'), join(dir, 'node_modules'));
  return join(outDir, 'main.js');
}

/** The image's NODE_OPTIONS unless BENCH_NODE_FLAGS says otherwise ('' = none). */
export function benchNodeFlags(): string[] {
  const own = process.env.BENCH_NODE_FLAGS;
  return own !== undefined ? own.split(' ').filter(Boolean) : imageNodeOptions();
}

export interface FrontendCalls {
  count: number;
  /** Total time the frontend took to answer them (so count / seconds is its mean latency). */
  seconds: number;
}

/** The dev server frontend's counters for `namespace`, by operation (callers: our api and worker). */
export async function frontendRequests(metricsUrl: string, namespace: string): Promise<Map<string, FrontendCalls>> {
  const text = await (await fetch(metricsUrl)).text();
  const out = new Map<string, FrontendCalls>();
  for (const line of text.split('\n')) {
    const field = line.startsWith('service_requests{')
      ? 'count'
      : line.startsWith('service_latency_sum{')
        ? 'seconds'
        : undefined;
    if (!field || !line.includes('service_name="frontend"') || !line.includes(`namespace="${namespace}"`)) continue;
    const operation = /operation="([^"]+)"/.exec(line)?.[1];
    if (!operation) continue;
    const entry = out.get(operation) ?? { count: 0, seconds: 0 };
    entry[field] += Number(line.slice(line.lastIndexOf(' ') + 1));
    out.set(operation, entry);
  }
  return out;
}
