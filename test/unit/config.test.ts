import { describe, expect, it } from '@jest/globals';
import { ConfigError, parseConfig } from '../../src/config/index.ts';
import { parseGoDuration, hookBudgetMs } from '../../src/api/http/deadline.ts';

describe('parseConfig', () => {
  it("has defaults that match CAPI's own extensions", () => {
    const c = parseConfig({});
    expect(c.server).toMatchObject({
      host: '0.0.0.0',
      port: 9443,
      certFile: '/tmp/k8s-webhook-server/serving-certs/tls.crt',
      keyFile: '/tmp/k8s-webhook-server/serving-certs/tls.key',
      insecureHttp: false,
      bodyLimits: { lifecycle: 2 * 1024 * 1024, 'upgrade-plan': 2 * 1024 * 1024, 'in-place': 6 * 1024 * 1024 },
      bodyBytesInFlight: 7 * 1024 * 1024,
      bodyMaxJsonItems: 512 * 1024,
      requestTimeoutMs: 30_000,
      maxConnections: 512,
    });
    expect(c.server.clientCaFile).toBeUndefined();
    expect(c.ops).toEqual({ host: '0.0.0.0', port: 8080 });
    expect(c.temporalSdkMetricsAddress).toBeUndefined();
    expect(c.handlers).toHaveLength(13);
    expect(c.handlers.every((h) => h.enabled && h.timeoutSeconds === 10)).toBe(true);
  });

  it('applies HOOK_SERVER_BODY_LIMIT_BYTES to every hook family and grows the bytes in flight with it', () => {
    const c = parseConfig({ HOOK_SERVER_BODY_LIMIT_BYTES: String(16 * 1024 * 1024) });
    expect(c.server.bodyLimits).toEqual({
      lifecycle: 16 * 1024 * 1024,
      'upgrade-plan': 16 * 1024 * 1024,
      'in-place': 16 * 1024 * 1024,
    });
    expect(c.server.bodyBytesInFlight).toBe(17 * 1024 * 1024);
    expect(() =>
      parseConfig({
        HOOK_SERVER_BODY_LIMIT_BYTES: String(4 * 1024 * 1024),
        HOOK_SERVER_BODY_BYTES_IN_FLIGHT: String(4 * 1024 * 1024),
      }),
    ).toThrow(/HOOK_SERVER_BODY_BYTES_IN_FLIGHT=4194304: must be at least the largest body limit plus 1048576 bytes/);
  });

  it('reads HOOK_SERVER_BODY_MAX_JSON_ITEMS within its range', () => {
    expect(parseConfig({ HOOK_SERVER_BODY_MAX_JSON_ITEMS: '2000000' }).server.bodyMaxJsonItems).toBe(2_000_000);
    expect(() => parseConfig({ HOOK_SERVER_BODY_MAX_JSON_ITEMS: '10' })).toThrow(/HOOK_SERVER_BODY_MAX_JSON_ITEMS/);
  });

  it('reports every bad variable at once, by name', () => {
    let error: unknown;
    try {
      parseConfig({
        HOOK_SERVER_PORT: 'eighty',
        HOOK_BEFORE_CLUSTER_UPGRADE_TIMEOUT_SECONDS: '31',
        HOOK_UPDATE_MACHINE_FAILURE_POLICY: 'Maybe',
        HOOKS_DISABLED: 'BeforeLunch',
        HOOK_CAN_UPDATE_MACHINE_NAME: 'Not_A_Label',
        ROLE: 'both',
        OPS_SERVER_PORT: '70000',
      });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const problems = (error as ConfigError).problems.join('\n');
    for (const name of [
      'HOOK_SERVER_PORT',
      'HOOK_BEFORE_CLUSTER_UPGRADE_TIMEOUT_SECONDS',
      'HOOK_UPDATE_MACHINE_FAILURE_POLICY',
      'HOOKS_DISABLED',
      'HOOK_CAN_UPDATE_MACHINE_NAME',
      'ROLE',
      'OPS_SERVER_PORT',
    ]) {
      expect(problems).toContain(name);
    }
  });

  it('checks hook requests against the management cluster unless HOOK_REQUEST_CHECKS=off', () => {
    expect(parseConfig({}).requestChecks).toBe(true);
    expect(parseConfig({ HOOK_REQUEST_CHECKS: 'on' }).requestChecks).toBe(true);
    expect(parseConfig({ HOOK_REQUEST_CHECKS: 'off' }).requestChecks).toBe(false);
    expect(() => parseConfig({ HOOK_REQUEST_CHECKS: 'false' })).toThrow(
      'HOOK_REQUEST_CHECKS="false": expected on or off',
    );
  });

  it('takes worker concurrency from the environment, leaving unset ones to the SDK', () => {
    expect(parseConfig({}).worker).toEqual({ nodeUpgradePollMs: 500 });
    expect(
      parseConfig({
        WORKER_MAX_CONCURRENT_ACTIVITIES: '50',
        WORKER_MAX_CONCURRENT_WORKFLOW_TASKS: '20',
        WORKER_MAX_CACHED_WORKFLOWS: '500',
        NODE_UPGRADE_POLL_INTERVAL: '250ms',
      }).worker,
    ).toEqual({
      maxConcurrentActivityTaskExecutions: 50,
      maxConcurrentWorkflowTaskExecutions: 20,
      maxCachedWorkflows: 500,
      nodeUpgradePollMs: 250,
    });
    let problems: string[] = [];
    try {
      parseConfig({ NODE_UPGRADE_POLL_INTERVAL: '30s', WORKER_MAX_CONCURRENT_ACTIVITIES: '0' });
    } catch (err) {
      problems = (err as ConfigError).problems;
    }
    expect(problems).toEqual([
      'WORKER_MAX_CONCURRENT_ACTIVITIES="0": expected an integer from 1 to 10000',
      'NODE_UPGRADE_POLL_INTERVAL="30s": expected a duration from 100ms to 5s (e.g. 500ms, 2s)',
    ]);
  });

  it('refuses two handlers with the same name', () => {
    expect(() => parseConfig({ HOOK_BEFORE_CLUSTER_CREATE_NAME: 'before-cluster-delete' })).toThrow(/used by both/);
  });

  describe('HOOK_CLIENT_ALLOWED_SUBJECTS', () => {
    const mtls = { TLS_CLIENT_CA_FILE: '/etc/client-ca/ca.crt' };
    const problemsOf = (env: Record<string, string>): string[] => {
      try {
        parseConfig(env);
        return [];
      } catch (err) {
        return (err as ConfigError).problems;
      }
    };

    it('is off unless set', () => {
      expect(parseConfig(mtls).server.clientAllowedSubjects).toBeUndefined();
      expect(parseConfig({ ...mtls, HOOK_CLIENT_ALLOWED_SUBJECTS: ' ' }).server.clientAllowedSubjects).toBeUndefined();
    });

    it('reads CN=, DNS= and bare entries (a bare name matches either)', () => {
      const c = parseConfig({
        ...mtls,
        HOOK_CLIENT_ALLOWED_SUBJECTS: 'CN=capi-controller-manager, DNS=kcp.capi.svc ,dns:other.example,either',
      });
      expect(c.server.clientAllowedSubjects).toEqual({
        commonNames: ['capi-controller-manager', 'either'],
        dnsNames: ['kcp.capi.svc', 'other.example', 'either'],
      });
    });

    it('names each bad entry, and needs mutual TLS', () => {
      expect(problemsOf({ ...mtls, HOOK_CLIENT_ALLOWED_SUBJECTS: 'a,,O=capi,CN=*.capi.svc,DNS=' })).toEqual([
        'HOOK_CLIENT_ALLOWED_SUBJECTS: empty entry in "a,,O=capi,CN=*.capi.svc,DNS=" (entries are separated by single commas)',
        'HOOK_CLIENT_ALLOWED_SUBJECTS: "O=capi": only CN= and DNS= entries are supported',
        'HOOK_CLIENT_ALLOWED_SUBJECTS: "CN=*.capi.svc": expected a name of 1 to 253 printable characters, without wildcards',
        'HOOK_CLIENT_ALLOWED_SUBJECTS: "DNS=": expected a name of 1 to 253 printable characters, without wildcards',
      ]);
      expect(problemsOf({ HOOK_CLIENT_ALLOWED_SUBJECTS: 'capi' })).toEqual([
        'HOOK_CLIENT_ALLOWED_SUBJECTS: needs TLS_CLIENT_CA_FILE (the allow-list applies to verified client certificates)',
      ]);
      expect(problemsOf({ ...mtls, HOOK_SERVER_INSECURE_HTTP: 'true' })).toEqual([
        'HOOK_SERVER_INSECURE_HTTP=true serves plain HTTP: TLS_CLIENT_CA_FILE and HOOK_CLIENT_ALLOWED_SUBJECTS need TLS',
      ]);
    });
  });
});

describe('Worker Versioning settings', () => {
  it('is off without a build id (make dev, the test tiers)', () => {
    expect(parseConfig({}).workerVersioning).toBeUndefined();
    expect(parseConfig({ TEMPORAL_WORKER_DEPLOYMENT_NAME: 'capi-uo' }).workerVersioning).toBeUndefined();
  });

  it('registers the build the image names, in the deployment the manifests name', () => {
    expect(parseConfig({ TEMPORAL_WORKER_BUILD_ID: 'abc123' }).workerVersioning).toEqual({
      deploymentName: 'capi-upgrade-orchestrator',
      buildId: 'abc123',
    });
    expect(
      parseConfig({ TEMPORAL_WORKER_BUILD_ID: 'abc123', TEMPORAL_WORKER_DEPLOYMENT_NAME: 'capi-uo' }).workerVersioning,
    ).toEqual({ deploymentName: 'capi-uo', buildId: 'abc123' });
  });

  it("takes the Worker Controller's deployment name over ours", () => {
    const env = {
      TEMPORAL_WORKER_BUILD_ID: 'abc123',
      TEMPORAL_WORKER_DEPLOYMENT_NAME: 'capi-uo',
      TEMPORAL_DEPLOYMENT_NAME: 'capi-system/capi-uo-worker',
    };
    expect(parseConfig(env).workerVersioning?.deploymentName).toBe('capi-system/capi-uo-worker');
  });

  it('waits for pinned runs on stop only when WORKER_DRAIN_TIMEOUT says how long', () => {
    expect(parseConfig({}).workerDrainTimeoutMs).toBe(0);
    expect(parseConfig({ WORKER_DRAIN_TIMEOUT: '20m' }).workerDrainTimeoutMs).toBe(20 * 60_000);
    expect(() => parseConfig({ WORKER_DRAIN_TIMEOUT: 'soon' })).toThrow(
      /WORKER_DRAIN_TIMEOUT="soon": expected a duration up to 24h, such as 20m/,
    );
  });

  it('refuses what Temporal would refuse, naming the variable', () => {
    const problems = (env: Record<string, string>) => {
      try {
        parseConfig(env);
        return [];
      } catch (err) {
        return (err as ConfigError).problems;
      }
    };
    expect(problems({ TEMPORAL_WORKER_BUILD_ID: 'b', TEMPORAL_WORKER_DEPLOYMENT_NAME: 'capi.uo' })).toEqual([
      'TEMPORAL_WORKER_DEPLOYMENT_NAME="capi.uo": a deployment name has no "." or ":"',
    ]);
    expect(problems({ TEMPORAL_WORKER_BUILD_ID: '__unversioned__' })).toEqual([
      'TEMPORAL_WORKER_BUILD_ID="__unversioned__": a build id must not start with "__" (reserved by Temporal)',
    ]);
    expect(problems({ TEMPORAL_WORKER_BUILD_ID: 'x'.repeat(256) })).toEqual([
      `TEMPORAL_WORKER_BUILD_ID="${'x'.repeat(256)}": a build id has at most 255 characters`,
    ]);
  });
});

describe('Go durations in ?timeout=', () => {
  it.each([
    ['10s', 10_000],
    ['1m30s', 90_000],
    ['500ms', 500],
    ['1.5s', 1500],
    ['0', 0],
  ])('parses %s', (text, ms) => expect(parseGoDuration(text)).toBe(ms));

  it.each(['', '10', 'ten', '10 s', '5x', '-1s'])('rejects %j', (text) =>
    expect(parseGoDuration(text)).toBeUndefined(),
  );

  it('leaves a margin inside the caller timeout', () => {
    expect(hookBudgetMs(10_000)).toBe(8000);
    expect(hookBudgetMs(30_000)).toBe(28_000);
    expect(hookBudgetMs(1000)).toBe(750);
  });
});
