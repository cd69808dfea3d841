// The operator CLI (src/cli/capi-upgrades.ts) as an operator runs it: a child
// process with only PATH and the TEMPORAL_* settings of the test's dev server.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { requireEnv } from './services.ts';

const run = promisify(execFile);

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

export async function capiUpgrades(args: string[], env: Record<string, string> = {}): Promise<CliResult> {
  try {
    const { stdout, stderr } = await run(
      process.execPath,
      ['--disable-warning=ExperimentalWarning', 'src/cli/capi-upgrades.ts', ...args],
      {
        env: {
          PATH: process.env.PATH,
          TEMPORAL_ADDRESS: requireEnv('TEMPORAL_ADDRESS'),
          TEMPORAL_NAMESPACE: requireEnv('TEMPORAL_NAMESPACE'),
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
