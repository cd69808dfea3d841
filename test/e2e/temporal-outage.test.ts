// Fault test: the Temporal server freezes (SIGSTOP) under a live hook server.
// Cluster creation must never wait on it; blocking upgrade hooks hold CAPI
// back within their deadline; once the server thaws, what creation recorded
// in the background arrives. Uses a dev server of its own, so freezing it
// disturbs no other test.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Client, Connection } from '@temporalio/client';
import { BackgroundRecorder } from '../../src/api/hooks/background-recorder.ts';
import { createClusterUpgradeHandlers } from '../../src/api/handlers/lifecycle/cluster-upgrades.ts';
import { requestChecksOff } from '../../src/api/handlers/request-checks.ts';
import { defaultHandlerName, type HookName } from '../../src/api/hooks/contract.ts';
import { hookPath, UNAVAILABLE_MESSAGE } from '../../src/api/hooks/hook-route.ts';
import { startDevServer, type DevServer } from '../../src/local/temporal-dev-server.ts';
import { callHook } from '../../support/capi-client.ts';
import { sampleRequest } from '../../support/capi-fixtures.ts';
import { startTestHookServer, type TestHookServer } from '../support/hook-server.ts';
import { waitFor } from '../support/wait.ts';

const pathOf = (hook: HookName) => hookPath(hook, defaultHandlerName(hook));

describe('Temporal frozen under the hook server', () => {
  let dir: string;
  let temporal: DevServer;
  let connection: Connection;
  let client: Client;
  let hooks: TestHookServer;
  let recorder: BackgroundRecorder;
  let frozen = false;
  const freeze = () => {
    process.kill(temporal.pid, 'SIGSTOP');
    frozen = true;
  };
  const thaw = () => {
    if (frozen) process.kill(temporal.pid, 'SIGCONT');
    frozen = false;
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'capi-uo-outage-'));
    temporal = await startDevServer({
      executable: process.env.TEMPORAL_CLI ?? 'temporal',
      dbFilename: join(dir, 'temporal.db'),
      logFile: join(dir, 'temporal.log'),
    });
    connection = await Connection.connect({ address: temporal.address });
    client = new Client({ connection, namespace: temporal.namespace });
    const log = { warn: () => {}, error: () => {} };
    // Short attempts so the test sees the retry loop at work while the server is frozen.
    recorder = new BackgroundRecorder({
      log,
      attemptTimeoutMs: 500,
      initialDelayMs: 200,
      maxDelayMs: 1_000,
      maxAttempts: 50,
    });
    hooks = await startTestHookServer({
      lifecycle: createClusterUpgradeHandlers({
        client,
        taskQueue: 'outage-no-worker',
        checks: requestChecksOff,
        recorder,
        log,
      }),
    });
  });
  afterAll(async () => {
    thaw();
    recorder?.close();
    await hooks?.close();
    await connection?.close();
    await temporal?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('answers BeforeClusterCreate and AfterControlPlaneInitialized without waiting on the frozen Temporal, and records them after the thaw', async () => {
    // Warm the TLS connection the way CAPI keeps one alive.
    await callHook(hooks.url, pathOf('BeforeClusterCreate'), sampleRequest('BeforeClusterCreate'), {
      ca: hooks.ca.certPem,
    });
    await recorder.idle();
    freeze();
    const timings: number[] = [];
    for (const hook of ['BeforeClusterCreate', 'AfterControlPlaneInitialized'] as const) {
      for (let i = 0; i < 5; i++) {
        const started = performance.now();
        const res = await callHook(hooks.url, pathOf(hook), sampleRequest(hook), { ca: hooks.ca.certPem });
        timings.push(performance.now() - started);
        expect(res.statusCode).toBe(200);
        expect(res.body.status).toBe('Success');
        if (hook === 'BeforeClusterCreate') expect(res.body.retryAfterSeconds).toBe(0);
      }
    }
    // The median shows the answer does not wait on Temporal (a wait would last until the hook's
    // deadline, seconds); the worst case (a shared 2-core machine running the CAPI tier beside
    // this, garbage collection) stays far below any Temporal deadline. A median of 58 ms was seen
    // under that load: the bound is about waiting, not speed (bench/fleet.ts measures that).
    const sorted = [...timings].sort((a, b) => a - b);
    expect(sorted[Math.floor(sorted.length / 2)]).toBeLessThanOrEqual(250);
    expect(sorted[sorted.length - 1]).toBeLessThan(1_000);
    // Still frozen: the record waits in the background, retrying.
    expect(recorder.pending).toBeGreaterThan(0);

    // A blocking upgrade hook holds CAPI back, within its own deadline.
    const started = Date.now();
    const blocked = await callHook(hooks.url, pathOf('BeforeClusterUpgrade'), sampleRequest('BeforeClusterUpgrade'), {
      ca: hooks.ca.certPem,
      timeout: '2s',
    });
    // The answer is the server's own deadline answer (budget 1.6 s for timeout=2s), not a wait on
    // the frozen Temporal; wall time only bounds it loosely: on a loaded 2-core machine the
    // round trip measured 2.07 s once (timing belongs in benchmarks, not here).
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(blocked.body).toMatchObject({ status: 'Success', message: UNAVAILABLE_MESSAGE });
    expect(blocked.body.retryAfterSeconds).toBeGreaterThan(0);

    thaw();
    await waitFor(
      async () => recorder.pending,
      (n) => n === 0,
      30_000,
    );
    const ids = await waitFor(
      async () => {
        const found: string[] = [];
        for await (const wf of client.workflow.list({ query: 'WorkflowType = "clusterEventWorkflow"' }))
          found.push(wf.workflowId);
        return found;
      },
      (found) => found.length >= 2,
    );
    const cluster = sampleRequest('BeforeClusterCreate').cluster.metadata;
    expect(ids.sort()).toEqual(
      [
        `cluster-event/${cluster.namespace}/${cluster.name}/AfterControlPlaneInitialized/${cluster.uid}`,
        `cluster-event/${cluster.namespace}/${cluster.name}/BeforeClusterCreate/${cluster.uid}`,
      ].sort(),
    );
    expect(recorder.stats.dropped).toBe(0);
  });
});
