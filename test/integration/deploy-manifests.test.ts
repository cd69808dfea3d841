// config/: the kustomize overlays a platform engineer applies. They render with
// the kustomize built into kubectl, the API server accepts every object
// (`kubectl apply --dry-run=server` against the test bed, where Cluster API's,
// cert-manager's and the Prometheus operator's CRDs are installed), and the
// objects fit together: names, ports, probes, certificate and CA injection.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from '@jest/globals';
import { parseAllDocuments, stringify } from 'yaml';
import { parseConfig } from '../../src/config/index.ts';
import { parseChecksums } from '../../src/domain/node-binaries.ts';
import { testbed } from '../../support/testbed-fixtures.ts';

const run = promisify(execFile);
/** Where CAPI's managers that call the hooks run (clusterctl's namespaces). */
const CAPI_NAMESPACES = ['capi-system', 'capi-kubeadm-control-plane-system'];
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
  image?: string;
  command?: string[];
  args?: string[];
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
  volumes?: {
    name: string;
    secret?: { secretName: string; items?: { key: string; path: string }[] };
    configMap?: { name: string };
  }[];
  affinity?: unknown;
}

async function kustomize(dir: string): Promise<K8sObject[]> {
  const path = dir.startsWith('/') ? dir : `${ROOT}config/${dir}`;
  const { stdout } = await run(testbed().kubectl, ['kustomize', path], { maxBuffer: 16 << 20 });
  return parseAllDocuments(stdout).map((d) => d.toJSON() as K8sObject);
}

/**
 * The namespaces config/default writes into besides its own exist wherever cert-manager and
 * CAPI are installed (a dry run into a missing namespace is refused): make them on the test bed.
 */
async function foreignNamespaces(kubeconfig: string): Promise<void> {
  for (const ns of ['cert-manager', ...CAPI_NAMESPACES]) {
    const { stdout } = await run(testbed().kubectl, [
      '--kubeconfig',
      kubeconfig,
      'get',
      'namespace',
      ns,
      '--ignore-not-found',
      '-o',
      'name',
    ]);
    if (stdout.trim() === '') await run(testbed().kubectl, ['--kubeconfig', kubeconfig, 'create', 'namespace', ns]);
  }
}

async function dryRun(dir: string, kubeconfig: string): Promise<string> {
  if (dir === 'default' || dir === 'temporal-cloud') await foreignNamespaces(kubeconfig);
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
const envOf = (c: Container): Record<string, string> =>
  Object.fromEntries((c.env ?? []).filter((e) => e.value !== undefined).map((e) => [e.name, e.value!]));
/** The Secret mounted at `dir` in the pod's (first) container. */
const secretAt = (spec: PodSpec, dir: string) => {
  const mount = spec.containers[0]!.volumeMounts?.find((m) => m.mountPath === dir);
  return spec.volumes?.find((v) => v.name === mount?.name)?.secret;
};

/** Objects config/default puts outside its own namespace: the client CA and CAPI's client certificates. */
const elsewhere = (o: K8sObject) =>
  o.kind === 'Certificate' && ['cert-manager', ...CAPI_NAMESPACES].includes(o.metadata.namespace ?? '');
interface CertificateSpec {
  commonName?: string;
  isCA?: boolean;
  secretName: string;
  usages?: string[];
  issuerRef: { kind: string; name: string };
}
const certSpec = (o: K8sObject) => o.spec as unknown as CertificateSpec;

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
        ![
          'Namespace',
          'CustomResourceDefinition',
          'ClusterRole',
          'ClusterRoleBinding',
          'ExtensionConfig',
          'ClusterIssuer',
        ].includes(x.kind) && !elsewhere(x),
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

    const cert = one(objects, 'Certificate', 'capi-upgrade-orchestrator-serving-cert');
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

  it('requires a client certificate from a CA of its own, which cert-manager issues to CAPI core and KCP', async () => {
    const objects = await kustomize('default');
    const ns = one(objects, 'Namespace').metadata.name;
    const api = podSpec(one(objects, 'Deployment', 'capi-upgrade-orchestrator-api'));
    const env = envOf(api.containers[0]!);
    // The api's own parser reads the settings: mutual TLS on, an allow-list of subjects.
    const server = parseConfig(env).server;
    expect(server.clientCaFile).toBeDefined();
    expect(server.insecureHttp).toBe(false);
    const allowed = server.clientAllowedSubjects;
    expect(allowed?.commonNames.length).toBeGreaterThan(0);

    // The CA file is the ca.crt (alone) of a certificate from the client CA's issuer.
    const caSecret = secretAt(api, dirname(server.clientCaFile!));
    expect(caSecret?.items).toEqual([{ key: 'ca.crt', path: server.clientCaFile!.split('/').at(-1) }]);
    const bundle = find(objects, 'Certificate').find(
      (c) => c.metadata.namespace === ns && certSpec(c).secretName === caSecret?.secretName,
    );
    expect(bundle).toBeDefined();
    const issuerRef = certSpec(bundle!).issuerRef;
    expect(issuerRef.kind).toBe('ClusterIssuer');
    // ...which cannot authenticate: no client auth usage, a subject on no list.
    expect(certSpec(bundle!).usages ?? []).not.toContain('client auth');
    expect(allowed?.commonNames).not.toContain(certSpec(bundle!).commonName);

    // The issuer is a CA whose key is a self-signed CA certificate in cert-manager's namespace.
    const issuer = one(objects, 'ClusterIssuer', issuerRef.name).spec as { ca?: { secretName: string } };
    const ca = find(objects, 'Certificate').find(
      (c) => c.metadata.namespace === 'cert-manager' && certSpec(c).secretName === issuer.ca?.secretName,
    );
    expect(certSpec(ca!).isCA).toBe(true);
    const root = one(objects, 'ClusterIssuer', certSpec(ca!).issuerRef.name).spec as { selfSigned?: object };
    expect(root.selfSigned).toEqual({});

    // One client certificate per calling CAPI manager, in its namespace, from that issuer, on the list.
    const clients = find(objects, 'Certificate').filter((c) => CAPI_NAMESPACES.includes(c.metadata.namespace ?? ''));
    expect(clients.map((c) => c.metadata.namespace).sort()).toEqual([...CAPI_NAMESPACES].sort());
    for (const c of clients) {
      expect(certSpec(c).issuerRef).toEqual({ group: 'cert-manager.io', kind: 'ClusterIssuer', name: issuerRef.name });
      expect(certSpec(c).usages).toContain('client auth');
      expect(certSpec(c).secretName).toBe('capi-upgrade-orchestrator-client-cert');
      expect(allowed?.commonNames).toContain(certSpec(c).commonName);
    }
    expect(objects.filter(elsewhere)).toHaveLength(3);
  });

  it('gives the api and the worker Temporal credentials of their own', async () => {
    const objects = await kustomize('default');
    const settings = configMap(objects, 'capi-upgrade-orchestrator-settings');
    const { temporal } = parseConfig(settings.data);
    expect(temporal.tls).toMatchObject({
      certFile: expect.any(String),
      keyFile: expect.any(String),
      caFile: expect.any(String),
    });
    const dir = dirname(temporal.tls!.certFile!);
    const secrets = ['capi-upgrade-orchestrator-api', 'capi-upgrade-orchestrator-worker'].map(
      (name) => secretAt(podSpec(one(objects, 'Deployment', name)), dir)?.secretName,
    );
    expect(secrets).toEqual(['capi-upgrade-orchestrator-api-temporal', 'capi-upgrade-orchestrator-worker-temporal']);
  });

  it('runs the worker versioned and makes its build current with a Job of the same image, deployment and identity', async () => {
    const objects = await kustomize('default');
    const settings = configMap(objects, 'capi-upgrade-orchestrator-settings');
    const worker = podSpec(one(objects, 'Deployment', 'capi-upgrade-orchestrator-worker'));
    const job = podSpec(one(objects, 'Job', 'capi-upgrade-orchestrator-promote-worker'));
    const [w, j] = [worker.containers[0]!, job.containers[0]!];
    // The image stamps the build id; both name the same Worker Deployment and pass the settings' checks.
    const versioning = (c: Container) =>
      parseConfig({ ...settings.data, ...envOf(c), TEMPORAL_WORKER_BUILD_ID: 'b1' }).workerVersioning;
    expect(versioning(w)).toEqual({ deploymentName: 'capi-upgrade-orchestrator', buildId: 'b1' });
    expect(versioning(j)).toEqual(versioning(w));
    expect(j.image).toBe(w.image);
    expect(j.command).toEqual(['node', 'dist/ops/promote-worker-version.js', '15m']);
    const dir = dirname(parseConfig(settings.data).temporal.tls!.certFile!);
    expect(secretAt(job, dir)?.secretName).toBe(secretAt(worker, dir)?.secretName);
    expect(j.securityContext).toMatchObject({ readOnlyRootFilesystem: true, allowPrivilegeEscalation: false });
    // A stopping worker waits for its pinned runs, then 30 s for its activities: the kubelet must wait longer.
    const drainMs = parseConfig({ ...settings.data, ...envOf(w) }).workerDrainTimeoutMs;
    expect(drainMs).toBeGreaterThan(0);
    const grace = (worker as PodSpec & { terminationGracePeriodSeconds?: number }).terminationGracePeriodSeconds ?? 30;
    expect(grace * 1000).toBeGreaterThan(drainMs + 30_000);
  });

  it('admits CAPI to the hook port and only the monitoring namespace to the metrics ports (NetworkPolicy)', async () => {
    const objects = await kustomize('default');
    type Peer = { namespaceSelector?: { matchLabels?: Record<string, string> }; podSelector?: unknown };
    type Policy = {
      podSelector: { matchLabels: Record<string, string> };
      policyTypes: string[];
      ingress: { from?: Peer[]; ports?: { port: string }[] }[];
    };
    const policies = find(objects, 'NetworkPolicy').map((p) => p.spec as unknown as Policy);
    /** The peers admitted to a port of a Deployment's pods, over every policy that selects them. */
    const admitted = (deployment: string, port: string) => {
      const d = one(objects, 'Deployment', deployment).spec as {
        template: { metadata: { labels: Record<string, string> } };
      };
      const labels = d.template.metadata.labels;
      const selecting = policies.filter((p) =>
        Object.entries(p.podSelector.matchLabels).every(([k, v]) => labels[k] === v),
      );
      expect(selecting.length).toBeGreaterThan(0);
      for (const p of selecting) expect(p.policyTypes).toContain('Ingress');
      const rules = selecting.flatMap((p) => p.ingress).filter((r) => !r.ports || r.ports.some((x) => x.port === port));
      // A rule with no `from` admits everyone; an empty namespaceSelector, every namespace.
      for (const r of rules) expect(r.from?.length).toBeGreaterThan(0);
      return rules
        .flatMap((r) => r.from!)
        .map((peer) => {
          expect(peer.podSelector).toBeUndefined();
          return peer.namespaceSelector?.matchLabels?.['kubernetes.io/metadata.name'] ?? 'ANY';
        })
        .sort();
    };
    expect(admitted('capi-upgrade-orchestrator-api', 'webhook-server')).toEqual([...CAPI_NAMESPACES].sort());
    const monitoring = admitted('capi-upgrade-orchestrator-api', 'ops');
    expect(monitoring).toHaveLength(1);
    expect(monitoring[0]).not.toBe('ANY');
    expect(admitted('capi-upgrade-orchestrator-worker', 'ops')).toEqual(monitoring);
    expect(admitted('capi-upgrade-orchestrator-worker', 'sdk-metrics')).toEqual(monitoring);
    // Set in one place: one policy names the monitoring namespace.
    expect(policies.filter((p) => JSON.stringify(p).includes(`"${monitoring[0]}"`))).toHaveLength(1);
  });
});

describe('config/capi-client-certificate', () => {
  it("mounts CAPI's client certificate into core CAPI and KCP and passes it with the runtime-extension flags", async () => {
    // Stand-ins for the Deployments clusterctl renders (names, namespaces, the manager container first).
    const dir = mkdtempSync(join(tmpdir(), 'capi-uo-component-'));
    try {
      const deployments = [
        ['capi-controller-manager', 'capi-system'],
        ['capi-kubeadm-control-plane-controller-manager', 'capi-kubeadm-control-plane-system'],
      ].map(([name, namespace]) => ({
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: { name, namespace },
        spec: {
          selector: { matchLabels: { 'cluster.x-k8s.io/provider': name } },
          template: {
            metadata: { labels: { 'cluster.x-k8s.io/provider': name } },
            spec: {
              containers: [
                {
                  name: 'manager',
                  image: 'registry.k8s.io/cluster-api/cluster-api-controller:v1.14.0',
                  args: ['--leader-elect', '--diagnostics-address=:8443'],
                  volumeMounts: [{ name: 'cert', mountPath: '/tmp/k8s-webhook-server/serving-certs', readOnly: true }],
                },
              ],
              volumes: [{ name: 'cert', secret: { secretName: `${name}-webhook-service-cert` } }],
            },
          },
        },
      }));
      writeFileSync(join(dir, 'capi.yaml'), deployments.map((d) => stringify(d)).join('---\n'));
      writeFileSync(
        join(dir, 'kustomization.yaml'),
        stringify({
          resources: ['capi.yaml'],
          components: [relative(dir, `${ROOT}config/capi-client-certificate`)],
        }),
      );
      const patched = await kustomize(dir);
      const defaults = await kustomize('default');
      expect(patched).toHaveLength(2);
      for (const d of patched) {
        const spec = podSpec(d);
        const args = spec.containers[0]!.args ?? [];
        expect(args.slice(0, 2)).toEqual(['--leader-elect', '--diagnostics-address=:8443']);
        const flag = (name: string) => args.find((a) => a.startsWith(`--${name}=`))?.split('=')[1];
        const certFile = flag('runtime-extension-client-cert-file');
        const keyFile = flag('runtime-extension-client-key-file');
        expect(certFile?.endsWith('/tls.crt')).toBe(true);
        expect(keyFile).toBe(certFile?.replace(/tls\.crt$/, 'tls.key'));
        // The Secret config/default's Certificate for this namespace writes.
        const issued = find(defaults, 'Certificate').find((c) => c.metadata.namespace === d.metadata.namespace);
        expect(secretAt(spec, dirname(certFile!))?.secretName).toBe(certSpec(issued!).secretName);
        expect(spec.containers[0]!.volumeMounts?.find((m) => m.mountPath === dirname(certFile!))?.readOnly).toBe(true);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('the other overlays', () => {
  it('config/temporal-cloud is config/default with Temporal Cloud settings, accepted by the API server', async () => {
    await dryRun('temporal-cloud', testbed().managementKubeconfig);
    const objects = await kustomize('temporal-cloud');
    const settings = configMap(objects, 'capi-upgrade-orchestrator-settings');
    expect(settings.data.TEMPORAL_ADDRESS).toMatch(/\.tmprl\.cloud:7233$/);
    expect(settings.data.TEMPORAL_TLS).toBe('true');
    // An API key per role, from a Secret per role; no client certificate (config/default's are unset).
    const { temporal } = parseConfig(settings.data);
    expect(temporal.tls).toEqual({});
    expect(temporal.apiKeyFile).toBeDefined();
    const secrets = ['capi-upgrade-orchestrator-api', 'capi-upgrade-orchestrator-worker'].map(
      (name) => secretAt(podSpec(one(objects, 'Deployment', name)), dirname(temporal.apiKeyFile!))?.secretName,
    );
    expect(secrets).toEqual(['capi-upgrade-orchestrator-api-temporal', 'capi-upgrade-orchestrator-worker-temporal']);
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
