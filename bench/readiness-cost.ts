// What one readiness check costs (not a test): CPU and API-server requests per
// cluster per check, so that the docs can say how many clusters one worker
// replica re-checks every readinessInterval.
//
//   make bench-readiness [BENCH_ARGS='--clusters 20 --rounds 3']
//
// It starts a test bed of its own (scripts/testbed.sh: management + KWOK
// workload API servers) and makes N Cluster API Clusters there, each with a
// control-plane and a worker KWOK node, their Machines, a Deployment of 2 on
// the worker and a PodDisruptionBudget (half of them minAvailable 2: the drain
// check is Blocked). Then, in this process, it runs the readiness activities as
// the readiness workflow (and an upgrade's re-check) calls them, one cluster
// after the other, with the worker's least-privilege identity: readinessTarget,
// then surveyDrain (drain simulation, capacity, alerts) and checkClusterHealth
// at once, then checkDeprecatedApis. Per check it measures this process's CPU
// time (user + system) and counts the HTTP requests to each API server
// (diagnostics_channel, so nothing is estimated). The readiness workflow's own
// workflow tasks (four activities, a few commands) are not in these figures.
import { execFile } from 'node:child_process';
import { subscribe } from 'node:diagnostics_channel';
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs, promisify } from 'node:util';
import { machineLine, numberOption, percentile, runMain, table } from './lib/report.ts';

const execFileAsync = promisify(execFile);
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const P = 'upgrades.capi-orchestrator.io/';
const VERSION = 'v1.31.14';
const TARGET = 'v1.32.4';

/** Requests per `host:port` since the process started (http and https clients, and undici's fetch). */
const requests = new Map<string, number>();
function countRequests(): void {
  const add = (host: string) => requests.set(host, (requests.get(host) ?? 0) + 1);
  subscribe('http.client.request.start', (m) => {
    const r = (m as { request: { host?: string; getHeader(n: string): unknown } }).request;
    add(String(r.getHeader('host') ?? r.host ?? '?'));
  });
  subscribe('undici:request:create', (m) => {
    const r = (m as { request: { origin?: string } }).request;
    add(new URL(r.origin ?? 'http://unknown').host);
  });
}
const requestsTo = (host: string) => requests.get(host) ?? 0;

interface Sample {
  cpuMs: number;
  wallMs: number;
  management: number;
  workload: number;
  verdicts: string;
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      clusters: { type: 'string', default: '20' },
      rounds: { type: 'string', default: '3' },
      keep: { type: 'boolean', default: false },
    },
  });
  const n = numberOption('clusters', values.clusters, 1, 500, true);
  const rounds = numberOption('rounds', values.rounds, 1, 20, true);
  const loadBefore = loadavg()[0] ?? 0;
  countRequests();
  const dir = mkdtempSync(join(tmpdir(), 'capi-uo-bench-rd-'));
  const testbedDir = join(dir, 'testbed');
  const cleanups: (() => Promise<unknown>)[] = [];
  try {
    console.log(`readiness check cost: ${n} clusters, ${rounds} rounds`);
    cleanups.push(() => execFileAsync(join(ROOT, 'scripts/testbed.sh'), ['down', testbedDir]));
    await execFileAsync(join(ROOT, 'scripts/testbed.sh'), ['up', testbedDir], { maxBuffer: 16 << 20 });
    process.env.TESTBED_STATE = join(testbedDir, 'testbed.json');
    const f = await import('../support/testbed-fixtures.ts');
    const group = f.testGroup('bench-rd');
    const g = group.name;
    const wl = f.workloadApi();
    const mg = f.managementApi();
    const names = Array.from({ length: n }, (_, i) => `c${String(i).padStart(3, '0')}`);
    await Promise.all([f.createWorkloadNamespace(wl, g), f.createNamespace(mg.core, g)]);
    const t0 = Date.now();
    for (const name of names) {
      const cp = `${g}-${name}-cp`;
      const worker = `${g}-${name}-w`;
      const cluster = f.capiCluster(name, g, { version: VERSION });
      cluster.metadata.annotations = { [`${P}critical-namespaces`]: g };
      const held = Number(name.slice(1)) % 2 === 1;
      await f.createKubeconfigSecret(mg.core, g, name);
      await Promise.all([
        f.createNodes(wl.core, [
          f.kwokNode(group, cp, { role: 'control-plane', kubeletVersion: VERSION }),
          f.kwokNode(group, worker, { kubeletVersion: VERSION }),
        ]),
        f.createCapiObject(mg.custom, cluster),
        f.createCapiObject(mg.custom, f.capiMachine(cp, g, { cluster: name, controlPlane: true, nodeName: cp })),
        f.createCapiObject(mg.custom, f.capiMachine(worker, g, { cluster: name, nodeName: worker })),
        wl.apps.createNamespacedDeployment({
          namespace: g,
          body: f.deployment(group, `web-${name}`, { replicas: 2, nodeName: worker }),
        }),
        wl.policy.createNamespacedPodDisruptionBudget({
          namespace: g,
          body: f.podDisruptionBudget(group, `web-${name}`, { app: `web-${name}` }, { minAvailable: held ? 2 : 1 }),
        }),
      ]);
    }
    await f.waitForRunningPods(wl.core, g, '', 2 * n, 120_000);
    console.log(`${n} Clusters, ${2 * n} KWOK nodes and ${2 * n} pods in ${((Date.now() - t0) / 1000).toFixed(1)} s`);

    const { managementKubeConfig } = await import('../src/platform/kube/clients.ts');
    const { createReadinessActivities } = await import('../src/activities/readiness.ts');
    const { createClusterHealthActivities } = await import('../src/activities/cluster-health.ts');
    const { createDeprecatedApiActivities } = await import('../src/activities/deprecated-apis.ts');
    const management = managementKubeConfig(f.testbed().workerKubeconfig);
    const acts = {
      ...createReadinessActivities(management),
      ...createClusterHealthActivities(management),
      ...createDeprecatedApiActivities(management),
    };
    const mgHost = new URL(f.testbed().managementServer).host;
    const wlHost = new URL(f.testbed().workloadServer).host;
    /** One check of `name` as the readiness workflow runs it; the verdicts it read, for the log. */
    const check = async (name: string): Promise<string> => {
      const cluster = { namespace: g, name };
      await acts.readinessTarget({ cluster });
      const [survey, health] = await Promise.all([
        acts.surveyDrain({
          cluster,
          deleteEmptyDirData: false,
          force: false,
          gates: { targetVersion: TARGET, capacityReservation: 0 },
        }),
        acts.checkClusterHealth({ cluster, scope: 'pre', criticalNamespaces: [g], blockingPdbPolicy: 'warn' }),
      ]);
      await acts.checkDeprecatedApis({ cluster });
      const held = survey.simulation.totals.held > 0 ? 'drain Blocked' : 'drain Ready';
      return `${held}, health ${health.healthy ? 'Ready' : 'Blocked'}`;
    };
    // Warm up: connections, the kubeconfig Secrets' clients, JIT.
    for (const name of names.slice(0, 3)) await check(name);
    const samples: Sample[] = [];
    for (let r = 0; r < rounds; r++)
      for (const name of names) {
        const cpu = process.cpuUsage();
        const m0 = requestsTo(mgHost);
        const w0 = requestsTo(wlHost);
        const start = performance.now();
        const verdicts = await check(name);
        const used = process.cpuUsage(cpu);
        samples.push({
          cpuMs: (used.user + used.system) / 1000,
          wallMs: performance.now() - start,
          management: requestsTo(mgHost) - m0,
          workload: requestsTo(wlHost) - w0,
          verdicts,
        });
      }
    report(samples, n, loadBefore);
    return 0;
  } finally {
    for (const c of cleanups.reverse()) await c().catch(() => undefined);
    if (!values.keep) rmSync(dir, { recursive: true, force: true });
  }
}

function report(samples: Sample[], n: number, loadBefore: number): void {
  const stat = (pick: (s: Sample) => number) => {
    const sorted = Float64Array.from(samples.map(pick)).sort();
    const mean = sorted.reduce((a, b) => a + b, 0) / sorted.length;
    return { mean, p50: percentile(sorted, 50), p95: percentile(sorted, 95) };
  };
  const cpu = stat((s) => s.cpuMs);
  const wall = stat((s) => s.wallMs);
  const mgmt = stat((s) => s.management);
  const wl = stat((s) => s.workload);
  const f1 = (x: number) => x.toFixed(1);
  console.log(
    `\n${samples.length} checks (${n} clusters; ${samples.filter((s) => s.verdicts.startsWith('drain Blocked')).length} with a drain held by a PodDisruptionBudget)\n`,
  );
  console.log(
    table(
      [
        ['per check', 'mean', 'p50', 'p95'],
        ['CPU (ms, this process)', f1(cpu.mean), f1(cpu.p50), f1(cpu.p95)],
        ['wall (ms)', f1(wall.mean), f1(wall.p50), f1(wall.p95)],
        ['requests, management API server', f1(mgmt.mean), f1(mgmt.p50), f1(mgmt.p95)],
        ['requests, workload API server', f1(wl.mean), f1(wl.p50), f1(wl.p95)],
      ],
      (i) => i > 0,
    ),
  );
  // 10,000 clusters every 15 minutes: 11.1 checks a second.
  const rate = 10_000 / (15 * 60);
  console.log(
    `\n10,000 clusters re-checked every 15 min = ${rate.toFixed(1)} checks/s: ` +
      `${((rate * cpu.mean) / 1000).toFixed(2)} CPU cores of activity work, ` +
      `${(rate * mgmt.mean).toFixed(0)} requests/s to the management API server, ` +
      `${f1(mgmt.mean + wl.mean)} requests per cluster per check in all; ` +
      `${Math.ceil((rate * wall.mean) / 1000)} checks in flight at the mean wall time`,
  );
  console.log(machineLine(loadBefore));
}

runMain(main);
