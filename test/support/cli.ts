// The operator CLI (src/cli/capi-upgrades.ts) as an operator runs it: a child
// process with only PATH and the TEMPORAL_* settings of the test's dev server.
import { execFile, spawn } from 'node:child_process';
import { promisify } from 'node:util';
import { requireEnv } from './services.ts';

const run = promisify(execFile);

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** The TEMPORAL_* settings an operator's shell has for the test's dev server. */
export const temporalEnv = () => ({
  TEMPORAL_ADDRESS: requireEnv('TEMPORAL_ADDRESS'),
  TEMPORAL_NAMESPACE: requireEnv('TEMPORAL_NAMESPACE'),
});

/** A command left running (a `--watch`): its output so far, its exit code once it ends. */
export function inBackground(command: string, args: string[], env: Record<string, string | undefined>) {
  const child = spawn(command, args, { env });
  const seen = { stdout: '', stderr: '' };
  child.stdout.on('data', (d: Buffer) => (seen.stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (seen.stderr += d.toString()));
  const exited = new Promise<number | null>((done) => child.on('exit', (code) => done(code)));
  return { seen, exited, stop: () => child.kill('SIGKILL') };
}

/** The views a `--watch` printed into a pipe, oldest first. */
export const watchFrames = (stdout: string) => stdout.trimEnd().split('\n\n');

/** `capi-upgrades …` left running, with the test's TEMPORAL_* settings and `env`. */
export const capiUpgradesInBackground = (args: string[], env: Record<string, string> = {}) =>
  inBackground(process.execPath, ['--disable-warning=ExperimentalWarning', 'src/cli/capi-upgrades.ts', ...args], {
    PATH: process.env.PATH,
    ...temporalEnv(),
    ...env,
  });

export async function capiUpgrades(args: string[], env: Record<string, string> = {}): Promise<CliResult> {
  try {
    const { stdout, stderr } = await run(
      process.execPath,
      ['--disable-warning=ExperimentalWarning', 'src/cli/capi-upgrades.ts', ...args],
      {
        env: {
          PATH: process.env.PATH,
          ...temporalEnv(),
          ...env,
        },
      },
    );
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: e.code ?? -1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}
