// The removed-API gate's activity against the test bed's real kube-apiserver
// (v1.36, networking.k8s.io/v1beta1 enabled by scripts/testbed.sh): after a
// client reads IPAddress through the deprecated v1beta1 (removed in 1.37), the
// metric names it, and the verdict holds an upgrade whose chain reaches v1.37
// but not one that stays on v1.36. Failure paths: credentials refused (401), an
// identity without `get /metrics` (403), a body over the cap.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { CustomObjectsApi } from '@kubernetes/client-node';
import { ApplicationFailure } from '@temporalio/common';
import { METRICS_REFUSED, METRICS_TOO_LARGE, scanApiServerMetrics } from '../../src/activities/deprecated-apis.ts';
import { managementKubeConfig } from '../../src/platform/kube/clients.ts';
import { workloadKubeConfig } from '../../src/platform/kube/workload-clusters.ts';
import { createUpgradeActivities } from '../../src/activities/upgrade.ts';
import { removedApiFindings, removedApisMessage } from '../../src/domain/deprecated-apis.ts';
import {
  createKubeconfigSecret,
  createNamespace,
  createWorkloadNamespace,
  deleteGroup,
  managementApi,
  testbed,
  testGroup,
  workloadApi,
  workloadKubeconfigYaml,
} from '../../support/testbed-fixtures.ts';

const group = testGroup('dapi');
const g = group.name;
const wl = workloadApi();
const mg = managementApi();
const management = managementKubeConfig(testbed().workerKubeconfig);
const activities = createUpgradeActivities({ management });
const cluster = { namespace: g, name: 'prod' };

/** A `<name>-kubeconfig` Secret holding a kubeconfig that authenticates with `user`. */
async function kubeconfigSecret(name: string, user: Record<string, unknown>): Promise<void> {
  await mg.core.createNamespacedSecret({
    namespace: g,
    body: {
      metadata: { name: `${name}-kubeconfig` },
      data: { value: Buffer.from(workloadKubeconfigYaml(testbed().workloadServer, user)).toString('base64') },
    },
  });
}

async function refusal(name: string): Promise<ApplicationFailure> {
  const err = await activities.checkDeprecatedApis({ cluster: { namespace: g, name } }).then(
    () => new Error('resolved'),
    (e: unknown) => e,
  );
  if (!(err instanceof ApplicationFailure)) throw err;
  return err;
}

beforeAll(async () => {
  await Promise.all([createWorkloadNamespace(wl, g), createNamespace(mg.core, g)]);
  await createKubeconfigSecret(mg.core, g, cluster.name);
  // A client still on the deprecated version: what a workload that would break on v1.37 does.
  await wl.kc.makeApiClient(CustomObjectsApi).listClusterCustomObject({
    group: 'networking.k8s.io',
    version: 'v1beta1',
    plural: 'ipaddresses',
  });
});
afterAll(async () => {
  await Promise.allSettled([deleteGroup(wl, group), mg.core.deleteNamespace({ name: g })]);
});

describe('checkDeprecatedApis against the real kube-apiserver', () => {
  it('reads the requested deprecated APIs with the scoped workload identity, and the chain decides', async () => {
    const scan = await activities.checkDeprecatedApis({ cluster });
    expect(scan.malformed).toBe(0);
    expect(scan.uses).toContainEqual({
      group: 'networking.k8s.io',
      version: 'v1beta1',
      resource: 'ipaddresses',
      subresource: '',
      removedRelease: '1.37',
    });
    // Deprecated with no removal planned (v1 Endpoints, read by the controllers): listed, never held.
    expect(scan.uses).toContainEqual(expect.objectContaining({ group: '', resource: 'endpoints', removedRelease: '' }));

    expect(removedApiFindings(scan.uses, ['v1.36.2'])).toEqual([]);
    const findings = removedApiFindings(scan.uses, ['v1.37.1', 'v1.38.0']);
    expect(findings).toContainEqual(expect.objectContaining({ resource: 'ipaddresses', removedAt: 'v1.37.1' }));
    expect(removedApisMessage('v1.38.0', findings)).toContain(
      'networking.k8s.io/v1beta1 ipaddresses (removed in 1.37, reached at v1.37.1)',
    );
  });

  it('credentials the API server refuses: 401, non-retryable, saying so', async () => {
    await kubeconfigSecret('bad-token', { token: 'not-a-token' });
    const err = await refusal('bad-token');
    expect(err.type).toBe(METRICS_REFUSED);
    expect(err.nonRetryable).toBe(true);
    expect(err.message).toBe('GET /metrics: 401 Unauthorized (the workload credentials were not accepted)');
  });

  it('an identity without get /metrics: 403, naming the missing grant', async () => {
    await wl.core.createNamespacedServiceAccount({ namespace: g, body: { metadata: { name: 'no-metrics' } } });
    const token = (
      await wl.core.createNamespacedServiceAccountToken({
        namespace: g,
        name: 'no-metrics',
        body: { spec: { audiences: [], expirationSeconds: 600 } },
      })
    ).status?.token;
    await kubeconfigSecret('no-metrics', { token });
    const err = await refusal('no-metrics');
    expect(err.type).toBe(METRICS_REFUSED);
    expect(err.message).toBe(
      'GET /metrics: 403 Forbidden (the workload identity may not get the nonResourceURL /metrics (config/workload grants it))',
    );
  });

  it('stops reading past the byte cap before the family ends', async () => {
    const kc = await workloadKubeConfig(management, cluster);
    const err = await scanApiServerMetrics(kc, 10_000).then(
      () => new Error('resolved'),
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ApplicationFailure);
    expect((err as ApplicationFailure).type).toBe(METRICS_TOO_LARGE);
    expect((err as ApplicationFailure).message).toBe(
      'GET /metrics: more than 10000 bytes before apiserver_requested_deprecated_apis ended',
    );
  });
});
