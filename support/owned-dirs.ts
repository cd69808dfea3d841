// Temp directories that hold running services (a test bed's API server and etcd) and
// record the process that owns them. A process killed beyond its own cleanup (SIGKILL,
// a lost session) leaves its services running; the next run finds them by the owner
// that is gone and takes them down.
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const OWNER_FILE = 'owner.pid';

/** A new directory `<parent>/<prefix>XXXXXX`, marked with this process as its owner. */
export function ownedTempDir(prefix: string, parent = tmpdir()): string {
  const dir = mkdtempSync(join(parent, prefix));
  writeFileSync(join(dir, OWNER_FILE), String(process.pid));
  return dir;
}

export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: alive, another user's.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Runs `takeDown` for each `<parent>/<prefix>*` whose owner is gone, then removes it, and
 * returns those directories with their owners. A directory without an owner file (made by
 * something else) stays.
 */
export async function reapOrphanedDirs(
  prefix: string,
  takeDown: (dir: string) => Promise<void>,
  parent = tmpdir(),
): Promise<{ dir: string; owner: number }[]> {
  const reaped: { dir: string; owner: number }[] = [];
  for (const name of readdirSync(parent)) {
    if (!name.startsWith(prefix)) continue;
    const dir = join(parent, name);
    let owner: number;
    try {
      owner = Number(readFileSync(join(dir, OWNER_FILE), 'utf8').trim());
    } catch {
      continue;
    }
    if (!Number.isSafeInteger(owner) || owner <= 0 || alive(owner)) continue;
    await takeDown(dir);
    rmSync(dir, { recursive: true, force: true });
    reaped.push({ dir, owner });
  }
  return reaped;
}
