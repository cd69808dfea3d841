// Every reader of a workload cluster, pointed by a tenant's `<cluster>-kubeconfig`
// Secret at a hostile API server, through the real code paths (the management
// test bed holds the Secret): each hostile answer fails that cluster's read with a
// message naming the cluster and the limit, nothing stays open, and an honest
// cluster read at the same moment is served.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { KubeConfig } from '@kubernetes/client-node';
import { createClusterHealthActivities } from '../../src/activities/cluster-health.ts';
import { createDeprecatedApiActivities } from '../../src/activities/deprecated-apis.ts';
import { NodeDrainer } from '../../src/activities/drain/node-drainer.ts';
import { stableFailure } from '../../src/activities/failures.ts';
import { managementKubeConfig } from '../../src/platform/kube/clients.ts';
import { workloadKubeConfig } from '../../src/platform/kube/workload-clusters.ts';
import { watchObject } from '../../src/activities/object-watch.ts';
import { createNodeAgentCheck } from '../../src/platform/kube/node-agents.ts';
import { configureWorkloadReads } from '../../src/platform/kube/workload-kube-config.ts';
import { DEFAULT_WORKLOAD_READ_LIMITS } from '../../src/platform/kube/workload-limits.ts';
import {
  createKubeconfigSecret,
  createNamespace,
  createWorkloadNamespace,
  managementApi,
  testbed,
  testGroup,
  workloadApi,
} from '../../support/testbed-fixtures.ts';
import { until } from '../support/wait.ts';
import { HOSTILE_ANSWERS, startHostileApiServer, type HostileApiServer } from '../support/hostile-apiserver.ts';

const group = testGroup('hostile');
const g = group.name;
const mg = managementApi();
const wl = workloadApi();
/** The worker's identity (the health check lists Machines); the api's reads only Secrets, as in production. */
let management: KubeConfig;
let apiManagement: KubeConfig;
let hostile: HostileApiServer;
const tenant = { namespace: g, name: 'tenant' };
const honest = { namespace: g, name: 'wl' };

/** The failure's message, or `completed` when the read took the answer as harmless data. */
async function failureOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return 'completed';
  } catch (err) {
    return stableFailure(err).message;
  }
}

/** Answers every reader of the Kubernetes API must refuse (the rest are harmless data to some). */
const MUST_REFUSE = new Set(['huge', 'trickle', 'deep', 'dense', 'wrong-type', 'gzip', 'redirect']);
/** /metrics is text: only its size and its time are bounded. */
const METRICS_MUST_REFUSE = new Set(['huge', 'trickle']);
const METRICS = 'the removed-API scan (worker)';

beforeAll(async () => {
  // Short deadlines, so the slow answers end within the test's time (the honest cluster's reads need
  // a few seconds on a loaded machine).
  configureWorkloadReads({ ...DEFAULT_WORKLOAD_READ_LIMITS, timeoutMs: 5_000 });
  management = managementKubeConfig(testbed().workerKubeconfig);
  apiManagement = managementKubeConfig(testbed().apiKubeconfig);
  hostile = await startHostileApiServer();
  // Made now: building the gzip bomb holds this process for a moment, and the tests time reads.
  hostile.prepare();
  hostile.slowMs = 4_000;
  await Promise.all([createNamespace(mg.core, g), createWorkloadNamespace(wl, g)]);
  await createKubeconfigSecret(mg.core, g, honest.name);
  await mg.core.createNamespacedSecret({
    namespace: g,
    body: {
      metadata: { name: `${tenant.name}-kubeconfig`, namespace: g },
      type: 'cluster.x-k8s.io/secret',
      data: { value: Buffer.from(hostile.kubeconfig()).toString('base64') },
    },
  });
});
afterAll(async () => {
  configureWorkloadReads(DEFAULT_WORKLOAD_READ_LIMITS);
  await hostile.close();
  await Promise.all([
    mg.core.deleteNamespace({ name: g }).catch(() => undefined),
    wl.core.deleteNamespace({ name: g }).catch(() => undefined),
  ]);
});

const health = () => createClusterHealthActivities(management);
const healthInput = (cluster: typeof tenant) => ({
  cluster,
  scope: 'pre' as const,
  criticalNamespaces: ['kube-system'],
  blockingPdbPolicy: 'warn' as const,
});

/** Each reader: what it reads of the tenant's cluster, and the refusal it ends with. */
const readers: Record<string, () => Promise<string>> = {
  'the node agent check (api, CanUpdateMachine)': async () => {
    const check = createNodeAgentCheck({ management: apiManagement, namespace: g, cacheMs: 0, readTimeoutMs: 2_000 });
    return (await check.missing(tenant, 'node-1')) ?? 'completed';
  },
  'the node agent check (api, CanUpdateMachineSet)': async () => {
    const check = createNodeAgentCheck({ management: apiManagement, namespace: g, cacheMs: 0, readTimeoutMs: 2_000 });
    return (await check.missing(tenant, undefined)) ?? 'completed';
  },
  'the health check (worker)': () => failureOf(health().checkClusterHealth(healthInput(tenant))),
  'the drain (worker)': async () => {
    const kc = await workloadKubeConfig(management, tenant);
    return await failureOf(
      new NodeDrainer(kc, 'node-1', { deleteEmptyDirData: true, force: true, timeoutMs: 60_000 }).survey(),
    );
  },
  [METRICS]: () => failureOf(createDeprecatedApiActivities(management).checkDeprecatedApis({ cluster: tenant })),
};

describe.each(Object.keys(readers))('%s against a hostile workload API server', (reader) => {
  it.each(HOSTILE_ANSWERS.filter((a) => a !== 'slow'))(
    'answering %s: that cluster fails, nothing else',
    async (answer) => {
      hostile.answer = answer;
      const started = Date.now();
      const [message, honestReport] = await Promise.all([
        readers[reader]!(),
        // The honest cluster, read at the same moment through the same process-wide gate.
        health().checkClusterHealth(healthInput(honest)),
      ]);
      expect(honestReport.summary).toEqual(expect.any(String));
      if ((reader === METRICS ? METRICS_MUST_REFUSE : MUST_REFUSE).has(answer)) {
        expect(message).not.toBe('completed');
        if (reader !== METRICS) expect(message).toContain(`workload cluster ${g}/tenant: `);
      }
      // Never a parse error quoting the tenant's bytes, never Temporal blamed.
      expect(message).not.toMatch(/Unexpected token|workflow service|is not valid JSON/);
      expect(Date.now() - started).toBeLessThan(15_000);
      await until(() => hostile.quietFor(1_000), 10_000, 'the hostile answers to be cut off, and no more asked');
    },
  );
});

describe('rows of the issue, against the real management test bed', () => {
  it('a node agent check against 400 MiB of Leases reads one Lease, not the list, and names the limit', async () => {
    hostile.answer = 'huge';
    const check = createNodeAgentCheck({ management: apiManagement, namespace: g, cacheMs: 0 });
    const before = hostile.bytesSent();
    const requests = hostile.requests.length;
    expect(await check.missing(tenant, 'node-1')).toBe(
      `cannot check for a node agent in cluster ${g}/tenant (workload cluster ${g}/tenant: ` +
        `GET /apis/coordination.k8s.io/v1/namespaces/${g}/leases/node-upgrade-agent-node-1: ` +
        'answer larger than 8388608 bytes (WORKLOAD_READ_MAX_BYTES))',
    );
    expect(hostile.requests.slice(requests)).toEqual([
      `/apis/coordination.k8s.io/v1/namespaces/${g}/leases/node-upgrade-agent-node-1`,
    ]);
    await until(() => hostile.openAnswers() === 0, 10_000, 'the answer to be cut off');
    expect(hostile.bytesSent() - before).toBeLessThan(24 * 1024 * 1024);
  });

  it('a trickling Lease read, asked every 500 ms: one read open at a time, each closed at its deadline, the workload cluster blamed', async () => {
    hostile.answer = 'trickle';
    const check = createNodeAgentCheck({
      management: apiManagement,
      namespace: g,
      cacheMs: 1_000,
      readTimeoutMs: 1_000,
    });
    let most = 0;
    const answers = new Set<string | undefined>();
    for (let i = 0; i < 12; i++) {
      const call = check.missing(tenant, 'node-1').then((m) => answers.add(m));
      most = Math.max(most, hostile.openAnswers());
      await new Promise((r) => setTimeout(r, 500));
      most = Math.max(most, hostile.openAnswers());
      await call;
    }
    expect(most).toBeLessThanOrEqual(1);
    expect([...answers]).toEqual([
      `cannot check for a node agent in cluster ${g}/tenant (workload cluster ${g}/tenant: ` +
        `GET /apis/coordination.k8s.io/v1/namespaces/${g}/leases/node-upgrade-agent-node-1: ` +
        'no whole answer within 1s (WORKLOAD_READ_TIMEOUT_SECONDS))',
    ]);
    await until(() => hostile.openAnswers() === 0, 5_000, 'the last read to be closed');
  });

  it('40 critical namespaces against an API server that answers each pod list slowly: at most the cluster slots at once', async () => {
    hostile.answer = 'slow';
    hostile.slowMs = 300;
    const before = hostile.mostOpenAnswers();
    const report = await health().checkClusterHealth({
      ...healthInput(tenant),
      criticalNamespaces: Array.from({ length: 40 }, (_, i) => `ns-${i}`),
    });
    expect(report.summary).toEqual(expect.any(String));
    expect(Math.max(before, hostile.mostOpenAnswers())).toBeLessThanOrEqual(DEFAULT_WORKLOAD_READ_LIMITS.perCluster);
    hostile.slowMs = 4_000;
  });

  it('a watch of the tenant cluster refuses an answer over the limits and leaves nothing open', async () => {
    hostile.answer = 'gzip';
    const kc = await workloadKubeConfig(management, tenant);
    const stop = watchObject(
      kc,
      { path: `/apis/batch/v1/namespaces/${g}/jobs`, labelSelector: 'a=b' },
      'job-1',
      () => undefined,
    );
    await until(() => hostile.requests.some((p) => p.endsWith('/jobs')), 5_000, 'the watch to open');
    stop();
    await until(() => hostile.openAnswers() === 0, 5_000, 'the watch to be closed');
  });
});
