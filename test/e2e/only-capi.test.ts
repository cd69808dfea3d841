// Only CAPI calls the hooks: `curl` without a client certificate once got UpdateMachine to
// cordon a node. Here the real process (`node src/main.ts`, the api role) runs
// with the hook server settings config/default gives it (config/manager/api.yaml:
// TLS_CLIENT_CA_FILE, HOOK_CLIENT_ALLOWED_SUBJECTS), the client CA from the test PKI.
// Without a certificate, UpdateMachine is refused in the TLS handshake and starts
// nothing; a certificate from the CA whose subject is not on the list is answered
// 403 and logged with its subject; CAPI's certificates are served.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Client, Connection } from '@temporalio/client';
import { parseAllDocuments } from 'yaml';
import { defaultHandlerName } from '../../src/api/hooks/contract.ts';
import { hookPath } from '../../src/api/hooks/hook-route.ts';
import { callHook, type CallOptions } from '../../support/capi-client.ts';
import { sampleRequest } from '../../support/capi-fixtures.ts';
import { startExtensionProcess, type ExtensionProcess } from '../support/extension-process.ts';
import { testPki } from '../support/pki.ts';
import { requireEnv } from '../support/services.ts';
import { waitFor } from '../support/wait.ts';

const API_DEPLOYMENT = new URL('../../config/manager/api.yaml', import.meta.url).pathname;

/** The api container's literal env in config/manager/api.yaml (what config/default deploys). */
function deployedApiEnv(): Record<string, string> {
  const docs = parseAllDocuments(readFileSync(API_DEPLOYMENT, 'utf8')).map((d) => d.toJSON() as Record<string, never>);
  const deployment = docs.find((d) => (d as { kind?: string }).kind === 'Deployment') as unknown as {
    spec: { template: { spec: { containers: { env: { name: string; value?: string }[] }[] } } };
  };
  const env = deployment.spec.template.spec.containers[0]!.env;
  return Object.fromEntries(env.filter((e) => e.value !== undefined).map((e) => [e.name, e.value!]));
}

describe('only CAPI can call the hooks (config/default: mutual TLS and an allow-list)', () => {
  let proc: ExtensionProcess;
  let temporal: Connection;
  let client: Client;
  const taskQueue = `only-capi-${randomUUID()}`;
  const namespace = requireEnv('TEMPORAL_NAMESPACE');
  // A Machine of its own, so the workflows this test looks for are only its own.
  const victim = `victim-${randomUUID().slice(0, 8)}`;
  const updateMachine = () => {
    const body = sampleRequest('UpdateMachine', { nodeUpgradeExecutor: 'job' });
    body.desired.machine = { ...body.desired.machine, metadata: { ...body.desired.machine.metadata, name: victim } };
    body.desired.machine.spec = { ...body.desired.machine.spec, version: 'v1.99.0' };
    return body;
  };
  const call = (opts: CallOptions = {}) =>
    callHook(proc.hookUrl, hookPath('UpdateMachine', defaultHandlerName('UpdateMachine')), updateMachine(), {
      ca: testPki().ca.certPem,
      timeout: '10s',
      ...opts,
    });
  const workflowsStarted = async () => {
    let n = 0;
    for await (const _ of client.workflow.list({ query: `TaskQueue = "${taskQueue}"` })) n++;
    return n;
  };
  const answeredLines = () =>
    proc
      .output()
      .split('\n')
      .filter((l) => l.includes('"hook answered"'));

  beforeAll(async () => {
    const deployed = deployedApiEnv();
    expect(deployed.TLS_CLIENT_CA_FILE).toBeDefined();
    expect(deployed.HOOK_CLIENT_ALLOWED_SUBJECTS).toBeDefined();
    const dir = mkdtempSync(join(tmpdir(), 'capi-uo-only-capi-'));
    writeFileSync(join(dir, 'client-ca.crt'), testPki().clientCa.certPem);
    proc = await startExtensionProcess({
      ...deployed,
      // The deployed file path is a Secret volume: the same CA, from a file of ours.
      TLS_CLIENT_CA_FILE: join(dir, 'client-ca.crt'),
      ROLE: 'api',
      TEMPORAL_ADDRESS: requireEnv('TEMPORAL_ADDRESS'),
      TEMPORAL_NAMESPACE: namespace,
      TEMPORAL_TASK_QUEUE: taskQueue,
      LOG_LEVEL: 'info',
    });
    await proc.ready();
    temporal = await Connection.connect({ address: requireEnv('TEMPORAL_ADDRESS') });
    client = new Client({ connection: temporal, namespace });
  });
  afterAll(async () => {
    proc?.kill();
    await temporal?.close();
  });

  it('refuses UpdateMachine without a client certificate in the TLS handshake, and starts nothing', async () => {
    await expect(call()).rejects.toMatchObject({ code: 'ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED' });
    const logged = await waitFor(
      async () => proc.output(),
      (out) => out.includes('refused in the TLS handshake'),
      5_000,
    );
    expect(logged).toMatch(/"reason":"no_certificate".*"remoteAddress":"127\.0\.0\.1"/);
    expect(answeredLines()).toEqual([]);
    expect(await workflowsStarted()).toBe(0);
  });

  it('answers a certificate from the CA whose subject is not on the list 403, logs the subject, starts nothing', async () => {
    const tenant = testPki().clientRotated;
    const res = await call({ cert: tenant.certPem, key: tenant.keyPem });
    expect(res.statusCode).toBe(403);
    expect(res.body.message).toBe(
      'client certificate "capi-upgrade-orchestrator-rotated" is not allowed to call this extension (HOOK_CLIENT_ALLOWED_SUBJECTS)',
    );
    const logged = await waitFor(
      async () => proc.output(),
      (out) => out.includes('not on HOOK_CLIENT_ALLOWED_SUBJECTS'),
      5_000,
    );
    expect(logged).toMatch(/"subject":"capi-upgrade-orchestrator-rotated".*not on HOOK_CLIENT_ALLOWED_SUBJECTS/);
    expect(answeredLines()).toEqual([]);
    expect(await workflowsStarted()).toBe(0);
  });

  it("serves CAPI's core and KCP certificates", async () => {
    const { client: core, kcpClient } = testPki();
    const res = await call({ cert: core.certPem, key: core.keyPem });
    expect(res.statusCode).toBe(200);
    expect(res.body.kind).toBe('UpdateMachineResponse');
    // The access log is written after the reply and reaches us through a pipe: wait for it.
    expect(
      await waitFor(
        async () => answeredLines(),
        (lines) => lines.length >= 1,
        5_000,
      ),
    ).toHaveLength(1);
    const canUpdate = await callHook(
      proc.hookUrl,
      hookPath('CanUpdateMachine', defaultHandlerName('CanUpdateMachine')),
      sampleRequest('CanUpdateMachine'),
      { ca: testPki().ca.certPem, cert: kcpClient.certPem, key: kcpClient.keyPem, timeout: '10s' },
    );
    expect(canUpdate.statusCode).toBe(200);
    expect(canUpdate.body.kind).toBe('CanUpdateMachineResponse');
    // What the accepted UpdateMachine started (if anything) must not run on: no worker polls this queue.
    for await (const wf of client.workflow.list({
      query: `TaskQueue = "${taskQueue}" AND ExecutionStatus = "Running"`,
    }))
      await client.workflow.getHandle(wf.workflowId).terminate('test over');
  });
});
