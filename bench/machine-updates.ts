// In-place update benchmark (not a test): N KWOK nodes updated through the real
// machine update workflow and activities, at most L at once, by an executor
// that takes a fixed delay d. The N updates are queued at once as UpdateMachine
// queues them (the cluster's slots workflow starts each run when it lets it in).
//
//   make bench-machine-updates [BENCH_ARGS='--nodes 200 --limit 20 --delay 15 [--executor management]']
//
// It starts everything it uses and stops it after: a test bed of its own
// (scripts/testbed.sh: management + KWOK workload API servers), a Temporal dev
// server on a free port, and the worker as production runs it: main.js
// compiled by tsc with ROLE=worker, the image's memory settings, the defaults,
// the prebuilt workflow bundle (real activities, node upgrades waited on outside
// activity slots). The `delegate` executor stands for "an
// executor that completes after d": a stand-in agent answers each
// NodeUpgradeRequest d after it first sees it, setting the node's kubelet
// version first as a real agent would. `--executor management` puts the
// requests into the management cluster instead, answered the same way by a
// stand-in node upgrader that renews its Lease.
//
// It prints the total time against the floor ceil(N/L) × (d + drain), where
// drain is the median Drain step, the per-update overhead (active time − d)
// and each step's p50/p99, the most updates ever past the queue at once, and
// the worker's peak RSS.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs, promisify } from 'node:util';
import { CoordinationV1Api, type KubeConfig } from '@kubernetes/client-node';
import { Client, Connection, WorkflowNotFoundError } from '@temporalio/client';
import { nodeUpgraderLeaseName } from '../src/platform/kube/node-upgraders.ts';
import { DEFAULT_NODE_UPGRADER_NAMESPACE } from '../src/model/machine-update.ts';
import { queueMachineUpdate } from '../src/api/handlers/in-place/machine-update-queue.ts';
import { ensureNodeUpgradeRequestCrd } from '../src/activities/executors/delegate.ts';
import { machineUpdateSlotsQuery } from '../src/workflows/messages.ts';
import { machineUpdateSlotsWorkflowId, type MachineUpdateStatus } from '../src/model/machine-update.ts';
import { imageNodeOptions } from '../support/image-env.ts';
import { memoryBreakdown } from './lib/fleet-profile.ts';
import { cpuByCommand, memoryOf, MemorySampler } from './lib/proc.ts';
import { buildExtension, end, freePorts, spawnExtension, waitReady } from '../support/stack.ts';

const execFileAsync = promisify(execFile);
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const TASK_QUEUE = 'bench-machine-updates';

const DEV_API_VERSION = 'infrastructure.cluster.x-k8s.io/v1beta1';

/** The stand-in upgrader's Lease (docs/node-upgrade-request.md), renewed every 10 s until stopped. */
function startUpgraderLease(kc: KubeConfig): { stop: () => void } {
  const leases = kc.makeApiClient(CoordinationV1Api);
  const namespace = DEFAULT_NODE_UPGRADER_NAMESPACE;
  const name = nodeUpgraderLeaseName('DevMachine');
  const renew = async () => {
    // A MicroTime: six fractional digits on the wire.
    const renewTime = new Date().toISOString().replace(/\.(\d{3})Z$/, '.$1000Z') as unknown as Date;
    const body = {
      metadata: { name, namespace },
      spec: { holderIdentity: 'bench', leaseDurationSeconds: 40, renewTime },
    };
    await leases
      .replaceNamespacedLease({ name, namespace, body })
      .catch(() => leases.createNamespacedLease({ namespace, body }))
      .catch(() => undefined);
  };
  void renew();
  const timer = setInterval(() => void renew(), 10_000);
  return { stop: () => clearInterval(timer) };
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}
const sortNum = (xs: number[]) => [...xs].sort((a, b) => a - b);
const s = (ms: number) => `${(ms / 1000).toFixed(2)} s`;

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      nodes: { type: 'string', default: '200' },
      limit: { type: 'string', default: '20' },
      delay: { type: 'string', default: '15' },
      keep: { type: 'boolean', default: false },
      'cold-crd': { type: 'boolean', default: false },
      executor: { type: 'string', default: 'delegate' },
    },
  });
  const executor = values.executor;
  if (executor !== 'delegate' && executor !== 'management')
    throw new Error(`--executor ${executor}: expected delegate or management`);
  const nodes = Number(values.nodes);
  const limit = Number(values.limit);
  const delayMs = Number(values.delay) * 1000;
  const dir = mkdtempSync(join(tmpdir(), 'capi-uo-bench-mu-'));
  const testbedDir = join(dir, 'testbed');
  const cleanups: (() => Promise<unknown>)[] = [];
  const cleanUp = async () => {
    for (const c of cleanups.reverse()) await c().catch(() => undefined);
    if (!values.keep) rmSync(dir, { recursive: true, force: true });
  };
  try {
    console.log(
      `machine update benchmark: ${nodes} nodes, maxConcurrentMachineUpdates ${limit}, ${executor} executor delay ${s(delayMs)}`,
    );
    const t0 = Date.now();
    cleanups.push(() => execFileAsync(join(ROOT, 'scripts/testbed.sh'), ['down', testbedDir]));
    await execFileAsync(join(ROOT, 'scripts/testbed.sh'), ['up', testbedDir], { maxBuffer: 16 << 20 });
    process.env.TESTBED_STATE = join(testbedDir, 'testbed.json');
    const { startDevServer } = await import('../src/local/temporal-dev-server.ts');
    const temporal = await startDevServer({
      executable: process.env.TEMPORAL_CLI ?? 'temporal',
      dbFilename: join(dir, 'temporal.db'),
      logFile: join(dir, 'temporal.log'),
      port: 0,
    });
    cleanups.push(() => temporal.stop());
    // The worker runs a prebuilt bundle, as the production image does (no webpack in the worker).
    const bundle = join(dir, 'workflow-bundle.js');
    await execFileAsync(
      process.execPath,
      ['--disable-warning=ExperimentalWarning', join(ROOT, 'scripts/bundle-workflows.ts'), bundle],
      { cwd: ROOT },
    );
    console.log(`test bed, Temporal and workflow bundle ready in ${s(Date.now() - t0)}`);

    const fixtures = await import('../support/testbed-fixtures.ts');
    const rigModule = await import('../support/machine-update-rig.ts');
    const group = fixtures.testGroup('bench');
    const t1 = Date.now();
    const rig = await rigModule.createMachineUpdateRig(group, nodes);
    console.log(`${nodes} KWOK nodes and Machines created in ${s(Date.now() - t1)}`);

    const workerNodeFlags =
      process.env.BENCH_WORKER_NODE_FLAGS !== undefined
        ? process.env.BENCH_WORKER_NODE_FLAGS.split(' ').filter(Boolean)
        : imageNodeOptions();
    console.log(`worker node flags: ${workerNodeFlags.join(' ') || '(none)'}`);
    const [opsPort] = await freePorts(1);
    const worker = spawnExtension({
      role: 'worker',
      main: await buildExtension(ROOT, dir),
      cwd: ROOT,
      nodeFlags: workerNodeFlags,
      logFile: join(dir, 'worker.log'),
      opsPort: opsPort!,
      env: {
        TEMPORAL_ADDRESS: temporal.address,
        TEMPORAL_NAMESPACE: temporal.namespace,
        TEMPORAL_TASK_QUEUE: TASK_QUEUE,
        MANAGEMENT_KUBECONFIG: fixtures.testbed().workerKubeconfig,
        WORKFLOW_BUNDLE_PATH: bundle,
        LOG_LEVEL: 'warn',
        // Tuning experiments: WORKER_MAX_CACHED_WORKFLOWS=250 make bench-machine-updates ...
        ...Object.fromEntries(
          Object.entries(process.env).filter(
            (e): e is [string, string] => /^(WORKER_|NODE_UPGRADE_)/.test(e[0]) && e[1] !== undefined,
          ),
        ),
      },
    });
    cleanups.push(() => end(worker.child, 10_000));
    await waitReady(worker, 120_000);
    const idleRss = memoryOf(worker.pid)?.rssKiB ?? NaN;
    const memory = new MemorySampler(new Map([['worker', worker.pid]]));
    cleanups.push(async () => memory.stop());

    let agent: ReturnType<typeof rigModule.startStandInAgent>;
    if (executor === 'delegate') {
      // A node agent comes with its CRD (kubectl apply -f config/crd/nodeupgraderequests.yaml), and so
      // does the stand-in; --cold-crd leaves it to the first updates, which install it (~2–3 s once).
      if (!values['cold-crd']) await ensureNodeUpgradeRequestCrd(fixtures.workloadApi().kc);
      console.log(
        `NodeUpgradeRequest CRD ${values['cold-crd'] ? 'installed by the first updates' : 'installed ahead'}`,
      );
      // The executor: every request answered `delay` after it was first seen (NodeUpgradeRequests go to kube-system).
      agent = rigModule.startStandInAgent('kube-system', (firstSeen) => Date.now() - firstSeen >= delayMs, 100);
    } else {
      // management: the requests go to the Machines' namespace of the management cluster (its CRD comes with
      // config/default; the test bed applies it), where the stand-in upgrader answers them `delay` after it
      // first saw each, renewing its Lease as a real upgrader does (only CanUpdate* reads it).
      agent = rigModule.startStandInAgent(
        rig.namespace,
        (firstSeen) => Date.now() - firstSeen >= delayMs,
        100,
        'management',
      );
      const lease = startUpgraderLease(fixtures.managementApi().kc);
      cleanups.push(async () => lease.stop());
    }
    cleanups.push(() => agent.stop());

    const connection = await Connection.connect({ address: temporal.address });
    cleanups.push(() => connection.close());
    const client = new Client({ connection, namespace: temporal.namespace });
    const cpuBefore = cpuByCommand();
    const started = Date.now();
    // Queued as UpdateMachine queues them: each run is started by the slots workflow when let in.
    const ids = rig.machines.map((_, i) => `bench/${group.name}/${i}`);
    await Promise.all(
      ids.map((workflowId, i) =>
        queueMachineUpdate(client, TASK_QUEUE, {
          workflowId,
          input: rig.input(i, {
            maxConcurrentMachineUpdates: limit,
            executor,
            ...(executor === 'management'
              ? {
                  objectRefs: {
                    infrastructureMachine: { apiVersion: DEV_API_VERSION, kind: 'DevMachine', name: rig.machines[i]! },
                  },
                }
              : {}),
          }),
        }),
      ),
    );
    const resultOf = async (workflowId: string): Promise<MachineUpdateStatus> => {
      for (;;) {
        try {
          return (await client.workflow.getHandle(workflowId).result()) as MachineUpdateStatus;
        } catch (err) {
          if (!(err instanceof WorkflowNotFoundError)) throw err;
          await new Promise((r) => setTimeout(r, 250));
        }
      }
    };
    // A run is awaited once it has left the line (a query every 500 ms, not a call per queued update).
    const slots = client.workflow.getHandle(
      machineUpdateSlotsWorkflowId({ namespace: rig.namespace, name: rig.cluster }),
    );
    const awaited = new Map<string, Promise<MachineUpdateStatus>>();
    while (awaited.size < ids.length) {
      const { waiting } = await slots.query(machineUpdateSlotsQuery).catch(() => ({ waiting: ids }));
      for (const id of ids) if (!awaited.has(id) && !waiting.includes(id)) awaited.set(id, resultOf(id));
      if (awaited.size < ids.length) await new Promise((r) => setTimeout(r, 500));
    }
    const results = await Promise.all(ids.map((id) => awaited.get(id)!));
    const totalMs = Date.now() - started;
    const cpuAfter = cpuByCommand();
    // When the cluster's slots workflow first started (its first run; it continues as new later).
    let slotsStartedMs = NaN;
    for await (const w of client.workflow.list({
      query: `WorkflowId = '${machineUpdateSlotsWorkflowId({ namespace: rig.namespace, name: rig.cluster })}'`,
    })) {
      slotsStartedMs = Math.min(Number.isNaN(slotsStartedMs) ? Infinity : slotsStartedMs, w.startTime.getTime());
    }
    const peakKiB = memory.figures('worker').peakSinceResetKiB;
    const [breakdown] = await memoryBreakdown([worker]);

    const failed = results.filter((r) => r.phase !== 'Succeeded');
    const stepMs = (r: MachineUpdateStatus, type: string) => {
      const step = r.steps.find((x) => x.type === type);
      return step?.completeTime ? Date.parse(step.completeTime) - Date.parse(step.startTime ?? step.completeTime) : NaN;
    };
    // Active: from leaving the queue (Preflight) to the end of the last step.
    const windows = results.map((r) => {
      const from = Date.parse(r.steps.find((x) => x.type === 'Preflight')?.startTime ?? '');
      const to = Date.parse(r.steps.at(-1)?.completeTime ?? '');
      return { from, to };
    });
    let maxActive = 0;
    for (const w of windows)
      maxActive = Math.max(maxActive, windows.filter((o) => o.from <= w.from && w.from < o.to).length);
    const drain = sortNum(results.map((r) => stepMs(r, 'Drain')));
    const drainP50 = percentile(drain, 50);
    const floorMs = Math.ceil(nodes / limit) * (delayMs + drainP50);
    const overhead = sortNum(windows.map((w) => w.to - w.from - delayMs));
    // Hand-over: first come, first served, so the k-th run past the queue took the
    // slot of the (k − L)-th to finish; the gap is the cost of passing the slot on.
    const froms = sortNum(windows.map((w) => w.from));
    const tos = sortNum(windows.map((w) => w.to));
    const handover = sortNum(froms.slice(limit).map((f, k) => f - tos[k]!));

    console.log('');
    console.log(`updates                 ${results.length - failed.length} succeeded, ${failed.length} not`);
    console.log(`total                   ${s(totalMs)}`);
    console.log(`floor ceil(N/L)×(d+drain) ${s(floorMs)}  (drain p50 ${s(drainP50)})`);
    console.log(`ratio                   ${(totalMs / floorMs).toFixed(3)}×  (target ≤ 1.15×)`);
    console.log(`most past the queue     ${maxActive}  (limit ${limit})`);
    console.log(
      `overhead per update     p50 ${s(percentile(overhead, 50))}  p99 ${s(percentile(overhead, 99))}  (active time − d)`,
    );
    // The first L overlap the burst of N runs starting; the rest run in steady state.
    const byStart = [...windows].sort((a, b) => a.from - b.from).map((w) => w.to - w.from - delayMs);
    const firstWave = sortNum(byStart.slice(0, limit));
    const later = sortNum(byStart.slice(limit));
    console.log(
      `  first ${limit}: p50 ${s(percentile(firstWave, 50))} p99 ${s(percentile(firstWave, 99))}; ` +
        `the rest: p50 ${s(percentile(later, 50))} p99 ${s(percentile(later, 99))}`,
    );
    console.log(
      `first past the queue    +${s(froms[0]! - started)} (slots workflow started +${s(slotsStartedMs - started)}); last step done +${s(tos.at(-1)! - started)} (of ${s(totalMs)})`,
    );
    console.log(
      `slot hand-over           p50 ${s(percentile(handover, 50))}  p99 ${s(percentile(handover, 99))}  (end of one run → start of the next)`,
    );
    // The first L past the queue apart: they meet what is cold (clients, watches, the CRD on first use).
    const firstIn = new Set(
      results
        .map((r, i) => ({ i, from: windows[i]!.from }))
        .sort((a, b) => a.from - b.from)
        .slice(0, limit)
        .map((x) => x.i),
    );
    for (const type of ['Queued', 'Preflight', 'Cordon', 'Drain', 'UpgradeNode', 'WaitForNode', 'Uncordon']) {
      const of = (keep: (i: number) => boolean) =>
        sortNum(results.map((r, i) => (keep(i) ? stepMs(r, type) : NaN)).filter((x) => !Number.isNaN(x)));
      const xs = of(() => true);
      if (xs.length === 0) continue; // Queued: runs started when let in never wait in a queue themselves
      const first = of((i) => firstIn.has(i));
      console.log(
        `  ${type.padEnd(12)} p50 ${s(percentile(xs, 50))}  p99 ${s(percentile(xs, 99))}  (first ${limit}: p50 ${s(percentile(first, 50))})`,
      );
    }
    const mib = (kib: number) => `${(kib / 1024).toFixed(0)} MiB`;
    console.log(
      `worker peak RSS         ${mib(peakKiB)}  (target ≤ 300 MiB; sampled every 250 ms from the starts, idle before: ${mib(idleRss)})`,
    );
    if (breakdown) {
      console.log(
        `  at the end: rss ${mib(breakdown.rssKiB)}: code ${mib(breakdown.fileKiB)}, main V8 heap ` +
          `${mib(breakdown.heapTotalBytes / 1024)} (${mib(breakdown.heapUsedBytes / 1024)} used), external ` +
          `${mib(breakdown.externalBytes / 1024)}, the rest of anonymous (workflow thread, Rust core, stacks) ` +
          mib(breakdown.anonymousKiB - (breakdown.heapTotalBytes + breakdown.externalBytes) / 1024),
      );
    }
    // Saturation: a busy machine stretches every step; this says who was busy.
    const cpu = [...cpuAfter]
      .map(([comm, sec]) => ({ comm, sec: sec - (cpuBefore.get(comm) ?? 0) }))
      .filter((x) => x.sec > 0.5)
      .sort((a, b) => b.sec - a.sec);
    const cpuTotal = cpu.reduce((sum, x) => sum + x.sec, 0);
    const capacity = (totalMs / 1000) * availableParallelism();
    console.log(
      `CPU during the run      ${cpuTotal.toFixed(0)} s of ${capacity.toFixed(0)} s (${availableParallelism()} CPUs): ` +
        cpu
          .slice(0, 8)
          .map((x) => `${x.comm} ${x.sec.toFixed(0)}`)
          .join(', '),
    );
    if (failed.length > 0) {
      console.log(`first failure: ${failed[0]!.message}`);
      process.exitCode = 1;
    }
  } finally {
    await cleanUp();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
