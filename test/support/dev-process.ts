// Stops a `src/local/dev.ts` a test started with its own process group: SIGTERM (its
// ordered stop), SIGKILL after 20 s, then whatever is left of its group, then its
// Temporal dev server, which runs in a group of its own (dev.json names it) and
// outlives a dev.ts that had to be killed.
import type { ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { devStateFile } from '../../src/local/dev-state.ts';

function kill(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    // ESRCH: gone already.
  }
}

export async function stopDevProcess(child: ChildProcess, dataDir: string): Promise<void> {
  const group = child.pid;
  if (child.exitCode === null && child.signalCode === null) {
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    await exited;
    clearTimeout(timer);
  }
  if (group !== undefined) kill(-group, 'SIGKILL');
  const file = devStateFile(dataDir);
  const pid = existsSync(file)
    ? (JSON.parse(readFileSync(file, 'utf8')) as { temporalPid?: number }).temporalPid
    : undefined;
  // Only if it is still that server (a pid can be reused): its command line names the data dir.
  if (pid && existsSync(`/proc/${pid}/cmdline`) && readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(dataDir))
    kill(pid, 'SIGKILL');
}
