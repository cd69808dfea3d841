// Takes down what a killed test process left of its nodes: a run's own teardown stops what
// it started, but a process killed beyond its cleanup (SIGKILL, a lost session) leaves
// its containers, relays, overlay mounts, cgroups and network namespaces behind. They all
// carry the owner's pid in their names (network.ts's namespacePrefix), so the next run
// finds those whose owner is gone.
import { readdirSync, readFileSync, rmdirSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { alive } from '../owned-dirs.ts';
import { runCommand } from './run.ts';

const PREFIX = /^capi-uo-(\d+)-/;
const CGROUP_ROOT = '/sys/fs/cgroup';

/** The owner pid named in a capi-uo-<pid>-… name, when that process is gone. */
function orphanOwner(name: string): number | undefined {
  const m = PREFIX.exec(name);
  const pid = m ? Number(m[1]) : undefined;
  return pid !== undefined && !alive(pid) ? pid : undefined;
}

/**
 * Kills every process in the orphaned network namespaces (the nodes' containers die with
 * their init; the relays inside the site namespace), unmounts the nodes' disks, removes
 * their cgroups and the namespaces. `owned` also takes the live process's own (its
 * teardown after a failed test). Returns the namespaces it removed.
 */
export async function reapOrphanedNodes(owned?: number): Promise<string[]> {
  const list = await runCommand('ip', ['netns', 'list']).catch(() => undefined);
  const namespaces = (list?.stdout ?? '')
    .split('\n')
    .map((l) => l.split(' ')[0]!)
    .filter((n) => n && (orphanOwner(n) !== undefined || (owned !== undefined && n.startsWith(`capi-uo-${owned}-`))));
  const owners = new Set(namespaces.map((n) => PREFIX.exec(n)![1]));
  for (const ns of namespaces) {
    const pids = (await runCommand('ip', ['netns', 'pids', ns])).stdout.split('\n').filter(Boolean).map(Number);
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        /* gone */
      }
    }
  }
  const ownedBy = (text: string) => [...owners].some((o) => text.includes(`capi-uo-${o}-`));
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    const argv = safeRead(`/proc/${pid}/cmdline`).split('\0');
    // Host-side relays into the nodes (socat on 127.0.0.1 running `ip netns exec <ns>`), and
    // a registry whose directory's owner is gone (registry.ts's ownedTempDir).
    const registryOwner =
      argv[0]?.endsWith('/registry') && argv[1] === 'serve'
        ? Number(safeRead(join(argv[2] ?? '/', '..', 'owner.pid')))
        : 0;
    if ((argv[0] === 'socat' && ownedBy(argv.join(' '))) || (registryOwner > 0 && !alive(registryOwner)))
      try {
        process.kill(Number(pid), 'SIGKILL');
      } catch {
        /* gone */
      }
  }
  // The nodes' disks: overlays in a cluster directory named after its owner (kubeadm-cluster.ts).
  for (const line of safeRead('/proc/mounts').split('\n').reverse()) {
    const [, target, type, options] = line.split(' ');
    if (type === 'overlay' && target && options?.includes('/overlay-work') && ownedBy(options))
      await runCommand('umount', ['-l', target]);
  }
  // A killed process leaves its cgroup a moment later: try for a few seconds.
  for (let attempt = 0; attempt < 50; attempt++) {
    const left = (existsSync(CGROUP_ROOT) ? readdirSync(CGROUP_ROOT) : []).flatMap((h) =>
      safeList(join(CGROUP_ROOT, h))
        .filter((name) => [...owners].some((o) => name.startsWith(`capi-uo-${o}-`)))
        .map((name) => join(CGROUP_ROOT, h, name)),
    );
    for (const c of left) removeTree(c);
    if (left.every((c) => !existsSync(c))) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  for (const ns of namespaces) await runCommand('ip', ['netns', 'del', ns]);
  return namespaces;
}

function safeRead(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return '';
  }
}

function safeList(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

function removeTree(dir: string): void {
  for (const e of safeList(dir))
    if (!e.includes('.') && existsSync(join(dir, e, 'cgroup.procs'))) removeTree(join(dir, e));
  try {
    rmdirSync(dir);
  } catch {
    /* still busy: the next run tries again */
  }
}
