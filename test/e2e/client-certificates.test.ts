// Mutual TLS on the hook server (TLS_CLIENT_CA_FILE, HOOK_CLIENT_ALLOWED_SUBJECTS),
// over real TLS: who is refused, how (handshake or 403), what is logged and
// counted, and that a rotated client CA file is picked up without a restart.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import Fastify from 'fastify';
import { callerSubject } from '../../src/api/http/caller.ts';
import { HOOKS_API_VERSION } from '../../src/api/hooks/contract.ts';
import { REFUSAL_LOG_LINES } from '../../src/api/http/client-refusals.ts';
import { DISCOVERY_PATH } from '../../src/api/hooks/discovery.ts';
import { hookClientsRefused } from '../../src/ops/metrics.ts';
import { callHook, type CallOptions } from '../../support/capi-client.ts';
import { CAPI_CORE_CLIENT_SUBJECT, testPki } from '../support/pki.ts';
import { startTestHookServer, type TestHookServer } from '../support/hook-server.ts';
import { waitFor } from '../support/wait.ts';

const discovery = { apiVersion: HOOKS_API_VERSION, kind: 'DiscoveryRequest' };

async function refusedCount(reason: string): Promise<number> {
  const metric = await hookClientsRefused.get();
  return metric.values.find((v) => v.labels.reason === reason)?.value ?? 0;
}

/** The counter reaches `count` (a refused handshake is counted just after the client sees it fail). */
const countReaches = (reason: string, count: number) =>
  waitFor(
    () => refusedCount(reason),
    (n) => n === count,
    10_000,
  );

const warnings = (t: TestHookServer, msg: RegExp) =>
  t.logLines().filter((l) => l.level === 40 && typeof l.msg === 'string' && msg.test(l.msg));

describe('mutual TLS on the hook server', () => {
  let t: TestHookServer;
  const call = (opts: CallOptions = {}) => callHook(t.url, DISCOVERY_PATH, discovery, { ca: t.ca.certPem, ...opts });
  beforeAll(async () => {
    t = await startTestHookServer({
      mutualTls: true,
      captureLog: true,
      env: { HOOK_CLIENT_ALLOWED_SUBJECTS: `CN=${CAPI_CORE_CLIENT_SUBJECT},DNS=hooks.example` },
      server: { tlsReloadIntervalMs: 100 },
    });
  });
  afterAll(async () => t.close());

  it('refuses a caller without a certificate in the handshake, and logs and counts it with its address', async () => {
    const before = await refusedCount('no_certificate');
    await expect(call()).rejects.toMatchObject({ code: 'ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED' });
    await countReaches('no_certificate', before + 1);
    expect(warnings(t, /refused in the TLS handshake/).at(-1)).toMatchObject({
      reason: 'no_certificate',
      remoteAddress: '127.0.0.1',
    });
  });

  it('refuses a certificate another CA signed, logging why', async () => {
    const before = await refusedCount('untrusted_certificate');
    const rogue = testPki().rogueClient;
    await expect(call({ cert: rogue.certPem, key: rogue.keyPem })).rejects.toThrow(/socket hang up|ECONNRESET/);
    await countReaches('untrusted_certificate', before + 1);
    expect(warnings(t, /refused in the TLS handshake/).at(-1)).toMatchObject({
      reason: 'untrusted_certificate',
      remoteAddress: '127.0.0.1',
      detail: expect.stringMatching(/CERT|ISSUER/),
    });
  });

  it('answers a valid certificate not on the allow-list 403 with a stable message, before reading the request', async () => {
    const before = await refusedCount('subject_not_allowed');
    const other = testPki().clientRotated;
    const res = await call({ cert: other.certPem, key: other.keyPem });
    expect(res.statusCode).toBe(403);
    expect(res.body).toEqual({
      error: 'Forbidden',
      message:
        'client certificate "capi-upgrade-orchestrator-rotated" is not allowed to call this extension (HOOK_CLIENT_ALLOWED_SUBJECTS)',
    });
    expect(await refusedCount('subject_not_allowed')).toBe(before + 1);
    expect(warnings(t, /not on HOOK_CLIENT_ALLOWED_SUBJECTS/).at(-1)).toMatchObject({
      reason: 'subject_not_allowed',
      subject: 'capi-upgrade-orchestrator-rotated',
      remoteAddress: '127.0.0.1',
    });
    // Not even a malformed body gets a look: the answer is the same 403.
    const raw = await call({ cert: other.certPem, key: other.keyPem, raw: '{not json' });
    expect(raw.statusCode).toBe(403);
  });

  it('admits a listed CN and a listed DNS name', async () => {
    const core = testPki().client;
    expect((await call({ cert: core.certPem, key: core.keyPem })).statusCode).toBe(200);
    const dns = testPki().dnsClient;
    expect((await call({ cert: dns.certPem, key: dns.keyPem })).statusCode).toBe(200);
  });

  it('logs at most a budget of refusals per minute, counting every one', async () => {
    const before = await refusedCount('no_certificate');
    const linesBefore = warnings(t, /refused in the TLS handshake/).length;
    for (let i = 0; i < 3 * REFUSAL_LOG_LINES; i++) await call().catch(() => undefined);
    await countReaches('no_certificate', before + 3 * REFUSAL_LOG_LINES);
    expect(warnings(t, /refused in the TLS handshake/).length).toBeLessThanOrEqual(REFUSAL_LOG_LINES);
    expect(warnings(t, /refused in the TLS handshake/).length - linesBefore).toBeLessThan(REFUSAL_LOG_LINES);
  });

  it('picks up a rotated client CA file without a restart', async () => {
    const { client, clientNext, clientCaNext } = testPki();
    expect((await call({ cert: client.certPem, key: client.keyPem })).statusCode).toBe(200);
    writeFileSync(join(t.dir, 'client-ca.crt'), clientCaNext.certPem);
    const next = await waitFor(
      () =>
        call({ cert: clientNext.certPem, key: clientNext.keyPem }).then(
          (r) => r.statusCode,
          () => 0,
        ),
      (status) => status === 200,
      5_000,
    );
    expect(next).toBe(200);
    await expect(call({ cert: client.certPem, key: client.keyPem })).rejects.toThrow();
    writeFileSync(join(t.dir, 'client-ca.crt'), testPki().clientCa.certPem);
  });
});

describe('callerSubject', () => {
  it("gives the hook layer the verified certificate's CN, or its first DNS name, and nothing without one", async () => {
    const pki = testPki();
    const app = Fastify({
      https: {
        cert: pki.serving.certPem,
        key: pki.serving.keyPem,
        ca: pki.clientCa.certPem,
        requestCert: true,
        rejectUnauthorized: false,
      },
    });
    app.post('/who', async (request) => ({ subject: callerSubject(request) ?? null }));
    const address = await app.listen({ host: '127.0.0.1', port: 0 });
    try {
      const who = async (pair?: { certPem: string; keyPem: string }) =>
        (
          await callHook(
            address,
            '/who',
            {},
            {
              ca: pki.ca.certPem,
              headers: { 'content-type': 'application/json' },
              ...(pair ? { cert: pair.certPem, key: pair.keyPem } : {}),
            },
          )
        ).body.subject;
      expect(await who(pki.client)).toBe(CAPI_CORE_CLIENT_SUBJECT);
      expect(await who(pki.dnsClient)).toBe('tenant');
      expect(await who()).toBeNull();
      // Presented but not verified (rejectUnauthorized off here): not a caller identity.
      expect(await who(pki.rogueClient)).toBeNull();
    } finally {
      await app.close();
    }
  });
});
