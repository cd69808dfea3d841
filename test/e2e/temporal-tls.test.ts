// Temporal behind TLS, as production runs it: the extension process reaches
// the run's dev server through a TLS front that requires a client certificate
// (mTLS), with the server CA, server name, certificate and key from files. A
// rotated client certificate is picked up without a restart; a connection that
// cannot be made is reported naming the settings to check.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { callHook } from '../../support/capi-client.ts';
import { sampleRequest } from '../../support/capi-fixtures.ts';
import { startExtensionProcess, type ExtensionProcess } from '../support/extension-process.ts';
import { testPki } from '../support/pki.ts';
import { requireEnv } from '../support/services.ts';
import { startTlsProxy, type TlsProxy } from '../support/tls-proxy.ts';
import { waitFor } from '../support/wait.ts';

const BEFORE_CLUSTER_UPGRADE = '/hooks.runtime.cluster.x-k8s.io/v1alpha1/beforeclusterupgrade/before-cluster-upgrade';

describe('Temporal over mTLS', () => {
  let proxy: TlsProxy;
  let dir: string;
  const procs: ExtensionProcess[] = [];
  const tlsEnv = () => ({
    TEMPORAL_ADDRESS: proxy.address,
    TEMPORAL_NAMESPACE: requireEnv('TEMPORAL_NAMESPACE'),
    TEMPORAL_TLS_CA_FILE: join(dir, 'temporal-ca.crt'),
    TEMPORAL_TLS_SERVER_NAME: 'localhost',
    TEMPORAL_TLS_CERT_FILE: join(dir, 'client.crt'),
    TEMPORAL_TLS_KEY_FILE: join(dir, 'client.key'),
    TEMPORAL_CREDENTIALS_RELOAD_INTERVAL: '1s',
    LOG_LEVEL: 'info',
  });
  /** Replaces the client certificate as a Secret volume does: new files, swapped in at once. */
  const writeClientCertificate = (pair: { certPem: string; keyPem: string }) => {
    writeFileSync(join(dir, 'client.key.new'), pair.keyPem);
    writeFileSync(join(dir, 'client.crt.new'), pair.certPem);
    renameSync(join(dir, 'client.key.new'), join(dir, 'client.key'));
    renameSync(join(dir, 'client.crt.new'), join(dir, 'client.crt'));
  };

  beforeAll(async () => {
    const pki = testPki();
    proxy = await startTlsProxy({
      target: requireEnv('TEMPORAL_ADDRESS'),
      cert: pki.serving.certPem,
      key: pki.serving.keyPem,
      clientCa: pki.clientCa.certPem,
    });
    dir = mkdtempSync(join(tmpdir(), 'capi-uo-temporal-tls-'));
    writeFileSync(join(dir, 'temporal-ca.crt'), pki.ca.certPem);
    writeClientCertificate(pki.client);
  });
  afterAll(async () => {
    for (const p of procs) p.kill();
    await proxy.close();
  });

  it('runs both roles through it, and reconnects with a rotated client certificate without a restart', async () => {
    const proc = await startExtensionProcess({ ROLE: 'all', TEMPORAL_TASK_QUEUE: `tls-${randomUUID()}`, ...tlsEnv() });
    procs.push(proc);
    await proc.ready();
    expect(proxy.clients.length).toBeGreaterThan(0);
    expect(new Set(proxy.clients)).toEqual(new Set(['capi-controller-manager']));

    // A gate starts its upgrade workflow through the mTLS connection.
    const gate = await callHook(proc.hookUrl, BEFORE_CLUSTER_UPGRADE, sampleRequest('BeforeClusterUpgrade'), {
      ca: testPki().ca.certPem,
      timeout: '10s',
    });
    expect(gate.body).toMatchObject({ status: 'Success' });
    expect(gate.body.retryAfterSeconds).toBeGreaterThan(0);

    const before = proxy.clients.length;
    writeClientCertificate(testPki().clientRotated);
    // The worker and the client both reconnect presenting the new certificate.
    await waitFor(
      async () => proxy.clients.slice(before).filter((cn) => cn === 'capi-upgrade-orchestrator-rotated').length,
      (n) => n >= 2,
      20_000,
    );
    expect(
      proxy.clients.slice(before).filter((cn) => cn === 'capi-upgrade-orchestrator-rotated').length,
    ).toBeGreaterThanOrEqual(2);
    await waitFor(
      async () => proc.output(),
      (o) => o.includes('worker reconnected'),
      20_000,
    );
    expect(proc.output()).toContain('Temporal TLS credentials changed: worker reconnected');
    await proc.ready();

    // Hooks still reach Temporal: a second cluster's gate starts its workflow over the new connection.
    const other = sampleRequest('BeforeClusterUpgrade');
    other.cluster.metadata.name = `tls-rotated-${randomUUID().slice(0, 8)}`;
    const again = await callHook(proc.hookUrl, BEFORE_CLUSTER_UPGRADE, other, {
      ca: testPki().ca.certPem,
      timeout: '10s',
    });
    expect(again.body).toMatchObject({ status: 'Success' });
    expect(again.body.retryAfterSeconds).toBeGreaterThan(0);
    expect(again.body.message).not.toMatch(/unavailable|cannot reach/i);

    proc.child.kill('SIGTERM');
    expect(await proc.exited()).toBe(0);
  });

  it('a worker that cannot connect exits naming the settings to check', async () => {
    const refusedBefore = proxy.refused;
    // No client certificate: the TLS front refuses the handshake.
    const { TEMPORAL_TLS_CERT_FILE: _c, TEMPORAL_TLS_KEY_FILE: _k, ...withoutClientCert } = tlsEnv();
    const proc = await startExtensionProcess({
      ROLE: 'worker',
      TEMPORAL_TASK_QUEUE: `tls-${randomUUID()}`,
      ...withoutClientCert,
    });
    procs.push(proc);
    const code = await proc.exitedWithin(60_000);
    expect(code).toBe(1);
    expect(proxy.refused).toBeGreaterThan(refusedBefore);
    expect(proc.output()).toContain(`cannot connect to Temporal:`);
    expect(proc.output()).toContain(`TEMPORAL_ADDRESS=${proxy.address}`);
    expect(proc.output()).toContain(`TEMPORAL_TLS_CA_FILE=${join(dir, 'temporal-ca.crt')}`);
  });

  it('a missing certificate file stops the start, naming the setting', async () => {
    const proc = await startExtensionProcess({
      ROLE: 'api',
      ...tlsEnv(),
      TEMPORAL_TLS_CERT_FILE: join(dir, 'nope.crt'),
    });
    procs.push(proc);
    expect(await proc.exited()).not.toBe(0);
    expect(proc.output()).toContain(`TEMPORAL_TLS_CERT_FILE=${join(dir, 'nope.crt')}: ENOENT`);
  });
});
