// The real process, as the image runs it: `node src/main.ts` under Node's own
// ESM loader (jest's module system hides interop problems that this catches),
// both roles, against the run's Temporal server; then SIGTERM.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { HOOKS_API_VERSION } from '../../src/api/hooks/contract.ts';
import { DISCOVERY_PATH } from '../../src/api/hooks/discovery.ts';
import { clusterUpgradeWorkflowId } from '../../src/model/cluster-upgrade.ts';
import { callHook } from '../../support/capi-client.ts';
import { cluster, sampleRequest } from '../../support/capi-fixtures.ts';
import { testPki } from '../support/pki.ts';
import { freePorts } from '../../src/local/free-ports.ts';
import { startExtensionProcess, type ExtensionProcess } from '../support/extension-process.ts';
import { requireEnv } from '../support/services.ts';
import { testClient } from '../support/temporal.ts';
import { waitFor } from '../support/wait.ts';

/** As the image stamps it (Dockerfile: ARG VERSION → ENV CAPI_UPGRADE_VERSION). */
const VERSION = 'v9.8.7-e2e';

describe('the extension process', () => {
  let proc: ExtensionProcess;
  let url: string;
  let ops: string;
  let sdkMetrics: string;
  const output = () => proc.output();

  beforeAll(async () => {
    const [sdkPort] = await freePorts(1);
    sdkMetrics = `http://127.0.0.1:${sdkPort}/metrics`;
    proc = await startExtensionProcess({
      ROLE: 'all',
      TEMPORAL_ADDRESS: requireEnv('TEMPORAL_ADDRESS'),
      TEMPORAL_NAMESPACE: requireEnv('TEMPORAL_NAMESPACE'),
      TEMPORAL_TASK_QUEUE: `proc-${randomUUID()}`,
      TEMPORAL_SDK_METRICS_ADDRESS: `127.0.0.1:${sdkPort}`,
      LOG_LEVEL: 'info',
      CAPI_UPGRADE_VERSION: VERSION,
    });
    url = proc.hookUrl;
    ops = proc.opsUrl;
    for (let i = 0; i < 150; i++) {
      if (proc.child.exitCode !== null) throw new Error(`process exited with ${proc.child.exitCode}:\n${output()}`);
      const ok = await callHook(
        url,
        DISCOVERY_PATH,
        { apiVersion: HOOKS_API_VERSION, kind: 'DiscoveryRequest' },
        { ca: testPki().ca.certPem },
      ).then(
        (r) => r.statusCode === 200,
        () => false,
      );
      if (ok) return;
      await new Promise((r) => setTimeout(r, 200));
    }
    throw new Error(`process never answered discovery:\n${output()}`);
  });
  afterAll(() => proc.kill());

  it('boots both roles and answers hooks over HTTPS', async () => {
    const plan = await callHook(
      url,
      '/hooks.runtime.cluster.x-k8s.io/v1alpha1/generateupgradeplan/generate-upgrade-plan',
      sampleRequest('GenerateUpgradePlan'),
      {
        ca: testPki().ca.certPem,
        timeout: '10s',
      },
    );
    expect(plan.body).toMatchObject({
      status: 'Success',
      controlPlaneUpgrades: [{ version: 'v1.32.13' }, { version: 'v1.33.0' }],
    });
    // A lifecycle hook reaches Temporal through the process's own client.
    const gate = await callHook(
      url,
      '/hooks.runtime.cluster.x-k8s.io/v1alpha1/beforeclusterupgrade/before-cluster-upgrade',
      sampleRequest('BeforeClusterUpgrade'),
      {
        ca: testPki().ca.certPem,
        timeout: '10s',
      },
    );
    expect(gate.body).toMatchObject({ status: 'Success' });
    expect(gate.body.retryAfterSeconds).toBeGreaterThan(0);
  });

  it('logs why it refused a request, naming the field (CAPI only shows that the call failed)', async () => {
    const refused = await callHook(
      url,
      '/hooks.runtime.cluster.x-k8s.io/v1alpha1/beforeclusterupgrade/before-cluster-upgrade',
      (() => {
        const body = sampleRequest('BeforeClusterUpgrade');
        body.cluster.metadata.namespace = 'team/b';
        return body;
      })(),
      { ca: testPki().ca.certPem },
    );
    expect(refused.statusCode).toBe(400);
    const line = await waitFor(
      async () =>
        output()
          .split('\n')
          .find((l) => l.includes('"request rejected"')),
      (l) => l !== undefined,
      5_000,
    );
    expect(JSON.parse(line ?? '{}')).toMatchObject({
      level: 40,
      statusCode: 400,
      url: '/hooks.runtime.cluster.x-k8s.io/v1alpha1/beforeclusterupgrade/before-cluster-upgrade',
    });
    expect(JSON.parse(line ?? '{}').field).toMatch(/namespace/);
  });

  it('serves /livez, /readyz and /metrics on the ops port, and the SDK metrics on their own', async () => {
    const live = await fetch(`${ops}/livez`);
    expect(live.status).toBe(200);
    expect(await live.json()).toEqual({ status: 'ok', checks: { worker: 'ok' } });
    expect((await fetch(`${ops}/nothing`)).status).toBe(404);
    // Readiness lists Temporal's reachability (probed in the background) without depending on it.
    const ready = await waitFor(
      async () => (await fetch(`${ops}/readyz`)).json() as Promise<{ status: string; checks: Record<string, string> }>,
      (r) => r.status === 'ok' && r.checks.temporal === 'ok',
      15_000,
    );
    expect(ready).toEqual({ status: 'ok', checks: { hookServer: 'ok', worker: 'ok', temporal: 'ok' } });

    const metrics = await (await fetch(`${ops}/metrics`)).text();
    // The calls of the first test, by hook and answer (a gate not open yet answers "retry").
    expect(metrics).toMatch(
      /^capi_upgrade_hook_request_duration_seconds_count\{hook="GenerateUpgradePlan",answer="success"\} [1-9]/m,
    );
    expect(metrics).toMatch(
      /^capi_upgrade_hook_request_duration_seconds_count\{hook="BeforeClusterUpgrade",answer="retry"\} [1-9]/m,
    );
    expect(metrics).toMatch(/^capi_upgrade_temporal_request_duration_seconds_count\{result="ok"\} [1-9]/m);
    expect(metrics).toMatch(/^capi_upgrade_temporal_reachable 1$/m);
    expect(metrics).toMatch(/^process_resident_memory_bytes \d+/m);
    // The upgrade the gate started shows in the visibility gauges once refreshed (every 30 s: not waited on here).
    expect(metrics).toMatch(/^# TYPE capi_upgrade_cluster_upgrades gauge$/m);

    const sdk = await (await fetch(sdkMetrics)).text();
    expect(sdk).toMatch(/temporal_worker_task_slots_available|temporal_num_pollers/);
  });

  it('says which build it is: /version, the start-up log, capi_upgrade_build_info and each upgrade it starts', async () => {
    const version = await fetch(`${ops}/version`);
    expect(version.status).toBe(200);
    const node = process.version;
    expect(await version.json()).toEqual({ version: VERSION, role: 'all', buildId: '', node });
    const metrics = await (await fetch(`${ops}/metrics`)).text();
    expect(metrics).toContain(`capi_upgrade_build_info{version="${VERSION}",role="all",build_id="",node="${node}"} 1`);
    const started = output()
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { msg?: string; version?: string })
      .find((l) => l.msg?.startsWith('capi-upgrade-orchestrator '));
    expect(started).toMatchObject({
      msg: `capi-upgrade-orchestrator ${VERSION} starting (role all)`,
      version: VERSION,
    });

    // The run says which build started it: a start memo field (no workflow command, so no patch).
    const own = cluster(`build-${randomUUID().slice(0, 8)}`);
    const gate = await callHook(
      url,
      '/hooks.runtime.cluster.x-k8s.io/v1alpha1/beforeclusterupgrade/before-cluster-upgrade',
      { ...sampleRequest('BeforeClusterUpgrade'), cluster: own },
      { ca: testPki().ca.certPem, timeout: '10s' },
    );
    expect(gate.body).toMatchObject({ status: 'Success' });
    const { client, close } = await testClient();
    try {
      const run = client.workflow.getHandle(clusterUpgradeWorkflowId({ ...own.metadata }));
      expect((await run.describe()).memo?.['build']).toBe(VERSION);
    } finally {
      await close();
    }
  });

  it('stops cleanly on SIGTERM', async () => {
    const done = proc.exitedWithin(30_000);
    proc.child.kill('SIGTERM');
    const code = await done;
    if (code !== 0) console.error(output());
    expect(code).toBe(0);
    expect(output()).not.toMatch(/Error|error:/);
    // Structured logs: every line the process wrote is one JSON object.
    const lines = output()
      .split('\n')
      .filter((l) => l.trim() !== '');
    expect(lines.length).toBeGreaterThan(0);
    for (const line of lines) expect(() => JSON.parse(line) as unknown).not.toThrow();
  });
});
