// GenerateUpgradePlan over HTTPS with CAPI-shaped requests.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { defaultHandlerName, HOOKS_API_VERSION } from '../../src/api/hooks/contract.ts';
import { hookPath } from '../../src/api/hooks/hook-route.ts';
import { validateUpgradePlan } from '../../src/domain/upgrade-plan-validator.ts';
import { callHook } from '../../support/capi-client.ts';
import { cluster, sampleRequest } from '../../support/capi-fixtures.ts';
import { startTestHookServer, type TestHookServer } from '../support/hook-server.ts';

const path = hookPath('GenerateUpgradePlan', defaultHandlerName('GenerateUpgradePlan'));

interface PlanResponse {
  status: string;
  message?: string;
  controlPlaneUpgrades?: { version: string }[];
  workersUpgrades?: { version: string }[];
}

function planRequest(
  from: string,
  to: string,
  opts: { workers?: string; settings?: Record<string, string>; annotations?: Record<string, string> } = {},
) {
  const c = cluster('prod-1', 'fleet-a', to);
  if (opts.annotations) c.metadata.annotations = { ...c.metadata.annotations, ...opts.annotations };
  return {
    apiVersion: HOOKS_API_VERSION,
    kind: 'GenerateUpgradePlanRequest',
    ...(opts.settings ? { settings: opts.settings } : {}),
    cluster: c,
    fromControlPlaneKubernetesVersion: from,
    ...(opts.workers ? { fromWorkersKubernetesVersion: opts.workers } : {}),
    toKubernetesVersion: to,
  };
}

const versions = (steps?: { version: string }[]) => (steps ?? []).map((s) => s.version);

describe('GenerateUpgradePlan over HTTPS', () => {
  let t: TestHookServer;
  beforeAll(async () => (t = await startTestHookServer()));
  afterAll(async () => t.close());
  const call = async (body: unknown) =>
    (await callHook<PlanResponse>(t.url, path, body, { ca: t.ca.certPem, timeout: '10s' })).body;

  it('chains the newest patch of each minor up to the target and leaves workers to CAPI', async () => {
    const res = await call(planRequest('v1.29.0', 'v1.33.0', { workers: 'v1.29.0' }));
    expect(res.status).toBe('Success');
    expect(versions(res.controlPlaneUpgrades)).toEqual(['v1.30.14', 'v1.31.14', 'v1.32.13', 'v1.33.0']);
    expect(res).not.toHaveProperty('workersUpgrades');
    expect(
      validateUpgradePlan({
        fromControlPlane: 'v1.29.0',
        fromWorkers: 'v1.29.0',
        to: 'v1.33.0',
        controlPlaneUpgrades: versions(res.controlPlaneUpgrades),
        workersUpgrades: [],
      }),
    ).toEqual([]);
  });

  it('follows the catalog from ExtensionConfig settings and the workers list from a Cluster annotation', async () => {
    const res = await call(
      planRequest('v1.29.0', 'v1.32.3', {
        workers: 'v1.29.0',
        settings: { kubernetesVersions: 'v1.29.0,v1.30.0,v1.30.5,v1.31.0,v1.31.2,v1.32.0,v1.32.3' },
        annotations: { 'upgrades.capi-orchestrator.io/workers-upgrade-strategy': 'v1.30.0,v1.32.3' },
      }),
    );
    expect(res.status).toBe('Success');
    expect(versions(res.controlPlaneUpgrades)).toEqual(['v1.30.0', 'v1.31.2', 'v1.32.3']);
    expect(versions(res.workersUpgrades)).toEqual(['v1.30.0', 'v1.32.3']);
  });

  it('steps through every patch when the control plane strategy says so', async () => {
    const res = await call(
      planRequest('v1.30.0', 'v1.31.1', {
        settings: {
          kubernetesVersions: 'v1.30.0,v1.30.1,v1.30.2,v1.31.0,v1.31.1',
          controlPlaneUpgradeStrategy: 'every-patch',
        },
      }),
    );
    expect(versions(res.controlPlaneUpgrades)).toEqual(['v1.30.1', 'v1.30.2', 'v1.31.0', 'v1.31.1']);
  });

  it('answers an empty plan when the cluster is already at the target', async () => {
    const res = await call(planRequest('v1.33.0', 'v1.33.0', { workers: 'v1.33.0' }));
    expect(res).toEqual({ apiVersion: HOOKS_API_VERSION, kind: 'GenerateUpgradePlanResponse', status: 'Success' });
  });

  it.each([
    ['a downgrade', planRequest('v1.33.0', 'v1.31.0'), /v1\.33\.0.*v1\.31\.0/],
    ['a major version change', planRequest('v1.33.0', 'v2.0.0'), /v1\.33\.0.*v2\.0\.0/],
    ['an unparsable version', planRequest('v1.33.0', 'latest'), /latest/],
    ['a target below the workers version', planRequest('v1.31.0', 'v1.32.0', { workers: 'v1.33.0' }), /v1\.33\.0/],
  ])('answers %s with a stable Failure that names the versions', async (_name, body, pattern) => {
    const first = await call(body);
    const second = await call(body);
    expect(first.status).toBe('Failure');
    expect(first.message).toMatch(pattern);
    expect(second).toEqual(first);
  });

  it('answers a bad policy annotation with a Failure naming the annotation and value', async () => {
    const res = await call(
      planRequest('v1.31.0', 'v1.32.0', {
        annotations: { 'upgrades.capi-orchestrator.io/control-plane-upgrade-strategy': 'yolo' },
      }),
    );
    expect(res.status).toBe('Failure');
    expect(res.message).toContain('annotation upgrades.capi-orchestrator.io/control-plane-upgrade-strategy');
    expect(res.message).toContain('"yolo"');
  });

  it('answers huge targets with a Failure at once while another hook keeps answering', async () => {
    // On main `v1.30000000.0` held the event loop for 15 s and `v1.9007199254740991.0` never returned.
    // The longest version the schema lets through is 256 characters (CAPI's own bound).
    const huge = ['v1.30000000.0', 'v1.9007199254740991.0', `v1.${'9'.repeat(250)}.0`];
    const SHOWN_LONG = `v1.${'9'.repeat(29)}…(255 characters)`;
    const timed = async <T>(f: () => Promise<T>) => {
      const started = performance.now();
      const value = await f();
      return { value, ms: performance.now() - started };
    };
    const started = performance.now();
    const [plans, other] = await Promise.all([
      Promise.all(huge.map((to) => timed(() => call(planRequest('v1.30.5', to, { workers: 'v1.30.5' }))))),
      timed(() =>
        callHook<{ status: string }>(
          t.url,
          hookPath('BeforeClusterCreate', defaultHandlerName('BeforeClusterCreate')),
          sampleRequest('BeforeClusterCreate'),
          { ca: t.ca.certPem, timeout: '10s' },
        ),
      ),
    ]);
    const wall = performance.now() - started;

    expect(plans.map((p) => p.value.status)).toEqual(['Failure', 'Failure', 'Failure']);
    expect(plans[0]?.value.message).toBe(
      'the upgrade from v1.30.5 to v1.30000000.0 spans 29999970 minor versions; at most 64 are planned in one upgrade',
    );
    expect(plans[1]?.value.message).toBe(
      'the upgrade from v1.30.5 to v1.9007199254740991.0 spans 9007199254740961 minor versions; at most 64 are planned in one upgrade',
    );
    expect(plans[2]?.value.message).toBe(
      `cannot plan an upgrade from v1.30.5 (workers v1.30.5) to ${SHOWN_LONG}: target: invalid Kubernetes version "${SHOWN_LONG}": minor number ${'9'.repeat(20)}…(250 digits) is out of range (at most 18446744073709551615)`,
    );
    expect(plans.every((p) => p.value.controlPlaneUpgrades === undefined)).toBe(true);
    expect(other.value.statusCode).toBe(200);
    expect(other.value.body.status).toBe('Success');
    // Each call is a fresh TLS connection; a second is far above that and far below the old 15 s stall.
    expect(wall).toBeLessThan(1000);

    // And the same answer again: the Failure is stable.
    expect(await call(planRequest('v1.30.5', 'v1.30000000.0', { workers: 'v1.30.5' }))).toEqual(plans[0]?.value);
  });

  it('refuses a version longer than 256 characters with 400 naming the field, before any planning', async () => {
    const res = await callHook(
      t.url,
      hookPath('GenerateUpgradePlan', defaultHandlerName('GenerateUpgradePlan')),
      planRequest('v1.30.5', `v1.${'9'.repeat(400)}.0`, { workers: 'v1.30.5' }),
      { ca: t.ca.certPem },
    );
    expect(res.statusCode).toBe(400);
    expect(res.body).toEqual({
      error: 'BadRequest',
      // The request names the target twice; the Cluster's comes first.
      field: 'cluster.spec.topology.version',
      message: 'cluster.spec.topology.version: must NOT have more than 256 characters',
    });
  });
});
