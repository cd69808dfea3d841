// What the chaos run starts, each a separate process it can kill and start again:
// its own test bed (management + KWOK workload kube-apiservers, scripts/testbed.sh),
// its own Temporal dev server (SQLite file and port kept across a SIGKILL), and
// the api(s) and worker(s) as the image runs them (src/main.ts, ROLE=api|worker).
// Its own, not the test tiers' shared ones: a SIGSTOPped API server or a killed
// Temporal would break every other test running beside it.
import { execFile } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { startDevServer, type DevServer } from '../../src/local/temporal-dev-server.ts';
import { writeServingCertificate } from '../hook-server.ts';
import { end, freePorts, spawnExtension, waitReady, type ExtensionChild } from '../stack.ts';

const execFileAsync = promisify(execFile);

export interface BedOptions {
  root: string;
  dir: string;
  apis: number;
  workers: number;
  taskQueue: string;
  log: (line: string) => void;
}

export interface Bed {
  caPem: string;
  testbedState: string;
  temporalAddress: string;
  temporalNamespace: string;
  apis: ExtensionChild[];
  workers: ExtensionChild[];
  /** https://127.0.0.1:<port> of each live api, in order. */
  hookUrls(): string[];
  /** SIGKILL, then (after `pauseMs`) a new process in its place, as a Deployment would. */
  killAndRestart(role: 'api' | 'worker', index: number, pauseMs: number): Promise<void>;
  killTemporalAndRestart(pauseMs: number): Promise<void>;
  /** SIGSTOP the workload cluster's kube-apiserver for `pauseMs`, then SIGCONT. */
  stopWorkloadApiServer(pauseMs: number): Promise<void>;
  stop(): Promise<void>;
  /** Synchronous last resort (process exit): SIGKILL what is still running, SIGCONT the API server. */
  killNow(): void;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const alive = (c: ExtensionChild) => c.child.exitCode === null && c.child.signalCode === null;

/** The pid of the workload cluster's kube-apiserver of the test bed in `stateDir` (kwokctl names it capi-uo-wl-…). */
function workloadApiServerPid(stateDir: string): number {
  const marker = join(stateDir, 'kwok', 'clusters', 'capi-uo-wl-');
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      if (!readlinkSync(`/proc/${pid}/exe`).endsWith('/kube-apiserver')) continue;
      if (readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(marker)) return Number(pid);
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  throw new Error(`no kube-apiserver of the workload cluster under ${marker}`);
}

/** `onStarted` is called with the bed's stop and killNow as soon as there is anything to stop. */
export async function startBed(
  o: BedOptions,
  onStarted: (stoppers: Pick<Bed, 'stop' | 'killNow'>) => void,
): Promise<Bed> {
  const testbedDir = join(o.dir, 'testbed');
  const extensions: ExtensionChild[] = [];
  let temporal: DevServer | undefined;
  let stoppedPid: number | undefined;
  let testbedUp = false;
  const killNow = () => {
    if (stoppedPid !== undefined) process.kill(stoppedPid, 'SIGCONT');
    for (const c of extensions) if (alive(c)) c.child.kill('SIGKILL');
    if (temporal)
      try {
        process.kill(temporal.pid, 'SIGKILL');
      } catch {
        // gone
      }
  };
  const stop = async () => {
    if (stoppedPid !== undefined) process.kill(stoppedPid, 'SIGCONT');
    stoppedPid = undefined;
    for (const c of [...extensions].reverse()) await end(c.child, 10_000);
    await temporal?.stop();
    if (testbedUp || existsSync(testbedDir))
      await execFileAsync(join(o.root, 'scripts/testbed.sh'), ['down', testbedDir]).catch(() => undefined);
  };
  onStarted({ stop, killNow });

  const t0 = Date.now();
  const bundle = process.env.TEST_WORKFLOW_BUNDLE ?? join(o.dir, 'workflow-bundle.js');
  testbedUp = true;
  const dbFilename = join(o.dir, 'temporal.db');
  const [temporalPort] = await freePorts(1);
  const startTemporal = () =>
    startDevServer({
      executable: process.env.TEMPORAL_CLI ?? 'temporal',
      dbFilename,
      logFile: join(o.dir, 'temporal.log'),
      port: temporalPort!,
    });
  [, temporal] = await Promise.all([
    execFileAsync(join(o.root, 'scripts/testbed.sh'), ['up', testbedDir], { maxBuffer: 16 << 20 }),
    startTemporal(),
    process.env.TEST_WORKFLOW_BUNDLE
      ? undefined
      : execFileAsync(
          process.execPath,
          ['--disable-warning=ExperimentalWarning', join(o.root, 'scripts/bundle-workflows.ts'), bundle],
          { cwd: o.root },
        ),
  ]);
  const testbedState = join(testbedDir, 'testbed.json');
  const workerKubeconfig = (JSON.parse(readFileSync(testbedState, 'utf8')) as { workerKubeconfig: string })
    .workerKubeconfig;
  o.log(
    `test bed, Temporal ${temporal.address} and workflow bundle ready in ${((Date.now() - t0) / 1000).toFixed(1)} s`,
  );

  const caPem = writeServingCertificate(o.dir);
  const hookPorts = new Map<ExtensionChild, number>();
  let started = 0;
  const startOne = async (role: 'api' | 'worker'): Promise<ExtensionChild> => {
    const [opsPort, hookPort] = await freePorts(2);
    const n = ++started;
    const child = spawnExtension({
      role,
      main: join(o.root, 'src/main.ts'),
      cwd: o.root,
      nodeFlags: [],
      logFile: join(o.dir, `${role}-${n}.log`),
      opsPort: opsPort!,
      env: {
        TEMPORAL_ADDRESS: temporal!.address,
        TEMPORAL_NAMESPACE: temporal!.namespace,
        TEMPORAL_TASK_QUEUE: o.taskQueue,
        LOG_LEVEL: 'warn',
        ...(role === 'worker'
          ? { MANAGEMENT_KUBECONFIG: workerKubeconfig, WORKFLOW_BUNDLE_PATH: bundle }
          : {
              HOOK_SERVER_HOST: '127.0.0.1',
              HOOK_SERVER_PORT: String(hookPort),
              TLS_CERT_DIR: o.dir,
              // UpdateMachine carries the desired objects; no management cluster read is needed to answer it.
              HOOK_REQUEST_CHECKS: 'off',
            }),
      },
    });
    extensions.push(child);
    if (role === 'api') hookPorts.set(child, hookPort!);
    // Generous: on a loaded machine a worker (type stripping, the bundle, connecting) takes minutes to start.
    await waitReady(child, 420_000);
    return child;
  };
  const apis = await Promise.all(Array.from({ length: o.apis }, () => startOne('api')));
  const workers = await Promise.all(Array.from({ length: o.workers }, () => startOne('worker')));
  o.log(`${o.apis} api and ${o.workers} worker processes ready (logs in ${o.dir})`);

  return {
    caPem,
    testbedState,
    temporalAddress: temporal.address,
    temporalNamespace: temporal.namespace,
    apis,
    workers,
    hookUrls: () => apis.filter(alive).map((a) => `https://127.0.0.1:${hookPorts.get(a)}`),
    async killAndRestart(role, index, pauseMs) {
      const list = role === 'api' ? apis : workers;
      const victim = list[index % list.length]!;
      victim.child.kill('SIGKILL');
      await new Promise<void>((r) => (alive(victim) ? victim.child.once('exit', () => r()) : r()));
      await sleep(pauseMs);
      // As a Deployment does: a replacement that exits while starting (a worker cannot reach a
      // Temporal that is down, and exits) is started again, after a growing pause.
      for (let attempt = 1; ; attempt++) {
        try {
          list[list.indexOf(victim)] = await startOne(role);
          return;
        } catch (err) {
          if (attempt >= 8 || !String(err).includes('exited')) throw err;
          await sleep(Math.min(30_000, 2_000 * 2 ** (attempt - 1)));
        }
      }
    },
    async killTemporalAndRestart(pauseMs) {
      process.kill(temporal!.pid, 'SIGKILL');
      await temporal!.stop();
      await sleep(pauseMs);
      temporal = await startTemporal();
    },
    async stopWorkloadApiServer(pauseMs) {
      const pid = workloadApiServerPid(testbedDir);
      process.kill(pid, 'SIGSTOP');
      stoppedPid = pid;
      await sleep(pauseMs);
      if (stoppedPid === pid) process.kill(pid, 'SIGCONT');
      stoppedPid = undefined;
    },
    stop,
    killNow,
  };
}
