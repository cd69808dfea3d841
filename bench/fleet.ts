// Fleet benchmark (not a test): the hooks CAPI calls for a management cluster
// with N clusters upgrading, against the real processes.
//
//   source scripts/env.sh && node --disable-warning=ExperimentalWarning bench/fleet.ts \
//     [--clusters 500] [--rate 100] [--duration 20] [--new-gates 1000] [--concurrency 64]
//     [--connections 64] [--settle-timeout 180] [--log-level info] [--extension-root DIR]
//     [--temporal dev|production] [--profile default|10k|waiting] [--seed hooks|client]
//     [--management none|testbed] [--request-checks on|off]
//
// --temporal production runs on the production-shaped Temporal (the server's four services on
// PostgreSQL with SQL visibility, src/local/temporal-production.ts; `source scripts/env.sh
// --temporal-production`) instead of the CLI's dev server. --profile 10k: 10,000 waiting
// upgrades (--clusters) polled as CAPI re-polls them every 10 s (1,000 req/s), after the same
// at 500 (50 req/s), so the api's CPU per poll at both sizes and their ratio show whether it
// grows with the fleet; then new upgrades/s and new gates/s (classes 4b, 4c). Its upgrades are
// started with the Temporal client (--seed client: a hook call per cluster is too slow to seed
// 10,000); every poll measured still goes over HTTPS through the api, as CAPI's.
// --profile waiting: N upgrades (--clusters, default 1,000) waiting for a
// maintenance window that opens 3 hours after the start, driven as CAPI drives them: each
// cluster calls BeforeClusterUpgrade, then again once the answer's retryAfterSeconds has passed
// (CAPI's hook cache), for --duration (default 150 s) after one warm-up call each. It prints the
// calls per second, the CPU per waiting cluster (api, worker, Temporal), the answers'
// retryAfterSeconds and the poll latency. Run it with --extension-root on main for "before".
//
// --management testbed gives both processes a management cluster (the project's test bed, its API
// server only; `source scripts/env.sh --testbed`) holding a real Cluster for every cluster the
// load calls a gate for, with the uid and topology version the requests carry; the api then checks
// each call that starts or signals an upgrade against it (--request-checks on, the default there)
// or not (off): the same run with each says what the checks cost (docs/performance.md).
// --request-checks without --management testbed is refused. A test bed left by a benchmark killed
// beyond cleanup (SIGKILL) is taken down by the next --management testbed run.
//
// --extension-root runs another checkout's src/ (e.g. `git archive` of main, with a node_modules
// link) under the same driver: "before" and "after" figures from one script. BENCH_NODE_FLAGS
// replaces the image's NODE_OPTIONS for both processes.
//
// It starts its own stack (support/stack.ts): a Temporal dev server, the
// worker (ROLE=worker) and the hook server (ROLE=api) as three processes on
// free loopback ports, both ours run from main.js compiled from src/ as the image is, with the image's Node
// options and a prebuilt workflow bundle. It creates N upgrades by sending
// each cluster its first BeforeClusterUpgrade, then drives each hook class
// with a keep-alive HTTPS client that sends no Content-Type (as CAPI's Go
// client does), and prints latency, throughput, errors, the Temporal frontend
// calls per request, CPU and RSS of each process, and the history of one
// waiting upgrade before and after 100 polls of its gate.
//
// Why the upgrades wait without a Kubernetes cluster: every cluster carries
// the annotation upgrades.capi-orchestrator.io/upgrade-at=2099-01-01T00:00:00Z.
// The BeforeClusterUpgrade step then sits on a workflow timer before its first
// activity (the health check, capacity reservation and everything else that
// would need a workload cluster come after it), so each upgrade is a running
// workflow whose gate answers "retry later" for as long as the benchmark runs,
// which is exactly CAPI's steady state while a fleet waits for its window.
// Without --management neither process has a management cluster (no MANAGEMENT_KUBECONFIG): the
// only activities that run are the Kubernetes Events recorded beside each
// gate change; they fail at once without dialling anything and are tried
// three times each (extra worker work that a real deployment, whose Events
// succeed at the first try, does not have). The benchmark waits for the processes to go quiet before
// each measurement so that leftover work is not billed to it.
//
// The load, each class with its own fresh clusters where it needs them:
//   1. AfterControlPlaneInitialized, open loop at --rate: a new cluster per call (as CAPI calls it
//      once per cluster), so each call has a lifecycle event to record;
//   2. repeat polls: BeforeClusterUpgrade of the N waiting upgrades, round robin, open loop;
//   3. GenerateUpgradePlan (no Temporal), open loop, bench/lib/hook-client.ts's body;
//   4. new gates: a first BeforeClusterUpgrade for new clusters (a new workflow and its gate), open
//      loop at --rate; then --new-gates of them in a closed loop at --concurrency (sustained
//      gates/s), then --new-gates BeforeControlPlaneUpgrade calls to running upgrades (a new gate on
//      an existing workflow, recorded by an update).
// Open loop: requests leave on schedule whatever the answers, so latency includes queueing.
// Any transport error, non-200, status other than Success or unexpected answer is an error.
import { rmSync } from 'node:fs';
import { loadavg } from 'node:os';
import { relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Agent } from 'node:https';
import { Client, Connection } from '@temporalio/client';
import proto from '@temporalio/proto';
import { defaultHandlerName, type HookName } from '../src/api/hooks/contract.ts';
import { hookPath } from '../src/api/hooks/hook-route.ts';
import { policyKeys } from '../src/domain/policy-keys.ts';
import {
  CLUSTER_UPGRADE_MEMO_KEY,
  clusterUpgradeWorkflowId,
  gateKey,
  type ClusterUpgradeInput,
  type ClusterUpgradeMemo,
  type HookCall,
} from '../src/model/cluster-upgrade.ts';
import { policyHash, resolveUpgradePolicy } from '../src/domain/upgrade-policy.ts';
import { ClusterName, ClusterNamespace, TargetVersion, UpgradePhase } from '../src/model/search-attributes.ts';
import { workflowTypes } from '../src/model/workflow-types.ts';
import { cluster, sampleRequest } from '../support/capi-fixtures.ts';
import { chainedPlanRequestBody, postHook, REQUEST_TIMEOUT_MS, type Target } from './lib/hook-client.ts';
import { capiLoop, closedLoop, errorText, forEachLimit, openLoop, waitQuiet, type Phase } from './lib/load.ts';
import { percentile } from './lib/report.ts';
import { MemorySampler } from './lib/proc.ts';
import {
  classReport,
  measure,
  memoryPeaks,
  memoryReport,
  targets,
  type ClassResult,
  type Expectation,
  type Target as ClassTarget,
} from './lib/fleet-report.ts';
import { memoryBreakdown } from './lib/fleet-profile.ts';
import {
  fleetManagementDir,
  reapStaleFleetManagement,
  requestCheckCounts,
  startFleetManagement,
  stopFleetManagement,
  type FleetManagement,
} from './lib/fleet-management.ts';
import { benchNodeFlags, startStack, type Stack } from '../support/stack.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const TASK_QUEUE = 'bench-fleet';
const UPGRADE_AT = '2099-01-01T00:00:00Z';
const DAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];
/** The waiting profile's window: one hour a week, opening 3 hours after `now` (UTC). */
function windowHoursAhead(now: number): string {
  const opens = new Date(now + 3 * 3_600_000);
  const hhmm = opens.toISOString().slice(11, 16);
  return `${DAYS[opens.getUTCDay()]} ${hhmm} 1h`;
}
/** What the waiting fleet's clusters carry, and what their gate says while they wait (set per profile). */
let fleetAnnotations: Record<string, string> = { [policyKeys.upgradeAt.annotation]: UPGRADE_AT };
let waitingText = 'waiting for upgradeAt';
/** CAPI re-calls a blocking hook about every retryAfterSeconds (10 s for these gates). */
const REPOLL_SECONDS = 10;
/** The 10k profile's smaller fleet, for the CPU-per-poll ratio. */
const BASELINE_CLUSTERS = 500;

function parseOptions() {
  const { values } = parseArgs({
    options: {
      clusters: { type: 'string', default: '500' },
      rate: { type: 'string', default: '100' },
      duration: { type: 'string', default: '20' },
      'new-gates': { type: 'string', default: '1000' },
      concurrency: { type: 'string', default: '64' },
      connections: { type: 'string', default: '64' },
      'settle-timeout': { type: 'string', default: '180' },
      'log-level': { type: 'string', default: 'info' },
      'extension-root': { type: 'string', default: ROOT },
      temporal: { type: 'string', default: 'dev' },
      profile: { type: 'string', default: 'default' },
      seed: { type: 'string' },
      management: { type: 'string', default: 'none' },
      'request-checks': { type: 'string' },
    },
    strict: true,
  });
  const number = (name: keyof typeof values, min: number, max: number): number => {
    const raw = String(values[name]);
    const n = Number(raw);
    if (!Number.isFinite(n) || n < min || n > max)
      throw new Error(`--${name} ${JSON.stringify(raw)}: expected ${min}..${max}`);
    return n;
  };
  const oneOf = <T extends string>(
    name: 'temporal' | 'profile' | 'seed' | 'management' | 'request-checks',
    allowed: readonly T[],
    fallback: T,
  ): T => {
    const raw = values[name] ?? fallback;
    if (!(allowed as readonly string[]).includes(raw))
      throw new Error(`--${name} ${JSON.stringify(raw)}: expected ${allowed.join(' or ')}`);
    return raw as T;
  };
  const profile = oneOf('profile', ['default', '10k', 'waiting'] as const, 'default');
  const tenK = profile === '10k';
  const waiting = profile === 'waiting';
  if (waiting && values.clusters === '500') values.clusters = '1000';
  if (waiting && values.duration === '20') values.duration = '150';
  // The 10k profile's figures are for CAPI's default re-poll: each cluster every 10 s.
  if (tenK && values.clusters === '500') values.clusters = '10000';
  const clusters = Math.round(number('clusters', 1, 100_000));
  if (tenK && values.rate === '100') values.rate = String(clusters / REPOLL_SECONDS);
  const management = oneOf('management', ['none', 'testbed'] as const, 'none');
  // Without a management cluster there is nothing to check against: the checks are off, whatever was asked.
  if (values['request-checks'] !== undefined && management !== 'testbed')
    throw new Error('--request-checks needs --management testbed (without a management cluster the checks are off)');
  return {
    profile,
    temporal: oneOf('temporal', ['dev', 'production'] as const, 'dev'),
    seed: oneOf('seed', ['hooks', 'client'] as const, tenK || waiting ? 'client' : 'hooks'),
    management,
    requestChecks: oneOf('request-checks', ['on', 'off'] as const, 'on') === 'on',
    clusters,
    rate: number('rate', 0.1, 10_000),
    durationSeconds: number('duration', 0.1, 600),
    newGates: Math.round(number('new-gates', 1, 100_000)),
    concurrency: Math.round(number('concurrency', 1, 1024)),
    connections: Math.round(number('connections', 1, 1024)),
    settleTimeoutMs: number('settle-timeout', 0, 600) * 1000,
    logLevel: values['log-level'],
    extensionRoot: values['extension-root'],
  };
}

// ---------------------------------------------------------------- request bodies

const TARGET = 'v1.33.0';
/** With --management testbed: the uid the API server gave Cluster `c-<i>` of group g, by `g/i`. */
const managedUids = new Map<string, string>();

/**
 * A CAPI Cluster of the fleet: its own namespace per group, name and uid per index (the real
 * Cluster's with --management testbed), upgrade-at far away.
 */
function fleetCluster(group: number, i: number) {
  const c = cluster(`c-${i}`, `fleet-${group}`, TARGET);
  c.metadata.uid =
    managedUids.get(`${group}/${i}`) ??
    `${group.toString(16).padStart(8, '0')}-0000-4000-8000-${i.toString(16).padStart(12, '0')}`;
  c.metadata.annotations = { ...c.metadata.annotations, ...fleetAnnotations };
  return c;
}
const GROUP = { waiting: 1, acpi: 2, newOpen: 3, newClosed: 4 } as const;

/** Calls per open-loop class: --rate for --duration. */
const openLoopCalls = (o: { rate: number; durationSeconds: number }) =>
  Math.max(1, Math.round(o.rate * o.durationSeconds));

/**
 * The Clusters of every group whose gates the load calls (the waiting fleet, 4a's and 4b's new
 * upgrades; 4c's gates are on those), created in the management cluster, their uids kept for
 * the request bodies. AfterControlPlaneInitialized starts no upgrade, so its clusters need none.
 */
async function createManagedClusters(management: FleetManagement, o: ReturnType<typeof parseOptions>) {
  const groups: [number, number][] = [
    [GROUP.waiting, o.clusters],
    [GROUP.newOpen, openLoopCalls(o)],
    [GROUP.newClosed, o.newGates],
  ];
  for (const [group, count] of groups) {
    const names = Array.from({ length: count }, (_, i) => `c-${i}`);
    const uids = await management.createClusters(`fleet-${group}`, names, TARGET);
    uids.forEach((uid, i) => managedUids.set(`${group}/${i}`, uid));
  }
}

/** The path CAPI calls, with the 10 s deadline it sends by default. */
const hookUrl = (hook: HookName) => `${hookPath(hook, defaultHandlerName(hook))}?timeout=10s`;

const body = (request: object) => Buffer.from(JSON.stringify(request));
const bcu = (group: number, i: number) =>
  body({ ...sampleRequest('BeforeClusterUpgrade'), cluster: fleetCluster(group, i) });
const bcp = (group: number, i: number) =>
  body({ ...sampleRequest('BeforeControlPlaneUpgrade'), cluster: fleetCluster(group, i) });
const acpi = (i: number) =>
  body({ ...sampleRequest('AfterControlPlaneInitialized'), cluster: fleetCluster(GROUP.acpi, i) });

// What a right answer looks like, per class (postHook has already required HTTP 200 and status Success).
const gateAnswer =
  (kind: string, prefix: string, includes?: string): Expectation =>
  (r) => {
    if (r.kind !== kind) return `kind ${JSON.stringify(r.kind)}, expected ${kind}`;
    const message = String(r.message ?? '');
    if (!(Number(r.retryAfterSeconds) > 0)) return `retryAfterSeconds ${String(r.retryAfterSeconds)}: the gate opened?`;
    if (!message.startsWith(prefix) || (includes && !message.includes(includes)))
      return `unexpected message: ${message.slice(0, 120)}`;
    return undefined;
  };
const expect = {
  acpi: ((r) =>
    r.kind === 'AfterControlPlaneInitializedResponse' ? undefined : `kind ${String(r.kind)}`) as Expectation,
  waiting: ((r) =>
    gateAnswer('BeforeClusterUpgradeResponse', 'BeforeClusterUpgrade v1.33.0: ', waitingText)(r)) as Expectation,
  newUpgrade: gateAnswer('BeforeClusterUpgradeResponse', 'BeforeClusterUpgrade v1.33.0: '),
  newGate: gateAnswer('BeforeControlPlaneUpgradeResponse', 'BeforeControlPlaneUpgrade v1.32.4: '),
  plan: ((r) => {
    const versions = ((r.controlPlaneUpgrades as { version: string }[] | undefined) ?? []).map((s) => s.version);
    return versions.length === 4 && versions[3] === 'v1.33.0' ? undefined : `plan ${JSON.stringify(versions)}`;
  }) as Expectation,
};

/**
 * Starts waiting upgrade `i` of the fleet as the api would on its first BeforeClusterUpgrade (same
 * workflow id, input and search attributes), without the hook call: seeding 10,000 through the
 * hooks takes longer than the benchmark may.
 */
async function startWaiting(client: Client, i: number): Promise<void> {
  const c = fleetCluster(GROUP.waiting, i);
  const resolved = resolveUpgradePolicy({ annotations: c.metadata.annotations });
  if (!resolved.ok) throw new Error(resolved.message);
  const request = sampleRequest('BeforeClusterUpgrade');
  const firstCall: HookCall = {
    hook: 'BeforeClusterUpgrade',
    version: request.toKubernetesVersion,
    targetVersion: request.toKubernetesVersion,
    fromVersion: request.fromKubernetesVersion,
    controlPlaneUpgrades: (request.controlPlaneUpgrades ?? []).map((u) => u.version),
    workersUpgrades: (request.workersUpgrades ?? []).map((u) => u.version),
    policy: resolved.policy,
    policyHash: policyHash(resolved.policy),
  };
  const cluster = { namespace: c.metadata.namespace, name: c.metadata.name, uid: c.metadata.uid! };
  const input: ClusterUpgradeInput = { cluster, firstCall };
  await client.workflow.start(workflowTypes.clusterUpgrade, {
    workflowId: clusterUpgradeWorkflowId(cluster),
    taskQueue: TASK_QUEUE,
    args: [input],
    workflowIdConflictPolicy: 'USE_EXISTING',
    typedSearchAttributes: [
      { key: ClusterNamespace, value: cluster.namespace },
      { key: ClusterName, value: cluster.name },
      { key: TargetVersion, value: firstCall.targetVersion },
      { key: UpgradePhase, value: 'Pending' },
    ],
  });
}

// ---------------------------------------------------------------- the run

/**
 * A workflow's history length once nothing is in flight (no activity such as an Event being
 * recorded, no workflow task) and two reads a second apart agree; the last read after 30 s.
 */
async function settledHistoryLength(client: Client, workflowId: string): Promise<number> {
  const handle = client.workflow.getHandle(workflowId);
  const deadline = Date.now() + 30_000;
  let last = -1;
  for (;;) {
    const { historyLength, raw } = await handle.describe();
    const busy = (raw.pendingActivities?.length ?? 0) > 0 || Boolean(raw.pendingWorkflowTask);
    if ((!busy && historyLength === last) || Date.now() > deadline) return historyLength;
    last = busy ? -1 : historyLength;
    await new Promise((r) => setTimeout(r, 1_000));
  }
}

async function run(stack: Stack, options: ReturnType<typeof parseOptions>, log: (l: string) => void) {
  const { clusters: n, rate, durationSeconds, newGates, concurrency } = options;
  // One pool for the whole run, as a controller keeps its connections.
  const agent = new Agent({ keepAlive: true, maxSockets: options.connections, ca: stack.caPem });
  const target: Target = { port: stack.hookPort, ca: stack.caPem, agent };
  const call = async (hook: HookName, payload: Buffer, check: Expectation) => {
    const problem = check(await postHook(target, hookUrl(hook), payload));
    if (problem) throw new Error(problem);
  };
  const connection = await Connection.connect({ address: stack.temporal.address });
  const client = new Client({ connection, namespace: stack.temporal.namespace });
  const pids = { api: stack.api.pid, worker: stack.worker.pid, temporal: stack.temporal.pid };
  const memory = new MemorySampler(new Map(Object.entries(pids)));
  const quiet = async () => {
    const settled = await waitQuiet(
      [pids.api, pids.worker, ...Object.values(stack.temporalPids)],
      0.3,
      options.settleTimeoutMs,
    );
    log(`  (${settled.quiet ? 'quiet' : 'STILL BUSY'} after ${settled.seconds.toFixed(0)} s)`);
    return settled;
  };
  const results: ClassResult[] = [];
  const repeatPolls: { clusters: number; result: ClassResult }[] = [];
  const ctx = { stack, pids, settle: quiet };
  const bodiesOf = (from: number, to: number) =>
    Array.from({ length: to - from }, (_, k) => bcu(GROUP.waiting, from + k));
  /** Upgrades from..to-1 of the fleet, each running and waiting for upgradeAt at its first gate. */
  const seedWaiting = async (from: number, to: number) => {
    const bodies = bodiesOf(from, to);
    if (options.seed === 'hooks') {
      log(
        `creating ${to - from} upgrades (first BeforeClusterUpgrade each, closed loop, concurrency ${concurrency})...`,
      );
      results.push(
        await measure(
          ctx,
          `0. setup: first BeforeClusterUpgrade of each (${from}..${to - 1})`,
          `closed c=${concurrency}`,
          {
            hook: 'BeforeClusterUpgrade',
            run: (() => {
              let next = 0;
              return () =>
                closedLoop(concurrency, 600, bodies.length, () =>
                  call('BeforeClusterUpgrade', bodies[next++]!, expect.newUpgrade),
                );
            })(),
          },
        ),
      );
    } else {
      log(`starting ${to - from} upgrades with the Temporal client (concurrency ${concurrency})...`);
      const started = performance.now();
      // Each start is tried 3 times; every one settles before a failure ends the run (a start still
      // retrying on a closed connection would crash the process without saying why).
      const failed: string[] = [];
      await forEachLimit(
        Array.from({ length: to - from }, (_, k) => from + k),
        concurrency,
        async (i) => {
          for (let attempt = 1; ; attempt++) {
            try {
              return await startWaiting(client, i);
            } catch (err) {
              if (attempt >= 3) return void failed.push(`upgrade ${i}: ${errorText(err)}`);
              await new Promise((r) => setTimeout(r, 1_000));
            }
          }
        },
      );
      if (failed.length > 0) throw new Error(`${failed.length} upgrades did not start; first: ${failed[0]}`);
      const seconds = (performance.now() - started) / 1000;
      log(`  started ${to - from} in ${seconds.toFixed(1)} s (${((to - from) / seconds).toFixed(0)}/s)`);
    }
    const query = `WorkflowType = "${workflowTypes.clusterUpgrade}" AND ExecutionStatus = "Running" AND CapiClusterNamespace = "fleet-${GROUP.waiting}"`;
    const deadline = Date.now() + 300_000;
    let running = 0;
    while ((running = (await client.workflow.count(query)).count) < to && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 1_000));
    log(`${running} of ${to} upgrade workflows running`);
    if (running < to) throw new Error(`only ${running} of ${to} upgrades exist after 300 s`);
    // Each workflow's first task must have run (the gate says "waiting for upgradeAt", not "queued").
    if (options.seed === 'client') {
      // Read from the memos, not through the api (its views start cold, as after a restart): Lists
      // of at most 100 ids, as the api makes them; one that fails (the frontend's visibility rate)
      // is tried again in the next round. One List of 10,000 memos is refused by the frontend.
      const key = gateKey('BeforeClusterUpgrade', 'v1.33.0');
      const idOf = (i: number) => {
        const m = fleetCluster(GROUP.waiting, i).metadata;
        return clusterUpgradeWorkflowId({ namespace: m.namespace, name: m.name, uid: m.uid });
      };
      // First the workflow task backlog (one cheap call): Lists while thousands of first tasks
      // wait would take the frontend's CPU from the very tasks they wait for.
      for (let last = 0, since = Date.now(); ;) {
        const { stats } = await client.workflowService.describeTaskQueue({
          namespace: stack.temporal.namespace,
          taskQueue: { name: TASK_QUEUE },
          taskQueueType: proto.temporal.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
          reportStats: true,
        });
        const backlog = Number(stats?.approximateBacklogCount ?? 0);
        if (backlog === 0) break;
        if (Date.now() - since > 900_000) throw new Error(`${backlog} workflow tasks still queued after 900 s`);
        if (Date.now() - last > 30_000) {
          log(`  ${backlog} workflow tasks queued (${(stats?.tasksDispatchRate ?? 0).toFixed(0)}/s dispatched)`);
          last = Date.now();
        }
        await new Promise((r) => setTimeout(r, 2_000));
      }
      let unchecked = Array.from({ length: to }, (_, i) => idOf(i));
      let lastProblem = '';
      for (let round = 0; unchecked.length > 0; round++) {
        if (round >= 60)
          throw new Error(
            `${unchecked.length} of ${to} upgrades do not say "${waitingText}" after 60 rounds (${lastProblem})`,
          );
        const still: string[] = [];
        const batches = Array.from({ length: Math.ceil(unchecked.length / 100) }, (_, b) =>
          unchecked.slice(b * 100, b * 100 + 100),
        );
        await forEachLimit(batches, 2, async (ids) => {
          const waiting = new Set<string>();
          try {
            const inList = ids.map((id) => JSON.stringify(id)).join(', ');
            for await (const wf of client.workflow.list({ query: `WorkflowId IN (${inList})`, pageSize: 100 })) {
              const memo = wf.memo?.[CLUSTER_UPGRADE_MEMO_KEY] as ClusterUpgradeMemo | undefined;
              if (memo?.gates[key]?.message.includes(waitingText)) waiting.add(wf.workflowId);
            }
          } catch (err) {
            lastProblem = errorText(err);
          }
          still.push(...ids.filter((id) => !waiting.has(id)));
        });
        unchecked = still;
        if (unchecked.length > 0) await new Promise((r) => setTimeout(r, 5_000));
      }
      log(`all ${to} gates say "${waitingText}" (by their memos)`);
      return;
    }
    let pending = bodies.map((_, k) => k);
    let lastProblem = '';
    for (let round = 0; pending.length > 0 && round < 120; round++) {
      const still: number[] = [];
      await forEachLimit(pending, 16, async (k) => {
        await call('BeforeClusterUpgrade', bodies[k]!, expect.waiting).catch((err: unknown) => {
          still.push(k);
          lastProblem = errorText(err);
        });
      });
      pending = still;
      if (pending.length > 0) await new Promise((r) => setTimeout(r, 2_000));
    }
    if (pending.length > 0)
      throw new Error(`${pending.length} upgrades never answered "${waitingText}" (last: ${lastProblem})`);
    log(`all ${to} gates say "${waitingText}"`);
  };
  try {
    // ---- the waiting profile: N upgrades waiting for a window, each polled as CAPI polls it
    if (options.profile === 'waiting') {
      await seedWaiting(0, n);
      const bodies = Array.from({ length: n }, (_, i) => bcu(GROUP.waiting, i));
      const retryAfterOf = async (i: number) => {
        const r = await postHook(target, hookUrl('BeforeClusterUpgrade'), bodies[i]!);
        const problem = expect.waiting(r);
        if (problem) throw new Error(problem);
        return Number(r.retryAfterSeconds);
      };
      // One call each first (as CAPI has made before the steady state): what each was told.
      log(`warm-up: one BeforeClusterUpgrade per cluster (concurrency ${concurrency})...`);
      const told = new Array<number>(n).fill(10);
      await forEachLimit(
        Array.from({ length: n }, (_, i) => i),
        concurrency,
        async (i) => void (told[i] = await retryAfterOf(i)),
      );
      await quiet();
      const name = `W. ${n} upgrades waiting for a window 3 h ahead, each calling again after its retryAfterSeconds`;
      log(`${name}, for ${durationSeconds} s...`);
      let retryAfter = new Map<number, number>();
      let lagMs = 0;
      const result = await measure(ctx, name, `CAPI-driven, ${n} clients`, {
        hook: 'BeforeClusterUpgrade',
        run: async () => {
          const phase = await capiLoop(n, durationSeconds, (i) => Math.random() * told[i]! * 1000, retryAfterOf);
          retryAfter = phase.retryAfter;
          lagMs = phase.lagMs;
          return phase;
        },
      });
      results.push(result);
      return {
        results,
        repeatPolls,
        waiting: waitingSummary(n, result, retryAfter, lagMs),
        memory: memoryReport(memory, pids),
        memoryBreakdown: await memoryBreakdown([stack.api, stack.worker]),
      };
    }

    // ---- N upgrades, each waiting at its BeforeClusterUpgrade gate (the 10k profile: 500 first, polled, then the rest)
    const waitingBodies = Array.from({ length: n }, (_, i) => bcu(GROUP.waiting, i));
    const tenK = options.profile === '10k';
    let seeded = 0;
    for (const size of tenK ? [Math.min(BASELINE_CLUSTERS, n), n] : [n]) {
      await seedWaiting(seeded, size);
      seeded = size;
      if (!tenK) break;
      await quiet();
      const r = size / REPOLL_SECONDS;
      const name = `2. repeat poll: BeforeClusterUpgrade of the ${size} waiting, each every ${REPOLL_SECONDS} s`;
      log(`${name}, open ${r}/s...`);
      const result = await measure(ctx, name, `open ${r}/s`, {
        hook: 'BeforeClusterUpgrade',
        run: () =>
          openLoop(r, durationSeconds, (i) => call('BeforeClusterUpgrade', waitingBodies[i % size]!, expect.waiting)),
        target: targets.p99AtMost(25),
      });
      results.push(result);
      repeatPolls.push({ clusters: size, result });
      // Printed now too: a run stopped later (a time limit) still leaves this figure.
      const sorted = Float64Array.from(result.phase.latencies).sort();
      const apiMs = ([...result.threadCpu.api.values()].reduce((a, v) => a + v, 0) * 1000) / result.phase.requests;
      log(
        `  ${size} waiting: p50 ${percentile(sorted, 50).toFixed(1)} ms, p99 ${percentile(sorted, 99).toFixed(1)} ms, ` +
          `${result.phase.errors} errors, api CPU ${apiMs.toFixed(3)} ms/poll, Temporal ${((result.threadCpu.temporal * 1000) / result.phase.requests).toFixed(2)} ms/poll`,
      );
    }

    // ---- history of one waiting upgrade before and after 100 polls of its gate
    const first = fleetCluster(GROUP.waiting, 0).metadata;
    const workflowId = clusterUpgradeWorkflowId({ namespace: first.namespace, name: first.name, uid: first.uid });
    const historyBefore = await settledHistoryLength(client, workflowId);
    const pollErrors: string[] = [];
    for (let k = 0; k < 100; k++)
      await call('BeforeClusterUpgrade', waitingBodies[0]!, expect.waiting).catch(
        (err: unknown) => void pollErrors.push(errorText(err)),
      );
    const historyAfter = await settledHistoryLength(client, workflowId);
    const history = { workflowId, before: historyBefore, after: historyAfter, pollErrors };
    log(`history of ${workflowId}: ${historyBefore} events before 100 polls, ${historyAfter} after`);

    // ---- the hook classes, in order, each after the processes went quiet
    await quiet();
    const open = `open ${rate}/s`;
    const closed = `closed c=${concurrency}`;
    const total = openLoopCalls(options);
    const atRate = (send: (i: number) => Promise<void>) => () => openLoop(rate, durationSeconds, send);
    const inTurn = (bodies: Buffer[], send: (b: Buffer) => Promise<void>) => {
      let next = 0;
      return () => closedLoop(concurrency, 600, bodies.length, () => send(bodies[next++]!));
    };
    const acpiBodies = Array.from({ length: total }, (_, i) => acpi(i));
    const plan = chainedPlanRequestBody();
    const newOpen = Array.from({ length: total }, (_, i) => bcu(GROUP.newOpen, i));
    const newClosed = Array.from({ length: newGates }, (_, i) => bcu(GROUP.newClosed, i));
    // Running upgrades to record a BeforeControlPlaneUpgrade on: the N waiting ones, then 4a's.
    const onRunning = Array.from({ length: Math.min(newGates, n + total) }, (_, i) =>
      i < n ? bcp(GROUP.waiting, i) : bcp(GROUP.newOpen, i - n),
    );
    const classes: { name: string; load: string; hook: HookName; run: () => Promise<Phase>; target?: ClassTarget }[] = [
      {
        name: '1. AfterControlPlaneInitialized, a new cluster each',
        load: open,
        hook: 'AfterControlPlaneInitialized',
        run: atRate((i) => call('AfterControlPlaneInitialized', acpiBodies[i]!, expect.acpi)),
        target: targets.p99AtMost(5),
      },
      {
        name: `2. repeat poll: BeforeClusterUpgrade of the ${n} waiting, round robin`,
        load: open,
        hook: 'BeforeClusterUpgrade',
        run: atRate((i) => call('BeforeClusterUpgrade', waitingBodies[i % n]!, expect.waiting)),
        target: targets.p99AtMost(25),
      },
      {
        name: '3. GenerateUpgradePlan v1.29.0 -> v1.33.0',
        load: open,
        hook: 'GenerateUpgradePlan',
        run: atRate(() => call('GenerateUpgradePlan', plan, expect.plan)),
      },
      {
        name: '4a. new gate: first BeforeClusterUpgrade (new upgrade)',
        load: open,
        hook: 'BeforeClusterUpgrade',
        run: atRate((i) => call('BeforeClusterUpgrade', newOpen[i]!, expect.newUpgrade)),
      },
      {
        name: '4b. new gate: first BeforeClusterUpgrade (new upgrade)',
        load: closed,
        hook: 'BeforeClusterUpgrade',
        run: inTurn(newClosed, (b) => call('BeforeClusterUpgrade', b, expect.newUpgrade)),
        target: targets.perSecondAtLeast(200),
      },
      {
        name: '4c. new gate: BeforeControlPlaneUpgrade of a running upgrade',
        load: closed,
        hook: 'BeforeControlPlaneUpgrade',
        run: inTurn(onRunning, (b) => call('BeforeControlPlaneUpgrade', b, expect.newGate)),
        target: targets.perSecondAtLeast(200),
      },
    ];
    let atFleet: ReturnType<typeof memoryPeaks> | undefined;
    // The 10k profile measured its repeat polls above; of the rest it runs the rates of new upgrades and gates.
    const run = tenK ? classes.filter((c) => c.name.startsWith('4b') || c.name.startsWith('4c')) : classes;
    for (const { name, load, ...spec } of run) {
      // 4a and 4b start thousands of upgrades more than the fleet: the memory targets are for the fleet.
      if (name.startsWith(tenK ? '4b' : '4a')) atFleet = memoryPeaks(memory, pids);
      log(`${name}, ${load}...`);
      results.push(await measure(ctx, name, load, spec));
    }
    return {
      results,
      repeatPolls,
      waiting: undefined,
      history,
      memory: memoryReport(memory, pids, atFleet),
      memoryBreakdown: await memoryBreakdown([stack.api, stack.worker]),
    };
  } finally {
    memory.stop();
    agent.destroy();
    await connection.close();
  }
}

/** The waiting profile's figures: calls a second, CPU per waiting cluster, what CAPI was told, poll latency. */
function waitingSummary(n: number, r: ClassResult, retryAfter: Map<number, number>, lagMs: number): string {
  const seconds = r.phase.seconds;
  const api = [...r.threadCpu.api.values()].reduce((a, v) => a + v, 0);
  const worker = [...r.threadCpu.worker.values()].reduce((a, v) => a + v, 0);
  const temporal = r.threadCpu.temporal;
  const total = api + worker + temporal;
  const sorted = Float64Array.from(r.phase.latencies).sort();
  const perMinute = (cpu: number) => ((cpu * 1000) / n / seconds) * 60;
  const frontend = [...r.calls].map(([op, c]) => `${op} ${(c.count / Math.max(1, r.phase.requests)).toFixed(3)}`);
  const told = [...retryAfter].sort((a, b) => b[1] - a[1]).map(([s, count]) => `${s} s ×${count}`);
  return [
    `waiting fleet: ${n} upgrades, ${r.phase.requests} calls in ${seconds.toFixed(1)} s: ` +
      `${(r.phase.requests / seconds).toFixed(1)} calls/s (${((r.phase.requests / seconds / n) * 60).toFixed(2)} per cluster per minute), ${r.phase.errors} errors`,
    `  poll latency: p50 ${percentile(sorted, 50).toFixed(1)} ms, p99 ${percentile(sorted, 99).toFixed(1)} ms, ` +
      `max ${sorted.length ? sorted[sorted.length - 1]!.toFixed(1) : '-'} ms (driver lag ≤ ${lagMs.toFixed(0)} ms)`,
    `  CPU per waiting cluster, ms per minute: api ${perMinute(api).toFixed(2)}, worker ${perMinute(worker).toFixed(2)}, ` +
      `Temporal ${perMinute(temporal).toFixed(2)}; total ${perMinute(total).toFixed(2)} ` +
      `(${((total / seconds) * (1000 / n)).toFixed(3)} cores per 1,000 waiting clusters)`,
    `  CPU per call, ms: api ${((api * 1000) / Math.max(1, r.phase.requests)).toFixed(2)}, ` +
      `api + Temporal ${(((api + temporal) * 1000) / Math.max(1, r.phase.requests)).toFixed(2)}`,
    `  retryAfterSeconds answered: ${told.join(', ')}`,
    `  Temporal frontend calls per poll: ${frontend.join(', ') || 'none'}`,
  ].join('\n');
}

/** The api's CPU per repeat poll at the small and the large fleet, their ratio, and where Temporal's CPU went. */
function perPollRatio(polls: { clusters: number; result: ClassResult }[], stack: Stack): string {
  const perPoll = (r: ClassResult) => {
    const api = [...r.threadCpu.api.values()].reduce((a, v) => a + v, 0);
    return (api * 1000) / Math.max(1, r.phase.requests);
  };
  const [small, large] = polls as [(typeof polls)[0], (typeof polls)[0]];
  const ratio = perPoll(large.result) / perPoll(small.result);
  const temporalPerPoll = (r: ClassResult) =>
    Object.entries(r.threadCpu.temporalBy)
      .map(([k, v]) => `${k} ${((v * 1000) / Math.max(1, r.phase.requests)).toFixed(2)}`)
      .join(' / ');
  return [
    `api CPU per repeat poll (${stack.temporalKind === 'production' ? 'production-shaped Temporal' : 'dev server'}): ` +
      `${perPoll(small.result).toFixed(3)} ms at ${small.clusters} waiting upgrades, ` +
      `${perPoll(large.result).toFixed(3)} ms at ${large.clusters}: ratio ${ratio.toFixed(2)} ` +
      `(target ≤ 1.2: ${ratio <= 1.2 ? 'met' : 'NOT met'})`,
    `Temporal CPU per repeat poll, ms by component: at ${small.clusters}: ${temporalPerPoll(small.result)}; ` +
      `at ${large.clusters}: ${temporalPerPoll(large.result)}`,
  ].join('\n');
}

async function main(): Promise<number> {
  const options = parseOptions();
  if (options.profile === 'waiting') {
    fleetAnnotations = { [policyKeys.maintenanceWindow.annotation]: windowHoursAhead(Date.now()) };
    waitingText = 'waiting for the maintenance window';
  }
  const commandLine = [
    'node',
    ...process.execArgv,
    relative(process.cwd(), process.argv[1] ?? 'bench/fleet.ts'),
    ...process.argv.slice(2),
  ].join(' ');
  const log = (line: string) => process.stderr.write(`${line}\n`);
  let stack: Pick<Stack, 'stop' | 'killNow'> | undefined;
  let management: FleetManagement | undefined;
  const managementDir = options.management === 'testbed' ? fleetManagementDir() : '';
  let stopping: Promise<void> | undefined;
  const stopStack = () =>
    (stopping ??= (async () => {
      await stack?.stop();
      if (managementDir) {
        await stopFleetManagement(ROOT, managementDir);
        rmSync(managementDir, { recursive: true, force: true });
      }
    })());
  // Ctrl-C or a kill: stop what we started, in order, then leave.
  for (const signal of ['SIGINT', 'SIGTERM'] as const)
    process.once(signal, () => {
      log(`${signal}: stopping the stack...`);
      void stopStack().finally(() => process.exit(130));
    });
  process.once('exit', () => stack?.killNow());
  try {
    if (options.management === 'testbed') {
      await reapStaleFleetManagement(ROOT, log);
      management = await startFleetManagement(ROOT, managementDir, log);
      await createManagedClusters(management, options);
      log(`request checks ${options.requestChecks ? 'on' : 'off'}, against the management test bed`);
    }
    const loadBefore = loadavg()[0] ?? 0;
    const started = await startStack({
      ...(management
        ? { management: { kubeconfig: management.kubeconfig, requestChecks: options.requestChecks } }
        : {}),
      temporal: options.temporal,
      extensionRoot: options.extensionRoot,
      taskQueue: TASK_QUEUE,
      logLevel: options.logLevel,
      nodeFlags: benchNodeFlags(),
      log,
      onStopper: (stopper) => (stack = stopper),
    });
    const outcome = await run(started, options, log);
    const { repeatPolls, waiting, ...report } = outcome;
    console.log(
      classReport({
        commandLine,
        options,
        requestTimeoutMs: REQUEST_TIMEOUT_MS,
        ...report,
        stack: started,
        loadBefore,
      }),
    );
    if (repeatPolls.length === 2) console.log(`\n${perPollRatio(repeatPolls, started)}`);
    if (waiting) console.log(`\n${waiting}`);
    if (management)
      console.log(
        `\nrequest checks ${options.requestChecks ? 'on' : 'off'} (the api's capi_upgrade_hook_request_checks_total):\n` +
          (await requestCheckCounts(started.api.opsUrl)),
      );
    return outcome.results.some((r) => r.phase.errors > 0) ? 1 : 0;
  } finally {
    await stopStack();
  }
}

main().then(
  (code) => (process.exitCode = code),
  (err: unknown) => {
    console.error(err instanceof Error ? (err.stack ?? err.message) : String(err));
    process.exitCode = 1;
  },
);
