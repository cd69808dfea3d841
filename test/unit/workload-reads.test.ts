// Every read of a workload cluster goes through the bounded transport: each
// hostile answer a tenant's API server can give is refused with a message that
// names the cluster, the request and the limit, within its deadline, and the
// socket is closed; honest clusters keep being served meanwhile.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { CoordinationV1Api, type V1Lease } from '@kubernetes/client-node';
import { stableFailure } from '../../src/activities/failures.ts';
import { listPaged } from '../../src/platform/kube/paged-list.ts';
import { ByteBudget, ReadGate } from '../../src/platform/kube/read-gate.ts';
import { withReadScope } from '../../src/platform/kube/read-scope.ts';
import { WorkloadKubeConfig } from '../../src/platform/kube/workload-kube-config.ts';
import {
  DEFAULT_WORKLOAD_READ_LIMITS,
  WorkloadReadError,
  type WorkloadReadLimits,
} from '../../src/platform/kube/workload-limits.ts';
import { until } from '../support/wait.ts';
import { startHostileApiServer, type HostileApiServer } from '../support/hostile-apiserver.ts';

const limits: WorkloadReadLimits = { ...DEFAULT_WORKLOAD_READ_LIMITS, timeoutMs: 5_000 };

function clusterOf(server: HostileApiServer, name: string, gate: ReadGate, timeoutMs = limits.timeoutMs) {
  const kc = new WorkloadKubeConfig(`tenant/${name}`, { limits: { ...limits, timeoutMs }, gate });
  kc.loadFromString(server.kubeconfig());
  return kc;
}

function listLeases(kc: WorkloadKubeConfig, namespace = 'default'): Promise<V1Lease[]> {
  const api = kc.makeApiClient(CoordinationV1Api);
  return listPaged(kc, `Leases in namespace ${namespace}`, (page) => api.listNamespacedLease({ namespace, ...page }));
}

async function refusal(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  throw new Error('the read was not refused');
}

let hostile: HostileApiServer;
let honest: HostileApiServer;
beforeAll(async () => {
  [hostile, honest] = await Promise.all([startHostileApiServer(), startHostileApiServer()]);
  // Built now, not inside a timed read: making the gzip bomb holds this process for a moment.
  hostile.prepare();
});
afterAll(async () => {
  await Promise.all([hostile.close(), honest.close()]);
});

const LEASES = 'GET /apis/coordination.k8s.io/v1/namespaces/default/leases';

describe('a hostile workload API server', () => {
  const cases: [HostileServerAnswer, WorkloadReadError['reason'], string][] = [
    ['huge', 'too-large', `${LEASES}: answer larger than 8388608 bytes (WORKLOAD_READ_MAX_BYTES)`],
    ['dense', 'too-many-items', `${LEASES}: answer holds more than 262144 JSON items (WORKLOAD_READ_MAX_JSON_ITEMS)`],
    [
      'deep',
      'too-many-items',
      `${LEASES}: answer nests objects and arrays more than 100 deep (WORKLOAD_READ_MAX_JSON_DEPTH)`,
    ],
    ['wrong-type', 'content-type', `${LEASES}: answered HTTP 200 with Content-Type "text/html", not JSON`],
    ['gzip', 'encoding', `${LEASES}: answered with Content-Encoding "gzip", which was not asked for`],
    ['redirect', 'redirect', `${LEASES}: answered a redirect (HTTP 302), which is not followed`],
    ['endless-pages', 'too-many-objects', 'list of Leases in namespace default: more than 42 pages'],
  ];
  type HostileServerAnswer = HostileApiServer['answer'];

  it.each(cases)(
    'answering %s: refused (%s), naming the cluster and the limit, nothing left open',
    async (answer, reason, text) => {
      hostile.answer = answer;
      const kc = clusterOf(hostile, 'c1', new ReadGate(32, 4, 32 * 1024 * 1024));
      const started = Date.now();
      const err = await refusal(listLeases(kc));
      expect(err).toBeInstanceOf(WorkloadReadError);
      expect((err as WorkloadReadError).reason).toBe(reason);
      expect((err as Error).message).toContain('workload cluster tenant/c1: ');
      expect((err as Error).message).toContain(text);
      expect(Date.now() - started).toBeLessThan(10_000);
      // The activity's failure carries the same message and says whether to retry.
      expect(stableFailure(err).message).toBe((err as Error).message);
      expect(stableFailure(err).nonRetryable).toBe(true);
      await until(() => hostile.openAnswers() === 0, 5_000, 'the hostile answer to be cut off');
    },
  );

  it('answering 400 MiB: reads no more than the limit and a little socket buffer', async () => {
    hostile.answer = 'huge';
    const before = hostile.bytesSent();
    await refusal(listLeases(clusterOf(hostile, 'c2', new ReadGate(32, 4, 32 * 1024 * 1024))));
    await until(() => hostile.openAnswers() === 0, 5_000, 'the huge answer to be cut off');
    expect(hostile.bytesSent() - before).toBeLessThan(24 * 1024 * 1024);
  });

  it('answering malformed JSON: the failure says so without quoting the answer', async () => {
    hostile.answer = 'malformed';
    const err = await refusal(listLeases(clusterOf(hostile, 'c3', new ReadGate(32, 4, 32 * 1024 * 1024))));
    expect(stableFailure(err).message).toBe('the Kubernetes API answered with malformed JSON');
  });

  it('trickling one space every 5 s: the read ends at its deadline and the socket is closed', async () => {
    hostile.answer = 'trickle';
    const kc = clusterOf(hostile, 'c4', new ReadGate(32, 4, 32 * 1024 * 1024));
    const started = Date.now();
    const err = await refusal(withReadScope({ timeoutMs: 1_500 }, () => listLeases(kc)));
    expect((err as WorkloadReadError).reason).toBe('timeout');
    expect((err as Error).message).toBe(
      `workload cluster tenant/c4: ${LEASES}: no whole answer within 1.5s (WORKLOAD_READ_TIMEOUT_SECONDS)`,
    );
    expect(Date.now() - started).toBeLessThan(4_000);
    await until(() => hostile.openAnswers() === 0, 5_000, 'the trickle to be cut off');
  });

  it('a caller that stops waiting closes the request', async () => {
    hostile.answer = 'trickle';
    const kc = clusterOf(hostile, 'c5', new ReadGate(32, 4, 32 * 1024 * 1024));
    const controller = new AbortController();
    const read = withReadScope({ signal: controller.signal }, () => listLeases(kc));
    await until(() => hostile.openAnswers() === 1, 5_000, 'the request to arrive');
    controller.abort(new Error('the activity was cancelled'));
    expect(((await refusal(read)) as Error).message).toBe('the activity was cancelled');
    await until(() => hostile.openAnswers() === 0, 5_000, 'the request to be closed');
  });
});

describe('slots and sharing', () => {
  it('holds a cluster to its slots while another cluster is served at once', async () => {
    hostile.answer = 'slow';
    hostile.slowMs = 1_500;
    honest.answer = 'honest';
    const gate = new ReadGate(32, 4, 32 * 1024 * 1024);
    // Ten 1.5 s answers four at a time: the last waits ~4.5 s for a slot, which counts toward its deadline.
    const slowCluster = clusterOf(hostile, 'slow', gate, 30_000);
    const before = hostile.mostOpenAnswers();
    // Ten different lists (namespaces), not shared: four at a time.
    const reads = Array.from({ length: 10 }, (_, i) => listLeases(slowCluster, `ns-${i}`));
    await until(() => hostile.openAnswers() === 4, 5_000, 'four requests in flight');
    const started = Date.now();
    expect(await listLeases(clusterOf(honest, 'other', gate))).toHaveLength(3);
    expect(Date.now() - started).toBeLessThan(1_000);
    expect(await Promise.all(reads)).toHaveLength(10);
    expect(Math.max(before, 4)).toBe(hostile.mostOpenAnswers());
  });

  it('shares one request between callers asking the same thing at once', async () => {
    hostile.answer = 'slow';
    hostile.slowMs = 500;
    const kc = clusterOf(hostile, 'shared', new ReadGate(32, 4, 32 * 1024 * 1024));
    const before = hostile.requests.length;
    const answers = await Promise.all(Array.from({ length: 20 }, () => listLeases(kc)));
    expect(answers.every((a) => a.length === 3)).toBe(true);
    expect(hostile.requests.length - before).toBe(1);
  });

  it('refuses, retryably, answers beyond the byte budget a cluster may hold', () => {
    const budget = new ByteBudget(100, 50);
    expect(budget.charge('a', 40)).toBe(true);
    expect(budget.charge('a', 20)).toBe(false);
    expect(budget.charge('b', 50)).toBe(true);
    expect(budget.charge('c', 20)).toBe(false);
    budget.release('a', 40);
    expect(budget.charge('c', 20)).toBe(true);
    expect(budget.inUse).toBe(70);
    expect(new WorkloadReadError('busy', 'x').retryable).toBe(true);
    expect(new WorkloadReadError('too-large', 'x').retryable).toBe(false);
  });
});
