// The hook server over real HTTPS, called the way CAPI calls it.
import { X509Certificate } from 'node:crypto';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import Value from 'typebox/value';
import {
  DiscoveryResponseSchema,
  HOOKS_API_VERSION,
  LIMITS,
  hookCatalog,
  hookNames,
  responseSchema,
  type HookName,
} from '../../src/api/hooks/contract.ts';
import { defaultHandlerName } from '../../src/api/hooks/contract.ts';
import { hookPath, UNAVAILABLE_MESSAGE } from '../../src/api/hooks/hook-route.ts';
import { DISCOVERY_PATH } from '../../src/api/hooks/discovery.ts';
import { testPki } from '../support/pki.ts';
import { callHook } from '../../support/capi-client.ts';
import { sampleRequest } from '../../support/capi-fixtures.ts';
import { startTestHookServer, type TestHookServer } from '../support/hook-server.ts';

const discoveryRequest = { apiVersion: HOOKS_API_VERSION, kind: 'DiscoveryRequest' };
const pathOf = (hook: HookName) => hookPath(hook, defaultHandlerName(hook));

describe('hook server over HTTPS', () => {
  let t: TestHookServer;
  beforeAll(async () => {
    t = await startTestHookServer({ env: { HOOK_SERVER_BODY_LIMIT_BYTES: String(128 * 1024) } });
  });
  afterAll(async () => t.close());

  it('serves discovery with every hook, valid names, timeouts and failure policies', async () => {
    const res = await callHook(t.url, DISCOVERY_PATH, discoveryRequest, { ca: t.ca.certPem, timeout: '10s' });
    expect(res.statusCode).toBe(200);
    expect(Value.Check(DiscoveryResponseSchema, res.body)).toBe(true);
    const handlers = res.body.handlers as {
      name: string;
      requestHook: { hook: string };
      timeoutSeconds: number;
      failurePolicy: string;
    }[];
    expect(handlers.map((h) => h.requestHook.hook).sort()).toEqual([...hookNames].sort());
    expect(new Set(handlers.map((h) => h.name)).size).toBe(13);
    for (const h of handlers) {
      expect(h.name).toMatch(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/);
      expect(h.timeoutSeconds).toBeGreaterThanOrEqual(0);
      expect(h.timeoutSeconds).toBeLessThanOrEqual(30);
    }
    expect(handlers.find((h) => h.requestHook.hook === 'BeforeClusterUpgrade')?.failurePolicy).toBe('Fail');
    expect(handlers.find((h) => h.requestHook.hook === 'AfterControlPlaneInitialized')?.failurePolicy).toBe('Ignore');
  });

  it.each(hookNames)('answers %s with a well-formed response envelope', async (hook) => {
    const res = await callHook(
      t.url,
      pathOf(hook),
      sampleRequest(hook, { extensionConfigName: 'capi-upgrade-orchestrator' }),
      {
        ca: t.ca.certPem,
        timeout: '10s',
      },
    );
    expect(res.statusCode).toBe(200);
    expect(res.body.apiVersion).toBe(HOOKS_API_VERSION);
    expect(res.body.kind).toBe(`${hook}Response`);
    expect(Value.Check(responseSchema(hook), res.body)).toBe(true);
    if (hookCatalog[hook].shape === 'retry') expect(Number.isInteger(res.body.retryAfterSeconds)).toBe(true);
    else expect(res.body).not.toHaveProperty('retryAfterSeconds');
  });

  it('answers a call it cannot serve with the same Failure message every time', async () => {
    const first = await callHook(t.url, pathOf('UpdateMachine'), sampleRequest('UpdateMachine'), { ca: t.ca.certPem });
    const second = await callHook(t.url, pathOf('UpdateMachine'), sampleRequest('UpdateMachine'), { ca: t.ca.certPem });
    expect(first.statusCode).toBe(200);
    expect(first.body.status).toBe('Failure');
    expect(first.body.retryAfterSeconds).toBe(0);
    expect(second.text).toBe(first.text);
  });

  it('accepts an explicit application/json content type too', async () => {
    const res = await callHook(t.url, pathOf('BeforeClusterCreate'), sampleRequest('BeforeClusterCreate'), {
      ca: t.ca.certPem,
      headers: { 'content-type': 'application/json' },
    });
    expect(res.statusCode).toBe(200);
    expect(res.body.status).toBe('Success');
  });

  describe('bad input', () => {
    const path = pathOf('BeforeClusterUpgrade');
    const valid = () => sampleRequest('BeforeClusterUpgrade') as unknown as Record<string, unknown>;

    it('rejects a body that is not JSON with 400', async () => {
      const res = await callHook(t.url, path, undefined, {
        ca: t.ca.certPem,
        raw: '{"kind": "BeforeClusterUpgradeRequest",',
      });
      expect(res.statusCode).toBe(400);
      expect(res.body.error).toBe('BadRequest');
      expect(res.body.message).toMatch(/^request body is not valid JSON/);
    });

    it('rejects an empty body with 400', async () => {
      const res = await callHook(t.url, path, undefined, { ca: t.ca.certPem, raw: '' });
      expect(res.statusCode).toBe(400);
      expect(res.body.message).toBe('request body is empty; expected a JSON object');
    });

    it('rejects the wrong kind for the route with 400 naming the field', async () => {
      const res = await callHook(t.url, path, { ...valid(), kind: 'AfterClusterUpgradeRequest' }, { ca: t.ca.certPem });
      expect(res.statusCode).toBe(400);
      expect(res.body).toEqual({
        error: 'BadRequest',
        field: 'kind',
        message: 'kind: must be "BeforeClusterUpgradeRequest"',
      });
    });

    it('rejects the wrong apiVersion with 400 naming the field', async () => {
      const res = await callHook(
        t.url,
        path,
        { ...valid(), apiVersion: 'hooks.runtime.cluster.x-k8s.io/v1beta1' },
        { ca: t.ca.certPem },
      );
      expect(res.statusCode).toBe(400);
      expect(res.body.field).toBe('apiVersion');
      expect(res.body.message).toContain(HOOKS_API_VERSION);
    });

    it('rejects a missing required field with 400 naming it', async () => {
      const { toKubernetesVersion: _, ...rest } = valid();
      const res = await callHook(t.url, path, rest, { ca: t.ca.certPem });
      expect(res.statusCode).toBe(400);
      expect(res.body).toEqual({
        error: 'BadRequest',
        field: 'toKubernetesVersion',
        message: 'toKubernetesVersion: required field is missing',
      });
    });

    it('rejects a cluster without metadata.name with 400 naming the nested field', async () => {
      const body = valid();
      const c = body.cluster as { metadata: Record<string, unknown> };
      delete c.metadata.name;
      const res = await callHook(t.url, path, body, { ca: t.ca.certPem });
      expect(res.statusCode).toBe(400);
      expect(res.body.field).toBe('cluster.metadata.name');
    });

    it.each([
      ['namespace', 'team/b', 'c'],
      ['name', 'team', 'b/c'],
      ['name', 'team', 'Prod_1'],
      ['namespace', 'x'.repeat(64), 'c'],
    ])('rejects a cluster %s that is not a Kubernetes name (%s / %s) with 400 naming it', async (field, ns, name) => {
      const body = valid();
      const c = body.cluster as { metadata: Record<string, unknown> };
      c.metadata.namespace = ns;
      c.metadata.name = name;
      const res = await callHook(t.url, path, body, { ca: t.ca.certPem });
      expect(res.statusCode).toBe(400);
      expect(res.body.field).toBe(`cluster.metadata.${field}`);
      expect(res.body.message).toMatch(field === 'name' ? /must be a DNS-1123 subdomain/ : /must be a DNS-1123 label/);
    });

    it("clamps an out-of-range timeout into CAPI's 1–30 s instead of overflowing a timer", async () => {
      const res = await callHook(t.url, path, valid(), { ca: t.ca.certPem, timeout: '999999h' });
      expect(res.statusCode).toBe(200);
      expect(res.body.status).toBe('Success');
      expect(res.body.message).toBeUndefined();
    });

    it('rejects a malformed timeout query parameter with 400', async () => {
      const res = await callHook(t.url, path, valid(), { ca: t.ca.certPem, timeout: 'ten seconds' });
      expect(res.statusCode).toBe(400);
      expect(res.body.field).toBe('timeout');
    });

    it('answers an unknown path with 404', async () => {
      const res = await callHook(t.url, `${path}-nope`, valid(), { ca: t.ca.certPem });
      expect(res.statusCode).toBe(404);
      expect(res.body.error).toBe('NotFound');
    });

    it('answers a wrong method with 405 and Allow: POST', async () => {
      const res = await callHook(t.url, path, undefined, { ca: t.ca.certPem, method: 'GET' });
      expect(res.statusCode).toBe(405);
      expect(res.headers.allow).toBe('POST');
      const disc = await callHook(t.url, DISCOVERY_PATH, undefined, { ca: t.ca.certPem, method: 'DELETE' });
      expect(disc.statusCode).toBe(405);
    });

    it('answers a body over the limit with 413 naming the limit', async () => {
      const body = { ...valid(), padding: 'x'.repeat(130 * 1024) };
      const res = await callHook(t.url, path, body, { ca: t.ca.certPem });
      expect(res.statusCode).toBe(413);
      expect(res.body).toEqual({
        error: 'PayloadTooLarge',
        message: 'request body is larger than the limit of 131072 bytes (HOOK_SERVER_BODY_LIMIT_BYTES)',
      });
    });

    it('answers a discovery body over its own 64 KiB limit with 413, whatever the hooks allow', async () => {
      const res = await callHook(
        t.url,
        DISCOVERY_PATH,
        { ...discoveryRequest, pad: 'x'.repeat(65 * 1024) },
        {
          ca: t.ca.certPem,
        },
      );
      expect(res.statusCode).toBe(413);
      expect(res.body.message).toBe(
        'request body is larger than the limit of 65536 bytes (HOOK_SERVER_BODY_LIMIT_BYTES)',
      );
    });

    // Bounds Kubernetes and CAPI themselves enforce (LIMITS in src/api/hooks/contract.ts): past them, 400 naming the field.
    const tooLong: [string, (body: Record<string, unknown>) => void, string, RegExp][] = [
      [
        'a version',
        (b) => (b.toKubernetesVersion = `v1.33.0+${'x'.repeat(LIMITS.version)}`),
        'toKubernetesVersion',
        /must NOT have more than 256 characters/,
      ],
      [
        'an upgrade step version',
        (b) => (b.controlPlaneUpgrades = [{ version: 'v'.repeat(LIMITS.version + 1) }]),
        'controlPlaneUpgrades.0.version',
        /must NOT have more than 256 characters/,
      ],
      [
        'the list of upgrade steps',
        (b) =>
          (b.controlPlaneUpgrades = Array.from({ length: LIMITS.upgradeSteps + 1 }, (_, i) => ({
            version: `v1.${i}.0`,
          }))),
        'controlPlaneUpgrades',
        /must NOT have more than 64 items/,
      ],
      [
        'the cluster uid',
        (b) => ((b.cluster as { metadata: { uid: string } }).metadata.uid = 'u'.repeat(LIMITS.uid + 1)),
        'cluster.metadata.uid',
        /must NOT have more than 128 characters/,
      ],
      [
        'a label value',
        (b) => ((b.cluster as { metadata: { labels: object } }).metadata.labels = { team: 'x'.repeat(64) }),
        'cluster.metadata.labels.team',
        /must NOT have more than 63 characters/,
      ],
      [
        'an annotation key',
        (b) => ((b.cluster as { metadata: { annotations: object } }).metadata.annotations = { ['k'.repeat(318)]: 'v' }),
        'cluster.metadata.annotations',
        /key "k{64}": must NOT have more than 317 characters/,
      ],
      [
        'a settings value',
        (b) => (b.settings = { kubernetesVersions: 'x'.repeat(LIMITS.settingValue + 1) }),
        'settings.kubernetesVersions',
        /must NOT have more than 65536 characters/,
      ],
      [
        'the number of settings',
        (b) =>
          (b.settings = Object.fromEntries(Array.from({ length: LIMITS.settingsCount + 1 }, (_, i) => [`s${i}`, 'v']))),
        'settings',
        /must NOT have more than 128 properties/,
      ],
    ];
    it.each(tooLong)('rejects %s past its bound with 400 naming the field', async (_what, mutate, field, message) => {
      const body = valid();
      mutate(body);
      const res = await callHook(t.url, path, body, { ca: t.ca.certPem });
      expect(res.statusCode).toBe(400);
      expect(res.body.field).toBe(field);
      expect(res.body.message).toMatch(new RegExp(`^${field.replace(/\./g, '\\.')}: `));
      expect(res.body.message).toMatch(message);
    });

    it('accepts every bound at its limit (what CAPI may send passes)', async () => {
      const body = valid();
      const cluster = body.cluster as { metadata: Record<string, unknown> };
      cluster.metadata.uid = 'u'.repeat(LIMITS.uid);
      cluster.metadata.labels = { ['k'.repeat(LIMITS.metadataKey)]: 'v'.repeat(LIMITS.labelValue) };
      body.settings = Object.fromEntries(Array.from({ length: LIMITS.settingsCount }, (_, i) => [`s${i}`, 'v']));
      const res = await callHook(t.url, path, body, { ca: t.ca.certPem });
      expect(res.statusCode).toBe(200);
    });

    it('keeps serving after all of the above', async () => {
      const res = await callHook(t.url, DISCOVERY_PATH, discoveryRequest, { ca: t.ca.certPem });
      expect(res.statusCode).toBe(200);
    });
  });
});

describe('hook deadlines and backend outages', () => {
  let t: TestHookServer;
  const never = () => new Promise<never>(() => {});
  beforeAll(async () => {
    t = await startTestHookServer({
      server: { unavailableRetryAfterSeconds: 17 },
      lifecycle: {
        BeforeClusterUpgrade: never,
        AfterControlPlaneInitialized: never,
        AfterClusterUpgrade: async () => {
          throw new Error('connection to secret-host:7233 refused (token=hunter2)');
        },
        // Echoes the budget it was given, to show how `?timeout=` is clamped.
        BeforeClusterDelete: async (_request, ctx) => ({
          status: 'Success',
          message: `budget ${Math.round((ctx.deadline - Date.now()) / 1000)}s`,
          retryAfterSeconds: 0,
        }),
      },
    });
  });
  afterAll(async () => t.close());

  it('holds CAPI back on a blocking hook when the backend does not answer in time', async () => {
    const started = Date.now();
    const res = await callHook(t.url, pathOf('BeforeClusterUpgrade'), sampleRequest('BeforeClusterUpgrade'), {
      ca: t.ca.certPem,
      timeout: '2s',
    });
    const elapsed = Date.now() - started;
    expect(res.statusCode).toBe(200);
    expect(res.body).toEqual({
      apiVersion: HOOKS_API_VERSION,
      kind: 'BeforeClusterUpgradeResponse',
      status: 'Success',
      message: UNAVAILABLE_MESSAGE,
      retryAfterSeconds: 17,
    });
    expect(elapsed).toBeLessThan(2000);
  });

  it('answers Failure on a non-blocking hook when the backend does not answer in time', async () => {
    const res = await callHook(
      t.url,
      pathOf('AfterControlPlaneInitialized'),
      sampleRequest('AfterControlPlaneInitialized'),
      { ca: t.ca.certPem, timeout: '1s' },
    );
    expect(res.body).toEqual({
      apiVersion: HOOKS_API_VERSION,
      kind: 'AfterControlPlaneInitializedResponse',
      status: 'Failure',
      message: UNAVAILABLE_MESSAGE,
    });
  });

  it.each([
    ['999999h', 'budget 28s'],
    ['1ms', 'budget 1s'],
    ['10s', 'budget 8s'],
  ])('clamps ?timeout=%s to 1–30 s before taking its margin (%s)', async (timeout, message) => {
    const res = await callHook(t.url, pathOf('BeforeClusterDelete'), sampleRequest('BeforeClusterDelete'), {
      ca: t.ca.certPem,
      timeout,
    });
    expect(res.body).toMatchObject({ status: 'Success', message });
  });

  it('refuses a ?timeout= that is not a Go duration with a 400 naming it, and ignores one given twice', async () => {
    const bad = await callHook(t.url, pathOf('BeforeClusterDelete'), sampleRequest('BeforeClusterDelete'), {
      ca: t.ca.certPem,
      timeout: 'soon',
    });
    expect(bad.statusCode).toBe(400);
    expect(bad.body).toEqual({
      error: 'BadRequest',
      message: 'query parameter timeout="soon" is not a Go duration',
      field: 'timeout',
    });
    const twice = await callHook(
      t.url,
      `${pathOf('BeforeClusterDelete')}?timeout=1ms&timeout=999999h`,
      sampleRequest('BeforeClusterDelete'),
      { ca: t.ca.certPem },
    );
    expect(twice.statusCode).toBe(200);
    expect(twice.body).toMatchObject({ status: 'Success', message: 'budget 8s' });
  });

  it('answers an unexpected error with a generic Failure that leaks nothing', async () => {
    const res = await callHook(t.url, pathOf('AfterClusterUpgrade'), sampleRequest('AfterClusterUpgrade'), {
      ca: t.ca.certPem,
    });
    expect(res.statusCode).toBe(200);
    expect(res.body.status).toBe('Failure');
    expect(res.text).not.toMatch(/hunter2|secret-host|at .*\.ts/);
    expect(res.body.message).toBe('internal error in the AfterClusterUpgrade handler; see the extension logs');
  });
});

describe('hook configuration', () => {
  let t: TestHookServer;
  beforeAll(async () => {
    t = await startTestHookServer({
      env: {
        HOOKS_DISABLED: 'BeforeClusterCreate',
        HOOK_BEFORE_CLUSTER_UPGRADE_TIMEOUT_SECONDS: '25',
        HOOK_BEFORE_CLUSTER_UPGRADE_NAME: 'gate',
      },
    });
  });
  afterAll(async () => t.close());

  it('leaves a disabled hook out of discovery and unrouted, and applies names and timeouts', async () => {
    const res = await callHook(t.url, DISCOVERY_PATH, discoveryRequest, { ca: t.ca.certPem });
    const handlers = res.body.handlers as { name: string; requestHook: { hook: string }; timeoutSeconds: number }[];
    expect(handlers.map((h) => h.requestHook.hook)).not.toContain('BeforeClusterCreate');
    expect(handlers.find((h) => h.requestHook.hook === 'BeforeClusterUpgrade')).toMatchObject({
      name: 'gate',
      timeoutSeconds: 25,
    });
    const off = await callHook(t.url, pathOf('BeforeClusterCreate'), sampleRequest('BeforeClusterCreate'), {
      ca: t.ca.certPem,
    });
    expect(off.statusCode).toBe(404);
    const renamed = await callHook(
      t.url,
      hookPath('BeforeClusterUpgrade', 'gate'),
      sampleRequest('BeforeClusterUpgrade'),
      { ca: t.ca.certPem },
    );
    expect(renamed.statusCode).toBe(200);
  });
});

describe('TLS', () => {
  it('refuses clients that do not trust the serving CA', async () => {
    const t = await startTestHookServer();
    try {
      const other = testPki().otherCa;
      await expect(callHook(t.url, DISCOVERY_PATH, discoveryRequest, { ca: other.certPem })).rejects.toThrow(
        /self-signed|unable to verify|certificate/i,
      );
    } finally {
      await t.close();
    }
  });

  it('with a client CA configured, refuses clients without a valid certificate (mutual TLS)', async () => {
    const t = await startTestHookServer({ mutualTls: true });
    try {
      await expect(callHook(t.url, DISCOVERY_PATH, discoveryRequest, { ca: t.ca.certPem })).rejects.toThrow();
      const stranger = testPki().rogueClient;
      await expect(
        callHook(t.url, DISCOVERY_PATH, discoveryRequest, {
          ca: t.ca.certPem,
          cert: stranger.certPem,
          key: stranger.keyPem,
        }),
      ).rejects.toThrow();
      const ok = await callHook(t.url, DISCOVERY_PATH, discoveryRequest, {
        ca: t.ca.certPem,
        cert: t.client?.certPem,
        key: t.client?.keyPem,
      });
      expect(ok.statusCode).toBe(200);
    } finally {
      await t.close();
    }
  });

  it("hands each hook the caller's certificate subject (CN), and none without a certificate", async () => {
    const echo = async (_: unknown, ctx: { caller?: string }) => ({
      status: 'Success' as const,
      message: `caller=${ctx.caller ?? '(none)'}`,
      retryAfterSeconds: 0,
    });
    const mtls = await startTestHookServer({ mutualTls: true, lifecycle: { BeforeClusterCreate: echo } });
    const plain = await startTestHookServer({ lifecycle: { BeforeClusterCreate: echo } });
    try {
      const call = (t: TestHookServer, cert?: { certPem: string; keyPem: string }) =>
        callHook<{ message?: string }>(t.url, pathOf('BeforeClusterCreate'), sampleRequest('BeforeClusterCreate'), {
          ca: t.ca.certPem,
          ...(cert ? { cert: cert.certPem, key: cert.keyPem } : {}),
        });
      expect((await call(mtls, mtls.client)).body.message).toBe('caller=capi-controller-manager');
      expect((await call(plain)).body.message).toBe('caller=(none)');
    } finally {
      await mtls.close();
      await plain.close();
    }
  });

  it('serves a rotated certificate on the next connection without a restart', async () => {
    const t = await startTestHookServer({ server: { tlsReloadIntervalMs: 100 } });
    try {
      const before = await callHook(t.url, DISCOVERY_PATH, discoveryRequest, { ca: t.ca.certPem });
      const rotated = testPki().servingRotated;
      t.writeServingCertificate(rotated);
      let after = before;
      for (let i = 0; i < 50 && after.peerCertificate?.fingerprint256 === before.peerCertificate?.fingerprint256; i++) {
        await new Promise((r) => setTimeout(r, 100));
        after = await callHook(t.url, DISCOVERY_PATH, discoveryRequest, { ca: t.ca.certPem });
      }
      expect(after.statusCode).toBe(200);
      expect(after.peerCertificate?.fingerprint256).not.toBe(before.peerCertificate?.fingerprint256);
      expect(after.peerCertificate?.fingerprint256).toBe(new X509Certificate(rotated.certPem).fingerprint256);
    } finally {
      await t.close();
    }
  });

  it('keeps the current certificate while the files are broken', async () => {
    const t = await startTestHookServer({ server: { tlsReloadIntervalMs: 100 } });
    try {
      writeFileSync(join(t.dir, 'tls.crt'), 'not a certificate');
      rmSync(join(t.dir, 'tls.key'));
      await new Promise((r) => setTimeout(r, 300));
      const res = await callHook(t.url, DISCOVERY_PATH, discoveryRequest, { ca: t.ca.certPem });
      expect(res.statusCode).toBe(200);
    } finally {
      await t.close();
    }
  });
});
