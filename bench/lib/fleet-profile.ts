// Where the fleet benchmark's CPU and memory go: per class, CPU per request of
// each process and kind of thread; at the end, each process's resident memory
// split into code, V8 heap, external and the rest. This is the profile behind
// the fleet figures (docs/performance.md).
import { availableParallelism } from 'node:os';
import { table } from './report.ts';
import { residentBreakdownOf } from './proc.ts';
import type { ExtensionChild } from '../../support/stack.ts';

/** What a class spent, as the CPU table needs it. */
export interface ClassCpu {
  name: string;
  phase: { requests: number };
  /** CPU seconds over the class's window, by process and thread role. */
  threadCpu: Record<'api' | 'worker', Map<string, number>> & {
    temporal: number;
    /** Temporal's CPU seconds by component (dev server; or frontend, history, matching, worker, postgres). */
    temporalBy: Record<string, number>;
  };
  /** CPU seconds of the three processes while they settled after it (work left behind, idle costs). */
  leftBehindCpu: number;
  /** How long the processes took to go quiet after the class (quiet: false when they never did). */
  settled: { seconds: number; quiet: boolean };
}

/** A process's resident memory by where it is: file-backed code, V8's main heap, the rest. */
export interface MemoryBreakdown {
  name: 'api' | 'worker';
  rssKiB: number;
  fileKiB: number;
  anonymousKiB: number;
  /** prom-client's nodejs_* gauges of the main isolate (workflow threads have their own heaps, not counted here). */
  heapTotalBytes: number;
  heapUsedBytes: number;
  externalBytes: number;
}

/** Reads the breakdown of each process now (the benchmarks do it at the end of a run, when the most state is held). */
export async function memoryBreakdown(children: ExtensionChild[]): Promise<MemoryBreakdown[]> {
  const out: MemoryBreakdown[] = [];
  for (const c of children) {
    const resident = residentBreakdownOf(c.pid);
    const text = await (await fetch(`${c.opsUrl}/metrics`)).text().catch(() => '');
    const gauge = (name: string) => Number(new RegExp(`^${name} (\\S+)`, 'm').exec(text)?.[1] ?? NaN);
    if (!resident) continue;
    out.push({
      name: c.role,
      ...resident,
      heapTotalBytes: gauge('nodejs_heap_size_total_bytes'),
      heapUsedBytes: gauge('nodejs_heap_size_used_bytes'),
      externalBytes: gauge('nodejs_external_memory_bytes'),
    });
  }
  return out;
}

// Thread roles in the order the CPU table shows them; anything else is summed as "other".
const API_ROLES = ['js main', 'V8 GC/compiler'];
const WORKER_ROLES = ['js main', 'workflow threads', 'Temporal core (Rust)', 'V8 GC/compiler'];

/**
 * Where each class's CPU goes, per request, over its window: each process and thread role. Their
 * sum bounds the throughput of the whole stack on this machine's cores. What the processes spent
 * while settling after the class (background records, Events and their retries, the api's List
 * each second, the worker's gauges) is shown apart: it is not what a request waits for.
 */
export function cpuTable(results: ClassCpu[]): string {
  const rows = [
    [
      'class',
      'api ms: ' + [...API_ROLES, 'other'].join(' / '),
      'worker ms: ' + [...WORKER_ROLES, 'other'].join(' / '),
      'temporal ms',
      'temporal ms by component',
      'total ms',
      `ceiling on ${availableParallelism()} cores /s`,
      'settling: CPU s in s',
    ],
  ];
  for (const c of results) {
    const n = Math.max(1, c.phase.requests);
    const ms = (seconds: number) => ((seconds * 1000) / n).toFixed(2);
    const split = (m: Map<string, number>, roles: string[]) => {
      const shown = roles.map((r) => m.get(r) ?? 0);
      const other = [...m].filter(([r]) => !roles.includes(r)).reduce((a, [, v]) => a + v, 0);
      return { text: [...shown, other].map(ms).join(' / '), total: shown.reduce((a, v) => a + v, other) };
    };
    const api = split(c.threadCpu.api, API_ROLES);
    const worker = split(c.threadCpu.worker, WORKER_ROLES);
    const total = api.total + worker.total + c.threadCpu.temporal;
    rows.push([
      c.name.split(':')[0] ?? c.name,
      api.text,
      worker.text,
      ms(c.threadCpu.temporal),
      Object.entries(c.threadCpu.temporalBy)
        .map(([k, v]) => `${k} ${ms(v)}`)
        .join(' / '),
      ms(total),
      total > 0 ? ((availableParallelism() * n) / total).toFixed(0) : '-',
      `${c.leftBehindCpu.toFixed(1)} in ${c.settled.seconds.toFixed(0)}`,
    ]);
  }
  return table(rows, (i) => i >= 3 && i !== 4);
}

export function breakdownTable(rows: MemoryBreakdown[]): string {
  const mib = (kib: number) => (Number.isFinite(kib) ? (kib / 1024).toFixed(0) : '-');
  const out = [
    [
      'process',
      'RSS MiB',
      'file-backed (code)',
      'anonymous',
      'main V8 heap total (used)',
      'external',
      'rest of anonymous',
    ],
  ];
  for (const m of rows) {
    const heap = m.heapTotalBytes / 1024;
    const external = m.externalBytes / 1024;
    out.push([
      m.name,
      mib(m.rssKiB),
      mib(m.fileKiB),
      mib(m.anonymousKiB),
      `${mib(heap)} (${mib(m.heapUsedBytes / 1024)})`,
      mib(external),
      mib(m.anonymousKiB - heap - external),
    ]);
  }
  return table(out, (i) => i >= 1);
}
