// Running the host commands the node tier needs (ip, nsenter, mount, systemd-nspawn): a
// failure names the command and carries its output, and a missing tool is named with the
// Debian package that has it (never a silent skip).
import { execFile, spawnSync } from 'node:child_process';

export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Debian packages of the host tools the tier runs, for the message when one is missing. */
const PACKAGES: Record<string, string> = {
  ip: 'iproute2',
  nsenter: 'util-linux',
  mount: 'mount',
  umount: 'mount',
  'systemd-nspawn': 'systemd-container',
  socat: 'socat',
  tar: 'tar',
  'qemu-system-x86_64': 'qemu-system-x86',
  'mkfs.ext4': 'e2fsprogs',
};

/** Fails naming every tool of `tools` that is not on PATH, with its Debian package. */
export function requireHostTools(tools: readonly string[]): void {
  const missing = tools.filter((t) => spawnSync('sh', ['-c', `command -v ${t}`]).status !== 0);
  if (missing.length === 0) return;
  throw new Error(
    `the real-node tier needs ${missing.join(', ')} on PATH: apt-get install ${[
      ...new Set(missing.map((t) => PACKAGES[t] ?? t)),
    ].join(' ')} (scripts/env.sh --nodes installs them when run as root)`,
  );
}

/** Runs a command to its end; resolves with its exit code and output whatever the code. */
export function runCommand(
  cmd: string,
  args: readonly string[],
  options: { input?: string; timeoutMs?: number; env?: NodeJS.ProcessEnv } = {},
): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      cmd,
      args,
      { maxBuffer: 64 * 1024 * 1024, timeout: options.timeoutMs ?? 120_000, env: options.env ?? process.env },
      (err, stdout, stderr) => {
        const e = err as (NodeJS.ErrnoException & { code?: number | string; killed?: boolean }) | null;
        if (e && typeof e.code === 'string') {
          reject(new Error(`${cmd}: ${e.message}`));
          return;
        }
        if (e?.killed) {
          reject(new Error(`${cmd} ${args.join(' ')} did not finish in ${options.timeoutMs ?? 120_000} ms\n${stderr}`));
          return;
        }
        resolve({ code: typeof e?.code === 'number' ? e.code : 0, stdout, stderr });
      },
    );
    if (options.input !== undefined) child.stdin?.end(options.input);
  });
}

/** Runs a command that must succeed; its output is returned, a failure throws with it. */
export async function run(
  cmd: string,
  args: readonly string[],
  options: { input?: string; timeoutMs?: number; env?: NodeJS.ProcessEnv } = {},
): Promise<string> {
  const r = await runCommand(cmd, args, options);
  if (r.code !== 0)
    throw new Error(`${cmd} ${args.join(' ')} exited ${r.code}\n${(r.stderr || r.stdout).trim().slice(-4000)}`);
  return r.stdout;
}
