// `make release` output, installed, upgraded and removed by the real clusterctl of the tier's
// CAPI version, as docs/release.md tells a user to: a local repository with two releases,
// `clusterctl init --runtime-extension`, `upgrade plan`, `upgrade apply`, `delete`. No image
// runs (the bed has no kubelet): what is checked is every object clusterctl writes.
// The bed is a management cluster of its own (test/support/clusterctl.ts).
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { documentKind, NAMESPACE, PROVIDER_LABEL, PROVIDER_NAME, splitDocuments } from '../../scripts/release.ts';
import { startClusterctlBed, type ClusterctlBed } from '../support/clusterctl.ts';
import { waitFor } from '../support/wait.ts';

const MINUTE = 60_000;
const V1 = 'v0.2.0';
const V2 = 'v0.2.1';
const IMAGE_V2 = 'registry.example.com/platform/capi-upgrade-orchestrator';
const PROVIDER = `${PROVIDER_NAME}:${V1}`;

let bed: ClusterctlBed;
const components: Record<string, string> = {};

beforeAll(async () => {
  bed = await startClusterctlBed(mkdtempSync(join(tmpdir(), 'capi-uo-clusterctl-')));
  components[V1] = await bed.release(V1);
  components[V2] = await bed.release(V2, IMAGE_V2);
}, 6 * MINUTE);

afterAll(async () => await bed?.down(), 2 * MINUTE);

/** `kind/name` of every object of a components file that exists on the bed. */
async function existing(file: string): Promise<string[]> {
  const out = await bed.kubectl(['get', '-f', file, '--ignore-not-found', '-o', 'name']);
  return out.split('\n').filter(Boolean).sort();
}

/** `kind/name` of every object in a components file, as `kubectl get -o name` prints them. */
async function declared(file: string): Promise<string[]> {
  const docs = splitDocuments(readFileSync(file, 'utf8'));
  expect(docs.length).toBeGreaterThan(20);
  // kubectl resolves kinds to resources; with nothing missing it lists them all.
  const out = await bed.kubectl(['get', '-f', file, '-o', 'name']);
  const names = out.split('\n').filter(Boolean).sort();
  expect(names).toHaveLength(docs.length);
  return names;
}

interface Deployment {
  metadata: { labels: Record<string, string> };
  spec: {
    template: {
      spec: { containers: { image: string }[]; volumes?: { name: string; secret?: { secretName?: string } }[] };
    };
  };
}

async function deployment(name: string): Promise<Deployment> {
  return JSON.parse(await bed.kubectl(['get', 'deployment', name, '-n', NAMESPACE, '-o', 'json'])) as Deployment;
}

async function providerVersion(): Promise<string> {
  return (
    await bed.kubectl([
      'get',
      'providers.clusterctl.cluster.x-k8s.io',
      `runtime-extension-${PROVIDER_NAME}`,
      '-n',
      NAMESPACE,
      '--ignore-not-found',
      '-o',
      'jsonpath={.version}',
    ])
  ).trim();
}

/** `Kind/name` → the images of its pod template's containers, from `clusterctl generate provider`'s output. */
function podImages(yaml: string): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const doc of parseAllDocuments(yaml)) {
    const o = doc.toJS() as {
      kind?: string;
      metadata?: { name?: string };
      spec?: { template?: { spec?: { containers?: { image: string }[] } } };
    } | null;
    const containers = o?.spec?.template?.spec?.containers;
    if (o?.kind && containers) out[`${o.kind}/${o.metadata?.name}`] = containers.map((c) => c.image);
  }
  return out;
}

describe('clusterctl and the release (sequential: each step starts where the last ended)', () => {
  it(
    `generate provider --runtime-extension ${PROVIDER} --describe lists the variables and the default image`,
    async () => {
      // clusterctl applies its image overrides to the components even here, before any variable
      // is substituted: an image field that is a variable is not an image reference to it.
      const out = await bed.clusterctl(['generate', 'provider', '--runtime-extension', PROVIDER, '--describe']);
      expect(out).toContain('CAPI_UPGRADE_TEMPORAL_ADDRESS');
      expect(out).toContain(`ghcr.io/capi-upgrade-orchestrator/capi-upgrade-orchestrator:${V1}`);
    },
    MINUTE,
  );

  it(
    "clusterctl's images: override moves the Deployments to a mirror; CAPI_UPGRADE_PROMOTE_IMAGE moves the promote Job",
    async () => {
      const mirror = 'mirror.example.internal:5000/platform';
      const images = `images:\n  ${PROVIDER_LABEL}:\n    repository: ${mirror}\n`;
      const out = await bed.clusterctl(
        ['generate', 'provider', '--runtime-extension', PROVIDER],
        { CAPI_UPGRADE_PROMOTE_IMAGE: `${mirror}/capi-upgrade-orchestrator:${V1}` },
        images,
      );
      const mirrored = `${mirror}/capi-upgrade-orchestrator:${V1}`;
      expect(podImages(out)).toEqual({
        [`Deployment/${PROVIDER_NAME}-api`]: [mirrored],
        [`Deployment/${PROVIDER_NAME}-worker`]: [mirrored],
        [`Job/${PROVIDER_NAME}-promote-worker`]: [mirrored],
      });
    },
    MINUTE,
  );

  it(
    `init --runtime-extension ${PROVIDER} creates every object of the components with the variables given`,
    async () => {
      const out = await bed.clusterctl(['init', '--runtime-extension', PROVIDER], {
        CAPI_UPGRADE_TEMPORAL_ADDRESS: 'temporal.example.internal:7233',
        CAPI_UPGRADE_HOOK_CLIENT_CA_SECRET: 'platform-capi-client-ca',
      });
      expect(out).toContain(`Installing provider="runtime-extension-${PROVIDER_NAME}" version="${V1}"`);
      const file = components[V1]!;
      expect(await existing(file)).toEqual(await declared(file));
      expect(await providerVersion()).toBe(V1);

      const api = await deployment(`${PROVIDER_NAME}-api`);
      expect(api.metadata.labels['app.kubernetes.io/version']).toBe(V1);
      expect(api.spec.template.spec.containers[0]!.image).toBe(
        `ghcr.io/capi-upgrade-orchestrator/capi-upgrade-orchestrator:${V1}`,
      );
      // The hook server trusts the client CA the platform named, in place of cert-manager's bundle.
      expect(api.spec.template.spec.volumes?.find((v) => v.name === 'client-ca')?.secret?.secretName).toBe(
        'platform-capi-client-ca',
      );
      const settings = JSON.parse(
        await bed.kubectl(['get', 'configmap', '-n', NAMESPACE, '-l', 'app.kubernetes.io/version', '-o', 'json']),
      ) as { items: { metadata: { name: string }; data: Record<string, string> }[] };
      const data = settings.items.find((c) => c.metadata.name.startsWith(`${PROVIDER_NAME}-settings-`))!.data;
      expect(data['TEMPORAL_ADDRESS']).toBe('temporal.example.internal:7233');
      expect(data['LOG_LEVEL']).toBe('info');
      expect(data['TEMPORAL_NAMESPACE']).toBe('default');
    },
    3 * MINUTE,
  );

  it(
    `upgrade plan offers ${V2}; upgrade apply moves the Deployments to its image and version`,
    async () => {
      const plan = await bed.clusterctl(['upgrade', 'plan']);
      expect(plan).toMatch(
        new RegExp(`runtime-extension-${PROVIDER_NAME}\\s+${NAMESPACE}\\s+RuntimeExtensionProvider\\s+${V1}\\s+${V2}`),
      );

      await bed.clusterctl(['upgrade', 'apply', '--runtime-extension', `${NAMESPACE}/${PROVIDER_NAME}:${V2}`]);
      expect(await providerVersion()).toBe(V2);
      for (const role of ['api', 'worker']) {
        const d = await deployment(`${PROVIDER_NAME}-${role}`);
        expect(d.metadata.labels['app.kubernetes.io/version']).toBe(V2);
        expect(d.spec.template.spec.containers[0]!.image).toBe(`${IMAGE_V2}:${V2}`);
      }
      const file = components[V2]!;
      expect(await existing(file)).toEqual(await declared(file));
    },
    3 * MINUTE,
  );

  it(
    'delete --runtime-extension removes what it installed, and keeps the namespace, CRD and its instances',
    async () => {
      await bed.kubectl(
        ['apply', '-f', '-'],
        JSON.stringify({
          apiVersion: 'upgrades.capi-orchestrator.io/v1alpha1',
          kind: 'NodeUpgradeRequest',
          metadata: { name: 'node-a', namespace: NAMESPACE },
          spec: { nodeName: 'node-a', kubernetesVersion: 'v1.34.2' },
        }),
      );
      await bed.clusterctl(['delete', '--runtime-extension', PROVIDER_NAME]);

      const file = components[V2]!;
      const kept = splitDocuments(readFileSync(file, 'utf8')).filter((d) =>
        ['Namespace', 'CustomResourceDefinition'].includes(documentKind(d)),
      );
      expect(kept).toHaveLength(2);
      expect(await existing(file)).toEqual([
        'customresourcedefinition.apiextensions.k8s.io/nodeupgraderequests.upgrades.capi-orchestrator.io',
        `namespace/${NAMESPACE}`,
      ]);
      expect(await providerVersion()).toBe('');
      expect((await bed.kubectl(['get', 'nodeupgraderequests', 'node-a', '-n', NAMESPACE, '-o', 'name'])).trim()).toBe(
        'nodeupgraderequest.upgrades.capi-orchestrator.io/node-a',
      );
      // The promote Job's pods carry the provider label (clusterctl deletes them); the Deployments'
      // go with their ReplicaSets (the garbage collector).
      const pods = await waitFor(
        async () => (await bed.kubectl(['get', 'pods', '-n', NAMESPACE, '-o', 'name'])).trim(),
        (names) => names === '',
        MINUTE,
      );
      expect(pods).toBe('');
    },
    3 * MINUTE,
  );
});
