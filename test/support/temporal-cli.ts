// The real `temporal` CLI against the run's dev server, as an on-call
// engineer would type it.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { requireEnv } from './services.ts';

const run = promisify(execFile);

export async function temporalCli(args: string[]): Promise<string> {
  const { stdout } = await run(
    process.env.TEMPORAL_CLI ?? 'temporal',
    [...args, '--address', requireEnv('TEMPORAL_ADDRESS'), '--namespace', requireEnv('TEMPORAL_NAMESPACE')],
    { maxBuffer: 64 * 1024 * 1024 },
  );
  return stdout;
}

/** `temporal workflow signal` exactly as an on-call engineer would type it. */
export async function temporalSignal(workflowId: string, name: string, input?: string): Promise<void> {
  await temporalCli([
    'workflow',
    'signal',
    '--workflow-id',
    workflowId,
    '--name',
    name,
    ...(input ? ['--input', input] : []),
  ]);
}
