// The extension as the image runs it: `node src/main.ts` in a child process,
// with the environment given on top of a minimal one, its hook server and ops
// endpoint on free loopback ports, and its output kept for assertions.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePorts } from '../../src/local/free-ports.ts';
import { testPki } from './pki.ts';
import { waitFor } from './wait.ts';

export interface ExtensionProcess {
  child: ChildProcess;
  /** https://127.0.0.1:<port> */
  hookUrl: string;
  /** http://127.0.0.1:<port> */
  opsUrl: string;
  output(): string;
  exited(): Promise<number | null>;
  /** Its exit code, or 'still running' after `ms` (the timer is cleared either way: no open handle left to jest). */
  exitedWithin(ms: number): Promise<number | null | 'still running'>;
  /** /readyz until it says ok (or the process exits). */
  ready(timeoutMs?: number): Promise<void>;
  kill(): void;
}

export async function startExtensionProcess(env: Record<string, string>): Promise<ExtensionProcess> {
  const dir = mkdtempSync(join(tmpdir(), 'capi-uo-proc-'));
  writeFileSync(join(dir, 'tls.crt'), testPki().serving.certPem);
  writeFileSync(join(dir, 'tls.key'), testPki().serving.keyPem);
  const [hookPort, opsPort] = await freePorts(2);
  let output = '';
  const child = spawn(process.execPath, ['--disable-warning=ExperimentalWarning', 'src/main.ts'], {
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      HOOK_SERVER_HOST: '127.0.0.1',
      HOOK_SERVER_PORT: String(hookPort),
      OPS_SERVER_HOST: '127.0.0.1',
      OPS_SERVER_PORT: String(opsPort),
      TLS_CERT_DIR: dir,
      LOG_LEVEL: 'warn',
      // No management cluster here: the tests that need one give MANAGEMENT_KUBECONFIG and `on`.
      HOOK_REQUEST_CHECKS: 'off',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  // A jest worker that ends (or is force-exited after a timeout) takes its extension processes with it.
  const reap = (): void => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  };
  process.once('exit', reap);
  child.once('exit', () => process.off('exit', reap));
  child.stdout?.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (output += d.toString()));
  const opsUrl = `http://127.0.0.1:${opsPort}`;
  const exited = () =>
    new Promise<number | null>((resolve) =>
      // Ended already (by a code, or by a signal: then exitCode stays null): 'exit' will not fire again.
      child.exitCode !== null || child.signalCode !== null
        ? resolve(child.exitCode)
        : child.once('exit', (code) => resolve(code)),
    );
  return {
    child,
    hookUrl: `https://127.0.0.1:${hookPort}`,
    opsUrl,
    output: () => output,
    exited,
    async exitedWithin(ms) {
      let timer: NodeJS.Timeout | undefined;
      try {
        return await Promise.race([
          exited(),
          new Promise<'still running'>((resolve) => (timer = setTimeout(() => resolve('still running'), ms))),
        ]);
      } finally {
        clearTimeout(timer);
      }
    },
    async ready(timeoutMs = 30_000) {
      const status = await waitFor(
        async () => {
          if (child.exitCode !== null) return 'exited';
          return fetch(`${opsUrl}/readyz`).then(
            async (r) => ((await r.json()) as { status: string }).status,
            () => 'no answer',
          );
        },
        (s) => s === 'ok' || s === 'exited',
        timeoutMs,
      );
      if (status !== 'ok') throw new Error(`the extension is not ready (${status}); its output:\n${output}`);
    },
    kill() {
      if (child.exitCode === null) child.kill('SIGKILL');
    },
  };
}
