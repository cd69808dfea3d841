// A Kubernetes node as a container with systemd inside (systemd-nspawn), as Cluster API's
// docker provider and kubeadm's own upgrade tests (kinder) run kubeadm nodes: the cached
// Debian root is the read-only lower layer of an overlay whose upper layer is the node's
// disk (it survives a reboot, like a real disk), containerd's store is a plain directory
// (overlayfs cannot hold the overlay snapshotter), the node has its own network namespace
// (network.ts) and its own subtree of every cgroup v1 hierarchy, where its cgroup namespace
// starts, so its kubelet sees only its own pods.
import { spawn, type ChildProcess } from 'node:child_process';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmdirSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { NodeFile } from './node-files.ts';
import { run, runCommand, type RunResult } from './run.ts';
import type { Teardown } from './teardown.ts';

const CGROUP_ROOT = '/sys/fs/cgroup';
const BOOT_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 30_000;

export interface ContainerNodeOptions {
  name: string;
  /** The network namespace (under /run/netns) the node lives in. */
  netns: string;
  /** Cached Debian root (read-only lower layer). */
  rootfs: string;
  /** The node's own directory: its disk (overlay upper), containerd's store, the console log. */
  dir: string;
  /** Names the node's cgroups (unique on the host). */
  cgroupName: string;
  /** Files and binaries installed on the node's disk before its first boot. */
  files: readonly NodeFile[];
  binaries: readonly { path: string; from: string }[];
}

export interface ContainerNode {
  readonly name: string;
  /** Runs a command inside the node (all its namespaces), as root. */
  exec(args: readonly string[], options?: { input?: string; timeoutMs?: number }): Promise<RunResult>;
  /** `sh -c script` inside the node; throws with its output unless it exits 0. */
  sh(script: string, options?: { input?: string; timeoutMs?: number }): Promise<string>;
  /** Orderly shutdown (systemd stops every unit); the disk stays. */
  stop(): Promise<void>;
  /** A power cut: every process of the node dies at once; the disk stays. */
  kill(): Promise<void>;
  /** Boots (again) from its disk and waits until systemd has started every unit. */
  start(): Promise<void>;
  readonly running: boolean;
  /** Seconds the last start took until systemd reported the system up. */
  readonly lastBootSeconds: number;
}

export async function createContainerNode(teardown: Teardown, o: ContainerNodeOptions): Promise<ContainerNode> {
  const upper = join(o.dir, 'disk');
  const work = join(o.dir, 'overlay-work');
  const root = join(o.dir, 'root');
  const containerd = join(o.dir, 'containerd');
  for (const d of [upper, work, root, containerd]) mkdirSync(d, { recursive: true });
  await run('mount', [
    '-t',
    'overlay',
    'overlay',
    '-o',
    `lowerdir=${o.rootfs},upperdir=${upper},workdir=${work}`,
    root,
  ]);
  teardown.add(`node ${o.name}'s root`, () => run('umount', [root]).then(() => undefined));
  installNodeFiles(root, o.files, o.binaries);

  const cgroups = hierarchies().map((h) => join(CGROUP_ROOT, h, o.cgroupName));
  teardown.add(`node ${o.name}'s cgroups`, () => removeCgroups(cgroups));

  let nspawn: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();
  let leader: number | undefined;
  let lastBootSeconds = 0;

  const exec = (args: readonly string[], options: { input?: string; timeoutMs?: number } = {}) => {
    if (leader === undefined) throw new Error(`node ${o.name} is not running`);
    return runCommand('nsenter', ['-t', String(leader), '-a', ...args], options);
  };

  const start = async () => {
    if (nspawn) throw new Error(`node ${o.name} is already running`);
    const began = Date.now();
    // The wrapper joins the node's cgroups before it becomes nspawn, so the node's cgroup
    // namespace is rooted in them and its kubelet never sees the host's or another node's.
    const join_ = cgroups
      .map(
        (c) =>
          `mkdir -p '${c}' && { [ ! -f '${dirname(c)}/cpuset.cpus' ] || { cat '${dirname(c)}/cpuset.cpus' > '${c}/cpuset.cpus' && cat '${dirname(c)}/cpuset.mems' > '${c}/cpuset.mems'; }; } && echo $$ > '${c}/cgroup.procs'`,
      )
      .join(' && ');
    const nspawnArgs = [
      'systemd-nspawn',
      '--quiet',
      '--boot',
      '--register=no',
      '--keep-unit',
      `--directory=${root}`,
      `--machine=${o.name}`,
      `--network-namespace-path=/run/netns/${o.netns}`,
      // A kubelet and containerd need every capability and the syscalls runc makes.
      '--capability=all',
      '--system-call-filter=@known',
      '--bind=/dev/kmsg',
      `--bind=${containerd}:/var/lib/containerd`,
      '--resolv-conf=off',
      '--timezone=off',
      '--link-journal=no',
      '--console=read-only',
    ];
    const child = spawn('sh', ['-c', `${join_} && exec "$@"`, 'node-boot', ...nspawnArgs], {
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    nspawn = child;
    const console_: string[] = [];
    const keep = (b: Buffer) => {
      console_.push(b.toString());
      if (console_.length > 400) console_.splice(0, 200);
    };
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    exited = new Promise((resolve) =>
      child.once('exit', () => {
        nspawn = undefined;
        leader = undefined;
        resolve();
      }),
    );
    const consoleTail = () => console_.join('').split('\n').slice(-30).join('\n');
    const deadline = Date.now() + BOOT_TIMEOUT_MS;
    for (;;) {
      if (!nspawn) throw new Error(`node ${o.name} stopped while booting; its console:\n${consoleTail()}`);
      // nspawn's first child may be its short-lived outer child: ask again until init answers.
      leader = childOf(child.pid!);
      if (leader !== undefined) {
        const state = (await exec(['systemctl', 'is-system-running']).catch(() => undefined))?.stdout.trim();
        if (state === 'running') break;
        if (state === 'degraded') {
          const failed = (await exec(['systemctl', '--failed', '--no-legend', '--plain'])).stdout.trim();
          throw new Error(`node ${o.name} booted with failed units:\n${failed}\nits console:\n${consoleTail()}`);
        }
      }
      if (Date.now() > deadline)
        throw new Error(`node ${o.name} did not boot in ${BOOT_TIMEOUT_MS / 1000} s; its console:\n${consoleTail()}`);
      await sleep(200);
    }
    lastBootSeconds = (Date.now() - began) / 1000;
  };

  const stop = async () => {
    if (!nspawn) return;
    // nspawn turns SIGTERM into the container's orderly shutdown.
    process.kill(nspawn.pid!, 'SIGTERM');
    if (await within(exited, STOP_TIMEOUT_MS)) return;
    await kill();
  };

  const kill = async () => {
    if (!nspawn) return;
    // The container's init is the root of its PID namespace: killing it kills every
    // process of the node (kubelet, containerd, shims, pods) at once, as a power cut.
    if (leader !== undefined) process.kill(leader, 'SIGKILL');
    else process.kill(nspawn.pid!, 'SIGKILL');
    if (!(await within(exited, STOP_TIMEOUT_MS))) throw new Error(`node ${o.name} did not stop after SIGKILL`);
  };

  teardown.add(`node ${o.name}`, stop);
  await start();

  return {
    name: o.name,
    exec,
    async sh(script, options = {}) {
      const r = await exec(['sh', '-c', script], options);
      if (r.code !== 0)
        throw new Error(
          `on node ${o.name}: \`${script}\` exited ${r.code}\n${(r.stderr || r.stdout).trim().slice(-4000)}`,
        );
      return r.stdout;
    },
    stop,
    kill,
    start,
    get running() {
      return nspawn !== undefined;
    },
    get lastBootSeconds() {
      return lastBootSeconds;
    },
  };
}

/** Writes the node's files and binaries into its root (the overlay's upper layer, or a disk's tree). */
export function installNodeFiles(
  root: string,
  files: readonly NodeFile[],
  binaries: readonly { path: string; from: string }[],
): void {
  for (const f of files) {
    const target = join(root, f.path);
    mkdirSync(dirname(target), { recursive: true });
    if ('symlinkTo' in f) {
      if (!existsSync(target)) symlinkSync(f.symlinkTo, target);
    } else writeFileSync(target, f.content, { mode: f.mode ?? 0o644 });
  }
  for (const b of binaries) {
    const target = join(root, b.path);
    mkdirSync(dirname(target), { recursive: true });
    copyFileSync(b.from, target);
    chmodSync(target, 0o755);
  }
}

/** The cgroup v1 hierarchies mounted on the host (cgroup2's `unified` is not one). */
function hierarchies(): string[] {
  return readdirSync(CGROUP_ROOT, { withFileTypes: true })
    .filter((e) => e.isDirectory() && e.name !== 'unified')
    .map((e) => e.name);
}

/** Removes a node's cgroups, deepest first (what its kubelet and containerd made in them too). */
async function removeCgroups(cgroups: readonly string[]): Promise<void> {
  for (const top of cgroups) {
    if (!existsSync(top)) continue;
    for (let attempt = 0; ; attempt++) {
      try {
        removeTree(top);
        break;
      } catch (err) {
        // A process of the node may still be exiting.
        if (attempt === 50) throw err;
        await sleep(100);
      }
    }
  }
}

function removeTree(dir: string): void {
  for (const e of readdirSync(dir, { withFileTypes: true })) if (e.isDirectory()) removeTree(join(dir, e.name));
  rmdirSync(dir);
}

function childOf(pid: number): number | undefined {
  try {
    const children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim();
    const first = children.split(/\s+/)[0];
    return first ? Number(first) : undefined;
  } catch {
    return undefined;
  }
}

async function within(p: Promise<void>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  const done = await Promise.race([p.then(() => true), timedOut]);
  clearTimeout(timer);
  return done;
}
