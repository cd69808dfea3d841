// Starts `temporal server start-dev` as a child process: for `make dev` (a
// persistent SQLite file, Web UI on :8233) and for the test harness (free
// ports, throwaway file, headless). The only place that knows the CLI's flags.
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { mkdirSync, openSync } from 'node:fs';
import { dirname } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Connection } from '@temporalio/client';
import { allSearchAttributeKeys } from '../model/search-attributes.ts';

export interface DevServerOptions {
  /** Path of the `temporal` CLI binary. */
  executable: string;
  /** SQLite file; state survives restarts when it is kept. */
  dbFilename: string;
  /** Frontend gRPC port; 0 picks a free one. */
  port?: number;
  /** Web UI port; omitted = headless. */
  uiPort?: number;
  /** Where the server's own log goes (it is chatty). */
  logFile: string;
  namespace?: string;
  ip?: string;
  /** How long to wait for the frontend to answer. */
  startTimeoutMs?: number;
}

export interface DevServer {
  address: string;
  namespace: string;
  uiUrl?: string;
  pid: number;
  stop(): Promise<void>;
}

export async function freePort(host = '127.0.0.1'): Promise<number> {
  return await new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, host, () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

export function devServerArgs(
  opts: Required<Omit<DevServerOptions, 'uiPort' | 'startTimeoutMs'>> & { uiPort?: number },
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

export async function startDevServer(options: DevServerOptions): Promise<DevServer> {
  const ip = options.ip ?? '127.0.0.1';
  const namespace = options.namespace ?? 'default';
  const port = options.port || (await freePort(ip));
  mkdirSync(dirname(options.dbFilename), { recursive: true });
  mkdirSync(dirname(options.logFile), { recursive: true });
  const log = openSync(options.logFile, 'a');
  const args = devServerArgs({ ...options, ip, namespace, port });
  const child: ChildProcess = spawn(options.executable, args, { stdio: ['ignore', log, log] });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const address = `${ip}:${port}`;
  const deadline = Date.now() + (options.startTimeoutMs ?? 60_000);
  let lastError: unknown;
  for (;;) {
    if (child.exitCode !== null) {
      throw new Error(`temporal dev server exited with code ${child.exitCode}; see ${options.logFile}`);
    }
    try {
      const conn = await Connection.connect({ address, connectTimeout: 1000 });
      try {
        await conn.workflowService.describeNamespace({ namespace });
      } finally {
        await conn.close();
      }
      break;
    } catch (err) {
      lastError = err;
      if (Date.now() > deadline) {
        child.kill('SIGKILL');
        throw new Error(
          `temporal dev server did not answer on ${address}: ${String(lastError)}; see ${options.logFile}`,
        );
      }
      await sleep(250);
    }
  }
  return {
    address,
    namespace,
    ...(options.uiPort !== undefined ? { uiUrl: `http://localhost:${options.uiPort}` } : {}),
    pid: child.pid ?? -1,
    async stop() {
      if (child.exitCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}
