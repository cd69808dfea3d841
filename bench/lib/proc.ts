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

/** VmRSS and VmHWM of a process; undefined once it is gone. */
export function memoryOf(pid: number): Memory | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/status`, 'utf8');
  } catch {
    return undefined;
  }
  const kib = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? NaN);
  return { rssKiB: kib('VmRSS'), hwmKiB: kib('VmHWM') };
}

/** The command name and user + system CPU seconds of a process; undefined once it is gone. */
function statOf(pid: string | number): { comm: string; cpuSeconds: number } | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
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
