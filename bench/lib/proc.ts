// What Linux's /proc says about a process: resident memory and CPU time. The
// benchmarks read it from outside because the processes they measure are the
// real entry points (src/main.ts, the temporal CLI), which have no IPC to ask.
import { readdirSync, readFileSync } from 'node:fs';

/** Clock ticks per second of /proc/<pid>/stat's CPU fields (USER_HZ, 100 on Linux). */
const TICKS_PER_SECOND = 100;

export interface Memory {
  /** Resident set size now, KiB (VmRSS). */
  rssKiB: number;
  /** The kernel's high-water mark of the resident set since the process started, KiB (VmHWM). */
  hwmKiB: number;
}

/** /proc/<path> as text; undefined once the process (or thread) is gone. */
function procFile(path: string): string | undefined {
  try {
    return readFileSync(`/proc/${path}`, 'utf8');
  } catch {
    return undefined;
  }
}

/** A `Field:   123 kB` line of a /proc file, in KiB (NaN when absent). */
const kibField = (text: string, field: string) =>
  Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? NaN);

/** VmRSS and VmHWM of a process; undefined once it is gone. */
export function memoryOf(pid: number): Memory | undefined {
  const text = procFile(`${pid}/status`);
  if (text === undefined) return undefined;
  const kib = (field: string) => kibField(text, field);
  return { rssKiB: kib('VmRSS'), hwmKiB: kib('VmHWM') };
}

/** The command name and user + system CPU seconds of a process; undefined once it is gone. */
function statOf(pid: string | number): { comm: string; cpuSeconds: number } | undefined {
  const stat = procFile(`${pid}/stat`);
  if (stat === undefined) return undefined;
  // The command may contain spaces and parentheses: the fields start after the last ')'.
  const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // utime and stime are fields 14 and 15 of stat (11 and 12 after the command).
  return { comm, cpuSeconds: (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND };
}

/** CPU seconds (user + system) a process has used so far; NaN once it is gone. */
export function cpuSecondsOf(pid: number): number {
  return statOf(pid)?.cpuSeconds ?? NaN;
}

/**
 * What a thread of a Node process does, by the name the runtime gives it: the JavaScript main
 * thread, a worker_threads thread (the Temporal SDK runs workflow code in those), Temporal's
 * Rust core (tokio threads: gRPC, protobuf, the workflow and activity pollers), V8's helpers
 * (garbage collection, compilers), libuv's pool (crypto, files, DNS).
 */
function threadRole(comm: string): string {
  if (comm === 'MainThread' || comm === 'node') return 'js main';
  if (comm.startsWith('tokio') || comm.startsWith('temporal')) return 'Temporal core (Rust)';
  if (comm === 'V8Worker' || comm === 'DelayedTaskSche') return 'V8 GC/compiler';
  if (comm.startsWith('libuv')) return 'libuv pool';
  if (comm === 'WorkerThread' || comm.startsWith('Worker')) return 'workflow threads';
  return comm;
}

/** CPU seconds a process's threads have used so far, by threadRole (empty once it is gone). */
export function threadCpuOf(pid: number): Map<string, number> {
  const out = new Map<string, number>();
  let tids: string[] = [];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return out;
  }
  for (const tid of tids) {
    const stat = statOf(`${pid}/task/${tid}`);
    if (!stat) continue; // the thread ended meanwhile
    const role = threadRole(stat.comm);
    out.set(role, (out.get(role) ?? 0) + stat.cpuSeconds);
  }
  return out;
}

/**
 * Where a process's resident memory is (KiB, from smaps_rollup): anonymous (heaps, buffers,
 * thread stacks) against file-backed (the node binary, native addons such as Temporal's core).
 */
export function residentBreakdownOf(
  pid: number,
): { rssKiB: number; anonymousKiB: number; fileKiB: number } | undefined {
  const text = procFile(`${pid}/smaps_rollup`);
  if (text === undefined) return undefined;
  const kib = (field: string) => kibField(text, field);
  const rssKiB = kib('Rss');
  const anonymousKiB = kib('Anonymous');
  return { rssKiB, anonymousKiB, fileKiB: rssKiB - anonymousKiB };
}

/** CPU seconds used so far by every process on this machine, by command name (empty where there is no /proc). */
export function cpuByCommand(): Map<string, number> {
  const out = new Map<string, number>();
  let pids: string[] = [];
  try {
    pids = readdirSync('/proc').filter((p) => /^\d+$/.test(p));
  } catch {
    return out;
  }
  for (const pid of pids) {
    const stat = statOf(pid); // undefined: the process ended meanwhile
    if (stat) out.set(stat.comm, (out.get(stat.comm) ?? 0) + stat.cpuSeconds);
  }
  return out;
}

export interface MemoryFigures {
  /** When the sampler was last reset (e.g. the start of the measured run), and the peak VmRSS seen since. */
  peakSinceResetKiB: number;
  /** The last sample. */
  last: Memory | undefined;
}

/**
 * Samples VmRSS of a few processes every `intervalMs`. VmHWM alone would include the start-up
 * peak (a worker loading its workflow bundle), so the sampler also keeps the peak of the
 * measured part, from the last reset().
 */
export class MemorySampler {
  readonly #pids: Map<string, number>;
  readonly #peaks = new Map<string, number>();
  readonly #last = new Map<string, Memory>();
  readonly #timer: NodeJS.Timeout;

  constructor(pids: Map<string, number>, intervalMs = 250) {
    this.#pids = pids;
    this.sample();
    this.#timer = setInterval(() => this.sample(), intervalMs);
    this.#timer.unref();
  }

  sample(): void {
    for (const [name, pid] of this.#pids) {
      const m = memoryOf(pid);
      if (!m) continue;
      this.#last.set(name, m);
      this.#peaks.set(name, Math.max(this.#peaks.get(name) ?? 0, m.rssKiB));
    }
  }

  reset(): void {
    this.#peaks.clear();
    this.sample();
  }

  figures(name: string): MemoryFigures {
    this.sample();
    return { peakSinceResetKiB: this.#peaks.get(name) ?? NaN, last: this.#last.get(name) };
  }

  stop(): void {
    clearInterval(this.#timer);
  }
}

/**
 * CPU seconds of a process and every descendant alive now, plus what its reaped children used
 * (cutime/cstime): PostgreSQL runs each connection in a child of its postmaster. NaN once it is gone.
 */
export function treeCpuSecondsOf(root: number): number {
  const rootStat = procFile(`${root}/stat`);
  if (rootStat === undefined) return NaN;
  const fieldsOf = (stat: string) => stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const rootFields = fieldsOf(rootStat);
  // cutime and cstime are fields 16 and 17 of stat (13 and 14 after the command).
  let total = (Number(rootFields[13]) + Number(rootFields[14])) / TICKS_PER_SECOND;
  const children = new Map<number, { pids: number[] }>();
  let pids: string[] = [];
  try {
    pids = readdirSync('/proc').filter((p) => /^\d+$/.test(p));
  } catch {
    return NaN;
  }
  const cpu = new Map<number, number>();
  for (const pid of pids) {
    const stat = procFile(`${pid}/stat`);
    if (stat === undefined) continue;
    const fields = fieldsOf(stat);
    const ppid = Number(fields[1]);
    cpu.set(Number(pid), (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND);
    const entry = children.get(ppid) ?? { pids: [] };
    entry.pids.push(Number(pid));
    children.set(ppid, entry);
  }
  const queue = [root];
  while (queue.length > 0) {
    const pid = queue.pop()!;
    total += cpu.get(pid) ?? 0;
    queue.push(...(children.get(pid)?.pids ?? []));
  }
  return total;
}
