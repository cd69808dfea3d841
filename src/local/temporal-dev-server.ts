// Starts `temporal server start-dev` as a child process: for `make dev` (a
// persistent SQLite file, Web UI on :8233) and for the test harness (free
// ports, throwaway file, headless). The only place that knows the CLI's flags.
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, mkdirSync, openSync } from 'node:fs';
import { dirname } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { withTemporal } from '../platform/temporal/session.ts';
import { allSearchAttributeKeys } from '../model/search-attributes.ts';
import { freePort } from './free-ports.ts';
import { logTail } from './log-tail.ts';

export interface DevServerOptions {
  /** Path of the `temporal` CLI binary. */
  executable: string;
  /** SQLite file; state survives restarts when it is kept. */
  dbFilename: string;
  /** Frontend gRPC port; 0 picks a free one. */
  port?: number;
  /** Web UI port; 0 picks a free one; omitted = headless. */
  uiPort?: number;
  /** Where the server's own log goes (it is chatty). */
  logFile: string;
  namespace?: string;
  ip?: string;
  /** How long to wait for the frontend to answer. */
  startTimeoutMs?: number;
  /**
   * A process group of its own, so that Ctrl-C in a terminal (SIGINT to the whole foreground group)
   * does not stop Temporal before the worker that polls it: `make dev` stops it last but one. It is
   * still killed when this process exits; a SIGKILL of this process leaves it to `pid`'s owner.
   */
  ownProcessGroup?: boolean;
}

export interface DevServer {
  address: string;
  namespace: string;
  uiUrl?: string;
  pid: number;
  stop(): Promise<void>;
}

export function devServerArgs(
  opts: Required<Omit<DevServerOptions, 'uiPort' | 'startTimeoutMs' | 'ownProcessGroup'>> & { uiPort?: number },
): string[] {
  const args = [
    'server',
    'start-dev',
    '--ip',
    opts.ip,
    '--port',
    String(opts.port),
    '--namespace',
    opts.namespace,
    '--db-filename',
    opts.dbFilename,
    // The pragmas Temporal's own stress tests use: WAL + no fsync per commit.
    '--sqlite-pragma',
    'journal_mode=WAL',
    '--sqlite-pragma',
    'synchronous=OFF',
    '--log-level',
    'warn',
  ];
  for (const key of allSearchAttributeKeys) args.push('--search-attribute', `${key.name}=Keyword`);
  if (opts.uiPort === undefined) args.push('--headless');
  else args.push('--ui-port', String(opts.uiPort));
  return args;
}

/** Why a start went wrong; `exited` = the server stopped before it answered. */
class StartFailure extends Error {
  readonly exited: boolean;
  constructor(message: string, exited: boolean) {
    super(message);
    this.exited = exited;
  }
}

/**
 * Starts the server, trying again (up to `attempts`, new free ports where they were
 * not given) when it exits before it answers: the dev server picks ports for its
 * internal services itself, and a neighbour started at the same moment (the test
 * setup starts several stacks at once) can take one between its check and its bind.
 */
export async function startDevServer(options: DevServerOptions & { attempts?: number }): Promise<DevServer> {
  const attempts = options.attempts ?? 3;
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(options);
    } catch (err) {
      if (!(err instanceof StartFailure) || !err.exited || attempt >= attempts) throw err;
      console.warn(`${err.message}\ntrying again (${attempt + 1} of ${attempts})`);
    }
  }
}

async function startOnce(options: DevServerOptions): Promise<DevServer> {
  const ip = options.ip ?? '127.0.0.1';
  const namespace = options.namespace ?? 'default';
  // 0 = any free port, chosen now rather than by the caller earlier: the shorter the gap
  // between choosing and binding, the less a neighbour can take it.
  const port = options.port || (await freePort(ip));
  const uiPort = options.uiPort === 0 ? await freePort(ip) : options.uiPort;
  mkdirSync(dirname(options.dbFilename), { recursive: true });
  mkdirSync(dirname(options.logFile), { recursive: true });
  const log = openSync(options.logFile, 'a');
  const args = devServerArgs({ ...options, ip, namespace, port, ...(uiPort !== undefined ? { uiPort } : {}) });
  const child: ChildProcess = spawn(options.executable, args, {
    stdio: ['ignore', log, log],
    detached: options.ownProcessGroup === true,
  });
  closeSync(log);
  const killOnExit = () => child.kill('SIGKILL');
  if (options.ownProcessGroup) process.once('exit', killOnExit);
  const exited = new Promise<number | null>((resolve) =>
    child.once('exit', (code) => {
      process.off('exit', killOnExit);
      resolve(code);
    }),
  );
  const address = `${ip}:${port}`;
  const deadline = Date.now() + (options.startTimeoutMs ?? 60_000);
  let lastError: unknown;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new StartFailure(
        `temporal dev server exited with ${child.exitCode ?? child.signalCode} before it answered on ${address}; the end of ${options.logFile}:\n${logTail(options.logFile)}`,
        true,
      );
    }
    try {
      await withTemporal({ address, namespace, connectTimeoutMs: 1000 }, (temporal) =>
        temporal.connection.workflowService.describeNamespace({ namespace }),
      );
      break;
    } catch (err) {
      lastError = err;
      if (Date.now() > deadline) {
        child.kill('SIGKILL');
        await exited;
        throw new StartFailure(
          `temporal dev server did not answer on ${address}: ${String(lastError)}; the end of ${options.logFile}:\n${logTail(options.logFile)}`,
          false,
        );
      }
      await sleep(250);
    }
  }
  return {
    address,
    namespace,
    ...(uiPort !== undefined ? { uiUrl: `http://localhost:${uiPort}` } : {}),
    pid: child.pid ?? -1,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}
