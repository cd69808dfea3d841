// config/: the kustomize overlays a platform engineer applies. They render with
// the kustomize built into kubectl, the API server accepts every object
// (`kubectl apply --dry-run=server` against the test bed, where Cluster API's,
// cert-manager's and the Prometheus operator's CRDs are installed), and the
// objects fit together: names, ports, probes, certificate and CA injection.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from '@jest/globals';
import { parseAllDocuments } from 'yaml';
import { parseConfig } from '../../src/config.ts';
import { parseChecksums } from '../../src/domain/node-binaries.ts';
import { testbed } from '../support/fixtures.ts';

const run = promisify(execFile);
const ROOT = new URL('../../', import.meta.url).pathname;

interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; annotations?: Record<string, string>; labels?: Record<string, string> };
  spec?: Record<string, unknown>;
  [key: string]: unknown;
}
interface Container {
  name: string;
  env?: { name: string; value?: string }[];
  envFrom?: { configMapRef?: { name: string } }[];
  ports?: { name: string; containerPort: number }[];
  readinessProbe?: { httpGet?: { path: string; port: string } };
  livenessProbe?: { httpGet?: { path: string; port: string } };
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  securityContext?: Record<string, unknown>;
  volumeMounts?: { name: string; mountPath: string; readOnly?: boolean }[];
}
interface PodSpec {
  serviceAccountName: string;
  securityContext?: Record<string, unknown>;
  containers: Container[];
  volumes?: { name: string; secret?: { secretName: string }; configMap?: { name: string } }[];
  affinity?: unknown;
}

async function kustomize(dir: string): Promise<K8sObject[]> {
  const { stdout } = await run(testbed().kubectl, ['kustomize', `${ROOT}config/${dir}`], { maxBuffer: 16 << 20 });
  return parseAllDocuments(stdout).map((d) => d.toJSON() as K8sObject);
}

async function dryRun(dir: string, kubeconfig: string): Promise<string> {
  const rendered = await run(testbed().kubectl, ['kustomize', `${ROOT}config/${dir}`], { maxBuffer: 16 << 20 });
  const child = execFile(testbed().kubectl, ['--kubeconfig', kubeconfig, 'apply', '--dry-run=server', '-f', '-']);
  let out = '';
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
  child.stdin?.end(rendered.stdout);
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  if (code !== 0) throw new Error(`kubectl apply --dry-run=server of config/${dir} failed:\n${out}`);
  return out;
}

const find = (objects: K8sObject[], kind: string, name?: string): K8sObject[] =>
  objects.filter((o) => o.kind === kind && (name === undefined || o.metadata.name === name));
const one = (objects: K8sObject[], kind: string, name?: string): K8sObject => {
  const found = find(objects, kind, name);
  if (found.length !== 1) throw new Error(`expected one ${kind}${name ? ` ${name}` : ''}, found ${found.length}`);
  return found[0]!;
};
const podSpec = (d: K8sObject) => (d.spec as { template: { spec: PodSpec } }).template.spec;
/** A generated ConfigMap, by the name before kustomize's hash suffix. */
const configMap = (objects: K8sObject[], name: string): K8sObject & { data: Record<string, string> } => {
  const found = find(objects, 'ConfigMap').filter((c) => c.metadata.name.replace(/-[a-z0-9]{10}$/, '') === name);
  if (found.length !== 1) throw new Error(`expected one ConfigMap ${name}, found ${found.length}`);
  return found[0] as K8sObject & { data: Record<string, string> };
};

describe('config/default', () => {
  it('is accepted by the API server (kubectl apply --dry-run=server)', async () => {
    const out = await dryRun('default', testbed().managementKubeconfig);
    for (const kind of ['deployment.apps', 'extensionconfig.runtime.cluster.x-k8s.io', 'certificate.cert-manager.io'])
      expect(out).toContain(kind);
  });

  it('runs the api (2 replicas, PDB, spread) and the worker, each with its own ServiceAccount, hardened', async () => {
    const objects = await kustomize('default');
    const ns = one(objects, 'Namespace').metadata.name;
    for (const o of objects.filter(
      (x) =>
        !['Namespace', 'CustomResourceDefinition', 'ClusterRole', 'ClusterRoleBinding', 'ExtensionConfig'].includes(
          x.kind,
        ),
    ))
      expect(`${o.kind}/${o.metadata.name} in ${o.metadata.namespace}`).toBe(`${o.kind}/${o.metadata.name} in ${ns}`);

    const api = one(objects, 'Deployment', 'capi-upgrade-orchestrator-api');
    const worker = one(objects, 'Deployment', 'capi-upgrade-orchestrator-worker');
    expect((api.spec as { replicas: number }).replicas).toBeGreaterThanOrEqual(2);
    expect(podSpec(api).affinity).toMatchObject({ podAntiAffinity: {} });
    const pdb = one(objects, 'PodDisruptionBudget');
    expect((pdb.spec as { selector: unknown }).selector).toEqual((api.spec as { selector: unknown }).selector);

    const accounts = find(objects, 'ServiceAccount').map((s) => s.metadata.name);
    expect(podSpec(api).serviceAccountName).not.toBe(podSpec(worker).serviceAccountName);
    expect(accounts).toEqual(
      expect.arrayContaining([podSpec(api).serviceAccountName, podSpec(worker).serviceAccountName]),
    );

    const settings = configMap(objects, 'capi-upgrade-orchestrator-settings');
    for (const [deployment, role] of [
      [api, 'api'],
      [worker, 'worker'],
    ] as const) {
      const spec = podSpec(deployment);
      expect(spec.securityContext).toMatchObject({ runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } });
      // The image's user is numeric-checked by the kubelet only when a UID is given.
      expect(typeof spec.securityContext?.runAsUser).toBe('number');
      const [c] = spec.containers;
      expect(spec.containers).toHaveLength(1);
      expect(c!.env).toEqual(expect.arrayContaining([{ name: 'ROLE', value: role }]));
      expect(c!.envFrom).toEqual([{ configMapRef: { name: settings.metadata.name } }]);
      expect(c!.securityContext).toMatchObject({
        allowPrivilegeEscalation: false,
        readOnlyRootFilesystem: true,
        capabilities: { drop: ['ALL'] },
      });
      expect(c!.resources?.requests).toMatchObject({ cpu: expect.any(String), memory: expect.any(String) });
      expect(c!.resources?.limits).toMatchObject({ memory: expect.any(String) });
      // Probes hit the ops port the process serves (src/ops/ops-server.ts).
      const ops = c!.ports?.find((p) => p.name === 'ops');
      expect(ops?.containerPort).toBe(8080);
      expect(c!.readinessProbe?.httpGet).toEqual({ path: '/readyz', port: 'ops' });
      expect(c!.livenessProbe?.httpGet).toEqual({ path: '/livez', port: 'ops' });
    }
  });

  it('serves the hooks behind a Service whose certificate cert-manager issues and whose CA CAPI injects', async () => {
    const objects = await kustomize('default');
    const ns = one(objects, 'Namespace').metadata.name;
    const api = one(objects, 'Deployment', 'capi-upgrade-orchestrator-api');
    const service = one(objects, 'Service', 'capi-upgrade-orchestrator-webhook-service');
    const svc = service.spec as { ports: { port: number; targetPort: string }[]; selector: Record<string, string> };
    expect(svc.ports).toEqual([{ name: 'https', port: 443, targetPort: 'webhook-server' }]);
    const [container] = podSpec(api).containers;
    expect(container!.ports).toEqual(
      expect.arrayContaining([{ name: 'webhook-server', containerPort: 9443, protocol: 'TCP' }]),
    );
    const podLabels = (api.spec as { template: { metadata: { labels: Record<string, string> } } }).template.metadata
      .labels;
    expect(podLabels).toMatchObject(svc.selector);

    const cert = one(objects, 'Certificate');
    const certSpec = cert.spec as { dnsNames: string[]; secretName: string; issuerRef: { name: string; kind: string } };
    expect(certSpec.dnsNames).toContain(`${service.metadata.name}.${ns}.svc`);
    expect(one(objects, certSpec.issuerRef.kind, certSpec.issuerRef.name)).toBeDefined();
    // The certificate reaches the process where it reads it (TLS_CERT_DIR's default).
    const certVolume = podSpec(api).volumes?.find((v) => v.secret?.secretName === certSpec.secretName);
    expect(container!.volumeMounts).toEqual(
      expect.arrayContaining([
        { name: certVolume?.name, mountPath: '/tmp/k8s-webhook-server/serving-certs', readOnly: true },
      ]),
    );

    const ext = one(objects, 'ExtensionConfig');
    expect(ext.apiVersion).toBe('runtime.cluster.x-k8s.io/v1beta2');
    expect(ext.metadata.annotations?.['runtime.cluster.x-k8s.io/inject-ca-from-secret']).toBe(
      `${ns}/${certSpec.secretName}`,
    );
    expect((ext.spec as { clientConfig: unknown }).clientConfig).toEqual({
      service: { name: service.metadata.name, namespace: ns, port: 443 },
    });
  });

  it('pins the job executor: its settings parse (image by digest), and the worker mounts the checksums where they name', async () => {
    const objects = await kustomize('default');
    const settings = configMap(objects, 'capi-upgrade-orchestrator-settings');
    const job = parseConfig(settings.data).nodeUpgradeJob;
    expect(job.image).toMatch(/@sha256:[0-9a-f]{64}$/);
    const file = job.checksumsFile ?? '';
    const checksums = configMap(objects, 'capi-upgrade-orchestrator-node-binaries');
    const worker = podSpec(one(objects, 'Deployment', 'capi-upgrade-orchestrator-worker'));
    const volume = worker.volumes?.find((v) => v.configMap?.name === checksums.metadata.name);
    const mount = worker.containers[0]?.volumeMounts?.find((m) => m.name === volume?.name);
    expect(`${mount?.mountPath}/checksums`).toBe(file);
    expect(mount?.readOnly).toBe(true);
    // The example pins nothing (fails closed), and what it holds parses.
    const parsed = parseChecksums(checksums.data.checksums ?? '');
    expect(parsed).toEqual({ table: new Map(), problems: [] });
  });

  it('lets CAPI reach the hooks and anyone scrape the metrics, nothing else (NetworkPolicy)', async () => {
    const objects = await kustomize('default');
    const policies = find(objects, 'NetworkPolicy');
    expect(policies.map((p) => p.metadata.name).sort()).toEqual([
      'capi-upgrade-orchestrator-api',
      'capi-upgrade-orchestrator-worker',
    ]);
    const api = one(objects, 'NetworkPolicy', 'capi-upgrade-orchestrator-api').spec as {
      policyTypes: string[];
      ingress: { from: unknown[]; ports: { port: string }[] }[];
    };
    expect(api.policyTypes).toEqual(['Ingress']);
    const hooks = api.ingress.find((r) => r.ports.some((p) => p.port === 'webhook-server'));
    expect(hooks?.from).toEqual([
      { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'capi-system' } } },
    ]);
  });
});

describe('the other overlays', () => {
  it('config/temporal-cloud is config/default with Temporal Cloud settings, accepted by the API server', async () => {
    await dryRun('temporal-cloud', testbed().managementKubeconfig);
    const objects = await kustomize('temporal-cloud');
    const settings = configMap(objects, 'capi-upgrade-orchestrator-settings');
    expect(settings.data.TEMPORAL_ADDRESS).toMatch(/\.tmprl\.cloud:7233$/);
    expect(settings.data.TEMPORAL_TLS).toBe('true');
    expect(settings.data.TEMPORAL_API_KEY_FILE).toBe('/etc/temporal/api-key/api-key');
    for (const name of ['capi-upgrade-orchestrator-api', 'capi-upgrade-orchestrator-worker']) {
      const spec = podSpec(one(objects, 'Deployment', name));
      expect(spec.volumes).toEqual(
        expect.arrayContaining([{ name: 'temporal-api-key', secret: { secretName: 'temporal-cloud-api-key' } }]),
      );
    }
  });

  it('config/prometheus (ServiceMonitor, dashboard) is accepted by the API server', async () => {
    await dryRun('prometheus', testbed().managementKubeconfig);
    const objects = await kustomize('prometheus');
    const monitor = one(objects, 'ServiceMonitor').spec as { endpoints: { port: string }[] };
    expect(monitor.endpoints.map((e) => e.port).sort()).toEqual(['ops', 'sdk-metrics']);
  });

  it('config/workload (the workload-cluster role) is accepted by a workload API server', async () => {
    await dryRun('workload', testbed().workloadKubeconfig);
  });
});
