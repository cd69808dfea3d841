// What bench/fleet.ts measures around each hook class (CPU of each process,
// Temporal frontend calls) and how it prints the figures next to the fleet's
// targets (docs/performance.md).
import { execFileSync } from 'node:child_process';
import { availableParallelism, cpus, loadavg } from 'node:os';
import { readFileSync } from 'node:fs';
import type { Phase } from './load.ts';
import { formatMs, percentile, table } from './report.ts';
import { breakdownTable, cpuTable, type ClassCpu, type MemoryBreakdown } from './fleet-profile.ts';
import { cpuSecondsOf, threadCpuOf, treeCpuSecondsOf, type MemorySampler } from './proc.ts';
import { frontendRequests, type FrontendCalls, type Stack } from '../../support/stack.ts';

/** Returns a problem with a Success answer's body, or undefined when it is what the class expects. */
export type Expectation = (response: Record<string, unknown>) => string | undefined;

export interface Figures {
  p99: number;
  perSecond: number;
}
/** A class's target: its text and whether the figures meet it. */
export type Target = (f: Figures) => { text: string; met: boolean };

export const targets = {
  p99AtMost:
    (ms: number): Target =>
    (f) => ({ text: `p99 ≤ ${ms} ms`, met: f.p99 <= ms }),
  perSecondAtLeast:
    (n: number): Target =>
    (f) => ({ text: `≥ ${n}/s`, met: f.perSecond >= n }),
};

type Pids = Record<'api' | 'worker' | 'temporal', number>;

export interface ClassResult extends ClassCpu {
  name: string;
  load: string;
  phase: Phase;
  /** The handler's own time by the api's histogram (le bucket bound in seconds → count), for `hook`. */
  handler: Map<number, number>;
  /** The api's event-loop delay over the window, "p99/max" ms (a stalled loop delays every answer). */
  apiEventLoopDelay: string;
  target?: Target;
  /** Cores used by each process over the class's window. */
  cores: Pids;
  /** Temporal frontend calls during the window and its settling, by operation. */
  calls: Map<string, FrontendCalls>;
}

/** CPU seconds so far of each of Temporal's components (PostgreSQL with its connections' processes). */
export function temporalCpu(stack: Pick<Stack, 'temporalPids'>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [name, pid] of Object.entries(stack.temporalPids))
    out[name] = name === 'postgres' ? treeCpuSecondsOf(pid) : cpuSecondsOf(pid);
  return out;
}

const sum = (r: Record<string, number>) => Object.values(r).reduce((a, v) => a + v, 0);

/**
 * Runs one class and records what each process spent on it. CPU is read over the class's
 * window; Temporal calls after `settle` (and the dev server's 1 s metrics flush), so they
 * include the work the class leaves behind (background records, workflow tasks, Events).
 */
export async function measure(
  ctx: { stack: Stack; pids: Pids; settle: () => Promise<{ seconds: number; quiet: boolean }> },
  name: string,
  load: string,
  spec: { hook: string; run: () => Promise<Phase>; target?: Target },
): Promise<ClassResult> {
  const { stack, pids } = ctx;
  const { buckets: handlerBefore } = await scrapeApi(stack.api.opsUrl, spec.hook);
  const cpu = () => {
    const by = temporalCpu(stack);
    return { api: cpuSecondsOf(pids.api), worker: cpuSecondsOf(pids.worker), temporal: sum(by), by };
  };
  const namespace = stack.temporal.namespace;
  const callsBefore = await frontendRequests(stack.temporalMetricsUrl, namespace);
  const threads = () => ({ api: threadCpuOf(pids.api), worker: threadCpuOf(pids.worker) });
  const threadsBefore = threads();
  const cpuBefore = cpu();
  const phase = await spec.run();
  const cpuAfter = cpu();
  const threadsAfter = threads();
  const { buckets: handlerAfter, loop } = await scrapeApi(stack.api.opsUrl, spec.hook);
  const handler = new Map([...handlerAfter].map(([le, n]) => [le, n - (handlerBefore.get(le) ?? 0)]));
  const settled = await ctx.settle();
  const cpuSettled = cpu();
  const spent = (before: Map<string, number>, after: Map<string, number>) =>
    new Map([...after].map(([role, s]) => [role, s - (before.get(role) ?? 0)]));
  await new Promise((r) => setTimeout(r, 1_200));
  const callsAfter = await frontendRequests(stack.temporalMetricsUrl, namespace);
  const calls = new Map<string, FrontendCalls>();
  for (const [op, after] of callsAfter) {
    const before = callsBefore.get(op) ?? { count: 0, seconds: 0 };
    if (after.count > before.count)
      calls.set(op, { count: after.count - before.count, seconds: after.seconds - before.seconds });
  }
  const cores = (k: keyof Pids) => (cpuAfter[k] - cpuBefore[k]) / phase.seconds;
  return {
    name,
    load,
    phase,
    handler,
    apiEventLoopDelay: loop,
    settled,
    ...(spec.target ? { target: spec.target } : {}),
    cores: { api: cores('api'), worker: cores('worker'), temporal: cores('temporal') },
    calls,
    threadCpu: {
      api: spent(threadsBefore.api, threadsAfter.api),
      worker: spent(threadsBefore.worker, threadsAfter.worker),
      temporal: cpuAfter.temporal - cpuBefore.temporal,
      temporalBy: Object.fromEntries(Object.entries(cpuAfter.by).map(([k, v]) => [k, v - (cpuBefore.by[k] ?? 0)])),
    },
    leftBehindCpu: (['api', 'worker', 'temporal'] as const).reduce((a, k) => a + cpuSettled[k] - cpuAfter[k], 0),
  };
}

/** prom-client's default eventLoopMonitoringPrecision (src/ops/metrics.ts keeps the default). */
const LOOP_TICK_MS = 10;

/**
 * One scrape of the api's metrics: its own histogram of hook handler time (from the route's start
 * to the answer, so without TLS, parsing and event-loop queueing), cumulative counts by bucket
 * bound, all answers; and its event-loop delay since the previous scrape, "p99/max" ms.
 */
async function scrapeApi(opsUrl: string, hook: string): Promise<{ buckets: Map<number, number>; loop: string }> {
  const text = await (await fetch(`${opsUrl}/metrics`)).text();
  // prom-client resets its event-loop delay histogram at each scrape: these are since the last one.
  // Its samples are the interval between ticks of a 10 ms timer, so an idle loop reads 10 ms: the
  // delay is what lies beyond that.
  const lagMs = (name: string) =>
    formatMs(
      Math.max(
        0,
        Number(new RegExp(`^nodejs_eventloop_lag_${name}_seconds(?:\\{[^}]*\\})? (\\S+)`, 'm').exec(text)?.[1]) * 1000 -
          LOOP_TICK_MS,
      ),
    );
  const loop = `${lagMs('p99')}/${lagMs('max')}`;
  const out = new Map<number, number>();
  for (const line of text.split('\n')) {
    if (!line.startsWith('capi_upgrade_hook_request_duration_seconds_bucket{')) continue;
    if (!line.includes(`hook="${hook}"`)) continue;
    const le = /le="([^"]+)"/.exec(line)?.[1];
    if (le === undefined) continue;
    const bound = le === '+Inf' ? Infinity : Number(le);
    out.set(bound, (out.get(bound) ?? 0) + Number(line.slice(line.lastIndexOf(' ') + 1)));
  }
  return { buckets: out, loop };
}

/** The bucket bound (ms) under which a share `q` of the handler times fall: "≤5" */
function handlerQuantile(buckets: Map<number, number>, q: number): string {
  const sorted = [...buckets].sort((a, b) => a[0] - b[0]);
  const total = sorted.at(-1)?.[1] ?? 0;
  if (total === 0) return '-';
  const hit = sorted.find(([, count]) => count >= q * total);
  return hit && Number.isFinite(hit[0]) ? `≤${hit[0] * 1000}` : '>30000';
}

// The calls a hook handler makes (List: the api's view of running upgrades, and the worker's
// gauges every 30 s), and the workflow tasks and history reads (replays) of the worker they
// cause; polls, heartbeats and activity tasks are left out.
const SHORT: Record<string, string> = {
  DescribeWorkflowExecution: 'Describe',
  StartWorkflowExecution: 'Start',
  SignalWorkflowExecution: 'Signal',
  SignalWithStartWorkflowExecution: 'SignalWithStart',
  UpdateWorkflowExecution: 'Update',
  PollWorkflowExecutionUpdate: 'PollUpdate',
  ExecuteMultiOperation: 'MultiOp(update-with-start)',
  GetWorkflowExecutionHistory: 'History',
  GetWorkflowExecutionHistoryReverse: 'HistoryReverse',
  QueryWorkflow: 'Query',
  ListWorkflowExecutions: 'List',
  RespondWorkflowTaskCompleted: 'wf-task',
};

/** "Describe 1.00 (3.1 ms)": calls per request and the frontend's mean time per call. */
function callsPerRequest(r: ClassResult): string {
  const parts = [...r.calls]
    .filter(([op]) => op in SHORT)
    .map(
      ([op, c]) =>
        `${SHORT[op]} ${(c.count / Math.max(1, r.phase.requests)).toFixed(2)} (${formatMs((c.seconds / c.count) * 1000)} ms)`,
    );
  return parts.join(', ') || 'none';
}

/** Each process's memory figures now; `atFleet`: the peaks taken when the fleet alone ran (see fleet.ts). */
export function memoryReport(sampler: MemorySampler, pids: Pids, atFleet?: Map<keyof Pids, number>) {
  return (Object.keys(pids) as (keyof Pids)[]).map((name) => ({
    name,
    pid: pids[name],
    ...sampler.figures(name),
    peakAtFleetKiB: atFleet?.get(name) ?? NaN,
  }));
}

/** Peak RSS of each process so far (KiB). */
export function memoryPeaks(sampler: MemorySampler, pids: Pids): Map<keyof Pids, number> {
  return new Map((Object.keys(pids) as (keyof Pids)[]).map((name) => [name, sampler.figures(name).peakSinceResetKiB]));
}

const MEMORY_TARGET_MIB: Partial<Record<keyof Pids, number>> = { api: 250, worker: 300 };

/** Warnings and errors the process logged (pino levels 40 and up): the most frequent messages, each with its first `err`. */
function logProblems(file: string): string {
  let lines: string[] = [];
  try {
    lines = readFileSync(file, 'utf8').split('\n');
  } catch {
    return 'log unreadable';
  }
  const messages = new Map<string, { count: number; err: string | undefined }>();
  let count = 0;
  for (const line of lines) {
    const level = Number(/"level":(\d+)/.exec(line)?.[1] ?? 0);
    if (level < 40) continue;
    count++;
    const msg = (/"msg":"((?:[^"\\]|\\.)*)"/.exec(line)?.[1] ?? line).slice(0, 140);
    const seen = messages.get(msg) ?? { count: 0, err: /"err":"((?:[^"\\]|\\.)*)"/.exec(line)?.[1]?.slice(0, 200) };
    seen.count++;
    messages.set(msg, seen);
  }
  if (count === 0) return 'no warnings or errors';
  const top = [...messages]
    .sort((a, b) => b[1].count - a[1].count)
    .slice(0, 5)
    .map(([m, { count: c, err }]) => `\n      ${c} x ${m}${err ? `\n          first err: ${err}` : ''}`);
  return `${count} warnings/errors${top.join('')}`;
}

function revision(root: string): string {
  try {
    const git = (...args: string[]) =>
      execFileSync('git', args, { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    const dirty = git('status', '--porcelain', '--untracked-files=no', '--', 'src');
    return `${git('rev-parse', '--short', 'HEAD')}${dirty ? ' + uncommitted changes in src/' : ''}`;
  } catch {
    return 'not a git checkout';
  }
}

export function classReport(r: {
  commandLine: string;
  options: { extensionRoot: string; clusters: number; connections: number; logLevel: string };
  requestTimeoutMs: number;
  results: ClassResult[];
  /** Absent in the waiting profile (it measures no history). */
  history?: { workflowId: string; before: number; after: number; pollErrors: string[] };
  memory: ReturnType<typeof memoryReport>;
  memoryBreakdown: MemoryBreakdown[];
  stack: Stack;
  loadBefore: number;
}): string {
  const rows = [
    [
      'class',
      'load',
      'requests',
      'errors',
      'done/s',
      'p50 ms',
      'p99 ms',
      'max ms',
      'handler p50/p99',
      'api loop p99/max',
      'target',
      'met',
      'cores api/wkr/tmp',
      'lag ms',
      'Temporal frontend calls per request (mean time each)',
    ],
  ];
  const verdicts: boolean[] = [];
  for (const c of r.results) {
    const sorted = Float64Array.from(c.phase.latencies).sort();
    const figures = { p99: percentile(sorted, 99), perSecond: sorted.length / c.phase.seconds };
    const t = c.target?.(figures);
    if (t) verdicts.push(t.met);
    rows.push([
      c.name,
      c.load,
      String(c.phase.requests),
      String(c.phase.errors),
      figures.perSecond.toFixed(1),
      formatMs(percentile(sorted, 50)),
      formatMs(figures.p99),
      formatMs(sorted.at(-1) ?? NaN),
      `${handlerQuantile(c.handler, 0.5)}/${handlerQuantile(c.handler, 0.99)}`,
      c.apiEventLoopDelay,
      t?.text ?? '',
      t ? (t.met ? 'yes' : 'NO') : '',
      `${c.cores.api.toFixed(2)}/${c.cores.worker.toFixed(2)}/${c.cores.temporal.toFixed(2)}`,
      'lagMs' in c.phase ? formatMs(Number(c.phase.lagMs)) : '',
      callsPerRequest(c),
    ]);
  }
  const mib = (kib: number | undefined) =>
    kib === undefined || Number.isNaN(kib) ? '-' : `${(kib / 1024).toFixed(0)} MiB`;
  const memRows = [
    ['process', 'pid', `peak, the ${r.options.clusters} (0–3)`, 'target', 'met', 'peak in run', 'RSS at end', 'VmHWM'],
  ];
  for (const m of r.memory) {
    const target = MEMORY_TARGET_MIB[m.name];
    const met = m.peakAtFleetKiB / 1024 <= (target ?? Infinity);
    if (target) verdicts.push(met);
    memRows.push([
      m.name,
      String(m.pid),
      mib(m.peakAtFleetKiB),
      target ? `≤ ${target} MiB` : '',
      target ? (met ? 'yes' : 'NO') : '',
      mib(m.peakSinceResetKiB),
      mib(m.last?.rssKiB),
      mib(m.last?.hwmKiB),
    ]);
  }
  const errors = r.results
    .filter((c) => c.phase.errors > 0)
    .map(
      (c) =>
        `  ${c.name}: ${c.phase.errors} of ${c.phase.requests} failed` +
        [...c.phase.errorSamples]
          .slice(0, 3)
          .map(([message, count]) => `\n    ${count} x ${message.slice(0, 200)}`)
          .join(''),
    );
  const h = r.history;
  if (h) verdicts.push(h.before === h.after);
  return [
    `command: ${r.commandLine}`,
    `extension: ${r.options.extensionRoot} (${revision(r.options.extensionRoot)}); api and worker LOG_LEVEL=${r.options.logLevel}`,
    `node ${process.version}, ${availableParallelism()} CPUs (${cpus()[0]?.model.trim() ?? 'unknown'}); ` +
      `1-min load average ${r.loadBefore.toFixed(2)} before, ${(loadavg()[0] ?? 0).toFixed(2)} after`,
    `client: one keep-alive HTTPS pool of ${r.options.connections} connections, no Content-Type, ` +
      `${r.requestTimeoutMs / 1000} s timeout; open-loop latency runs from the scheduled send`,
    "handler p50/p99: bucket bounds (ms) of the api's own hook histogram (no TLS, parsing or queueing before the route); " +
      "api loop: the api's event-loop delay (ms) over the class, which every answer waits out on top of its handler; " +
      'lag: how late the driver itself sent at worst; cores: CPU over the class (1.00 = one core)',
    '',
    table(rows, (i) => i >= 2 && i <= 7),
    '',
    'quiet again after each class (CPU of the three < 0.3 core): ' +
      r.results
        .map(
          (c) =>
            `${c.name.split('.')[0]} ${c.settled.seconds.toFixed(0)} s${c.settled.quiet ? '' : ' (NOT quiet: the next class shared the machine with its leftovers)'}`,
        )
        .join(', '),
    '',
    'errors: ' + (errors.length > 0 ? `\n${errors.join('\n')}` : 'none'),
    '',
    h
      ? `history of ${h.workflowId}: ${h.before} events before 100 polls of its gate, ${h.after} after ` +
        `(target: unchanged: ${h.before === h.after ? 'yes' : 'NO'})` +
        (h.pollErrors.length > 0 ? `; ${h.pollErrors.length} of the polls failed, first: ${h.pollErrors[0]}` : '')
      : 'history: not measured in this profile',
    '',
    table(memRows, (i) => i >= 1 && i <= 4),
    `(RSS sampled every 250 ms from the first setup request; "the ${r.options.clusters}": through classes 0–3, while ` +
      `the fleet's ${r.options.clusters} upgrades are all there is, the load the targets are for; "in run": to the end, ` +
      'after 4a and 4b have started thousands more; VmHWM: since the process started)',
    '',
    'where the memory is at the end of the run (MiB; smaps_rollup and the process\'s nodejs_* gauges; "rest": ' +
      "other isolates such as the workflow threads', native allocations such as Temporal's Rust core, stacks):",
    breakdownTable(r.memoryBreakdown),
    '',
    "where the CPU goes, per request, over each class's window (thread roles by name: js main, the SDK's workflow " +
      "threads, Temporal's Rust core, V8's GC and compiler threads); the ceiling is what the cores could serve if the " +
      'three processes had them to themselves; settling: CPU of the three after the class until quiet (the work it ' +
      "left behind, such as Events and a new upgrade's first workflow tasks, plus the idle costs: the api's List " +
      "each second, re-describes, the worker's gauges):",
    cpuTable(r.results),
    '',
    `api log: ${logProblems(r.stack.api.logFile)}`,
    `worker log: ${logProblems(r.stack.worker.logFile)}`,
    '',
    `targets met: ${verdicts.filter(Boolean).length} of ${verdicts.length}`,
  ].join('\n');
}
