// The product as a platform team installs it: the image `make image` builds, pushed to the
// site's registry, installed by the real `clusterctl init --runtime-extension` from
// `make release`'s components into a kubeadm cluster of real nodes (a control plane and a
// worker, kube-proxy and CoreDNS running), with the Secrets cert-manager and the team would
// have made. Temporal is the run's dev server behind an mTLS front on the host, which the
// pods reach through a relay on their site gateway, as they would reach a Temporal outside
// their cluster.
//   (a) every pod Ready under its own securityContext and within its memory limit, the
//       promote Job done, the ops endpoints answering from inside the cluster;
//   (b) Discovery through the hook Service for a pod with CAPI's client certificate, and a
//       pod of another namespace without one refused in the TLS handshake;
//   (c) deleted pods replaced; the PodDisruptionBudget holding a drain;
//   (e) the serving certificate rotated in its Secret, served without a restart.
import { randomBytes, X509Certificate } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { assembleImage } from '../../scripts/image.ts';
import { prepareInputs } from '../../scripts/image/inputs.ts';
import { pushImage } from '../../scripts/oci/push.ts';
import { NAMESPACE } from '../../scripts/release.ts';
import { HOOKS_API_VERSION } from '../../src/api/hooks/contract.ts';
import { issueCertificate } from '../../src/local/certs.ts';
import { REGISTRY_HOST, REGISTRY_SITE_PORT, type KubeadmCluster } from '../../support/nodes/kubeadm-cluster.ts';
import { SITE_GATEWAY } from '../../support/nodes/network.ts';
import { startNodeSite, type NodeSite } from '../../support/nodes/node-site.ts';
import { clusterctlOn, run } from '../support/clusterctl.ts';
import { testPki, testServingCertificate } from '../support/pki.ts';
import { requireEnv } from '../support/services.ts';
import { startTlsProxy, type TlsProxy } from '../support/tls-proxy.ts';

const MINUTE = 60_000;
const VERSION = 'v0.9.0';
const REPOSITORY = 'capi-upgrade-orchestrator';
/** Where the pods dial Temporal: the site gateway, relayed to the mTLS front on the host. */
const TEMPORAL_SITE_PORT = 7233;
const SERVICE = 'capi-upgrade-orchestrator-webhook-service';
const IMAGE = `${REGISTRY_HOST}:${REGISTRY_SITE_PORT}/${REPOSITORY}:${VERSION}`;
const DISCOVERY_PATH = `/${HOOKS_API_VERSION}/discovery`;

interface Pod {
  metadata: { name: string; labels?: Record<string, string> };
  spec: { nodeName?: string; containers: { name: string; resources?: { limits?: Record<string, string> } }[] };
  status: {
    phase: string;
    podIP?: string;
    conditions?: { type: string; status: string }[];
    containerStatuses?: { name: string; ready: boolean; restartCount: number; containerID?: string }[];
  };
}

let dir: string;
let site: NodeSite;
let proxy: TlsProxy;
let cluster: KubeadmCluster;
let kubeconfigFile: string;
let kubectlBinary: string;
const took: Record<string, number> = {};

const kubectl = async (args: string[], input?: string) =>
  (await run(kubectlBinary, ['--kubeconfig', kubeconfigFile, ...args], input === undefined ? {} : { input })).stdout;
const pods = async (component?: string): Promise<Pod[]> =>
  (
    JSON.parse(
      await kubectl([
        'get',
        'pods',
        '-n',
        NAMESPACE,
        '-o',
        'json',
        ...(component ? ['-l', `app.kubernetes.io/component=${component}`] : []),
      ]),
    ) as { items: Pod[] }
  ).items;
const ready = (p: Pod) => p.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;
/** `node -e` in a pod's container: the image has no shell, but it has its own node. */
const nodeIn = (pod: string, container: string, script: string) =>
  kubectl(['exec', '-n', NAMESPACE, pod, '-c', container, '--', 'node', '-e', script]);

/** Polls until `ok`; on timeout fails with what `describe` says about the cluster. */
async function eventually<T>(
  what: string,
  fn: () => Promise<T>,
  ok: (v: T) => boolean,
  timeoutMs: number,
  describe: () => Promise<string> = async () => '',
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (ok(v)) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}:\n${await describe()}`);
    await new Promise((r) => setTimeout(r, 2_000));
  }
}

/** What cert-manager's Certificate for the hook Service holds. */
const servingCertificate = () =>
  issueCertificate(testPki().ca, {
    commonName: `${SERVICE}.${NAMESPACE}.svc`,
    dnsNames: [`${SERVICE}.${NAMESPACE}.svc`, `${SERVICE}.${NAMESPACE}.svc.cluster.local`],
    usage: 'server',
  });
const applyList = (items: object[]) =>
  kubectl(['apply', '-f', '-'], JSON.stringify({ apiVersion: 'v1', kind: 'List', items }));

function secret(name: string, data: Record<string, string>): object {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name, namespace: NAMESPACE },
    type: 'Opaque',
    stringData: data,
  };
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'capi-uo-shipped-'));
  kubectlBinary = requireEnv('KUBECTL');
  const pki = testPki();
  site = await startNodeSite(join(dir, 'site'), pki.ca);

  let began = Date.now();
  const image = assembleImage(prepareInputs(join(dir, 'image')), {
    version: VERSION,
    buildId: `as-shipped-${randomBytes(3).toString('hex')}`,
    revision: '0000000000000000000000000000000000000000',
  });
  const pushed = await pushImage({
    url: site.registry.url,
    caPem: site.registry.caPem,
    repository: REPOSITORY,
    tag: VERSION,
    image,
  });
  took.image = (Date.now() - began) / 1000;
  expect(pushed.digest).toMatch(/^sha256:/);

  // Temporal as a team runs it outside the cluster: TLS with a client certificate.
  proxy = await startTlsProxy({
    target: requireEnv('TEMPORAL_ADDRESS'),
    ...(({ certPem, keyPem }) => ({ cert: certPem, key: keyPem }))(
      testServingCertificate({ ipAddresses: [SITE_GATEWAY] }),
    ),
    clientCa: pki.clientCa.certPem,
  });
  began = Date.now();
  cluster = await site.cluster(
    [
      { name: 'cp', role: 'control-plane' },
      { name: 'w1', role: 'worker' },
    ],
    { relays: [{ sitePort: TEMPORAL_SITE_PORT, hostPort: Number(proxy.address.split(':').at(-1)) }], services: true },
  );
  took.cluster = (Date.now() - began) / 1000;
  kubeconfigFile = join(dir, 'kubeconfig');
  writeFileSync(kubeconfigFile, cluster.kubeconfig, { mode: 0o600 });

  // A management cluster has Cluster API's and cert-manager's CRDs before the extension comes.
  began = Date.now();
  await kubectl(['apply', '--server-side', '-f', requireEnv('CAPI_CRDS_DIR'), '-f', requireEnv('DEPLOY_CRDS_DIR')]);
  await kubectl(['wait', '--for', 'condition=Established', 'crd', '--all', '--timeout', '120s']);
  // What cert-manager and the team would have made in the provider's namespace.
  const serving = servingCertificate();
  const temporalIdentity = { 'tls.crt': pki.client.certPem, 'tls.key': pki.client.keyPem, 'ca.crt': pki.ca.certPem };
  await kubectl(['create', 'namespace', NAMESPACE]);
  await applyList([
    secret('capi-upgrade-orchestrator-webhook-service-cert', {
      'tls.crt': serving.certPem,
      'tls.key': serving.keyPem,
      'ca.crt': pki.ca.certPem,
    }),
    secret('capi-upgrade-orchestrator-client-ca-bundle', { 'ca.crt': pki.clientCa.certPem }),
    secret('capi-upgrade-orchestrator-api-temporal', temporalIdentity),
    secret('capi-upgrade-orchestrator-worker-temporal', temporalIdentity),
  ]);

  const cctl = await clusterctlOn({ dir: join(dir, 'clusterctl'), kubeconfig: kubeconfigFile, kubectlBinary });
  await cctl.release(VERSION, IMAGE);
  await cctl.clusterctl(['init', '--runtime-extension', `capi-upgrade-orchestrator:${VERSION}`], {
    CAPI_UPGRADE_TEMPORAL_ADDRESS: `${SITE_GATEWAY}:${TEMPORAL_SITE_PORT}`,
    CAPI_UPGRADE_TEMPORAL_NAMESPACE: requireEnv('TEMPORAL_NAMESPACE'),
    CAPI_UPGRADE_TEMPORAL_TASK_QUEUE: `as-shipped-${randomBytes(3).toString('hex')}`,
  });
  await eventually(
    'the api and worker pods Ready',
    async () => {
      const all = await pods();
      return all.filter((p) => p.metadata.labels?.['app.kubernetes.io/component'] !== 'promote-worker');
    },
    (ps) => ps.length === 3 && ps.every(ready),
    10 * MINUTE,
    async () =>
      (await kubectl(['get', 'pods', '-A', '-o', 'wide'])) +
      (await kubectl(['describe', 'pods', '-n', NAMESPACE])) +
      (await kubectl([
        'logs',
        '-n',
        NAMESPACE,
        '-l',
        'app.kubernetes.io/name=capi-upgrade-orchestrator',
        '--tail=30',
        '--prefix',
      ]).catch(String)),
  );
  took.ready = (Date.now() - began) / 1000;
}, 40 * MINUTE);

afterAll(async () => {
  console.log(`as shipped: ${JSON.stringify(took)}`);
  if (process.env.NODES_HOLD_MS) {
    console.log(`holding: KUBECONFIG=${kubeconfigFile}`);
    await new Promise((r) => setTimeout(r, Number(process.env.NODES_HOLD_MS)));
  }
  await cluster?.stop();
  await proxy?.close();
  await site?.stop();
  rmSync(dir, { recursive: true, force: true });
}, 60 * MINUTE);

describe('(a) the extension as shipped, on real nodes', () => {
  it(
    'runs two api replicas and the worker Ready, none restarted, and the promote Job completes',
    async () => {
      const api = await pods('api');
      const worker = await pods('worker');
      expect(api).toHaveLength(2);
      expect(worker).toHaveLength(1);
      for (const p of [...api, ...worker]) {
        expect(ready(p)).toBe(true);
        expect(p.status.containerStatuses?.map((c) => c.restartCount)).toEqual([0]);
      }
      await eventually(
        'the promote Job to succeed',
        async () =>
          (
            JSON.parse(
              await kubectl(['get', 'job', '-n', NAMESPACE, 'capi-upgrade-orchestrator-promote-worker', '-o', 'json']),
            ) as {
              status: { succeeded?: number };
            }
          ).status,
        (s) => (s.succeeded ?? 0) === 1,
        5 * MINUTE,
        () =>
          kubectl(['logs', '-n', NAMESPACE, 'job/capi-upgrade-orchestrator-promote-worker', '--tail=40']).catch(String),
      );
    },
    10 * MINUTE,
  );

  it(
    'runs each container as uid 1000, read-only, without privileges or capabilities, under seccomp',
    async () => {
      for (const [component, container] of [
        ['api', 'api'],
        ['worker', 'worker'],
      ] as const) {
        const [pod] = await pods(component);
        const out = await nodeIn(
          pod!.metadata.name,
          container,
          `const fs = require('node:fs');
         const status = Object.fromEntries(fs.readFileSync('/proc/self/status', 'utf8').split('\\n')
           .map((l) => l.split(':\\t')).filter((kv) => kv.length === 2));
         let rootWrite = 'written';
         try { fs.writeFileSync('/app/probe', 'x'); } catch (e) { rootWrite = e.code; }
         fs.writeFileSync('/tmp/probe', 'x');
         console.log(JSON.stringify({ uid: process.getuid(), gid: process.getgid(), rootWrite,
           noNewPrivs: status.NoNewPrivs, seccomp: status.Seccomp, capEff: status.CapEff, capBnd: status.CapBnd }));`,
        );
        expect({ component, ...JSON.parse(out) }).toEqual({
          component,
          uid: 1000,
          gid: 1000,
          rootWrite: 'EROFS',
          noNewPrivs: '1',
          seccomp: '2',
          capEff: '0000000000000000',
          capBnd: '0000000000000000',
        });
      }
    },
    10 * MINUTE,
  );

  it(
    'keeps each container within its memory limit',
    async () => {
      const usage: Record<string, number> = {};
      for (const p of [...(await pods('api')), ...(await pods('worker'))]) {
        const c = p.status.containerStatuses![0]!;
        const id = c.containerID!.replace(/^containerd:\/\//, '');
        const stats = JSON.parse(await cluster.nodes[p.spec.nodeName!]!.sh(`crictl stats -o json --id ${id}`)) as {
          stats: { memory: { workingSetBytes: { value: string } } }[];
        };
        const bytes = Number(stats.stats[0]!.memory.workingSetBytes.value);
        usage[p.metadata.name] = Math.round(bytes / 2 ** 20);
        const limit = p.spec.containers[0]!.resources!.limits!.memory!;
        expect(limit).toBe('512Mi');
        expect(bytes).toBeGreaterThan(0);
        expect(bytes).toBeLessThan(512 * 2 ** 20);
      }
      console.log(`working set, MiB: ${JSON.stringify(usage)}`);
    },
    10 * MINUTE,
  );

  it(
    'answers /livez, /readyz, /version and /metrics on every ops port from inside the cluster',
    async () => {
      const [from] = await pods('api');
      const targets = [...(await pods('api')), ...(await pods('worker'))].map((p) => p.status.podIP!);
      const out = await nodeIn(
        from!.metadata.name,
        'api',
        `(async () => {
         const out = {};
         for (const ip of ${JSON.stringify(targets)})
           for (const path of ['/livez', '/readyz', '/version', '/metrics']) {
             const r = await fetch('http://' + ip + ':8080' + path);
             const text = await r.text();
             out[ip + path] = r.status + ' ' + text.slice(0, 200).replace(/\\s+/g, ' ');
           }
         console.log(JSON.stringify(out));
       })();`,
      );
      const answers = JSON.parse(out) as Record<string, string>;
      for (const ip of targets) {
        expect(answers[`${ip}/livez`]).toMatch(/^200 /);
        expect(answers[`${ip}/readyz`]).toMatch(/^200 /);
        expect(answers[`${ip}/version`]).toContain(VERSION);
        expect(answers[`${ip}/metrics`]).toMatch(/^200 .*# (HELP|TYPE) /);
      }
    },
    10 * MINUTE,
  );
});

/**
 * A pod of our own image in `namespace` that calls Discovery through the hook Service as
 * CAPI's controllers do (the Service's DNS name, port 443), trusting `/tls/ca.crt` and
 * presenting `/tls/tls.crt` when its Secret has one; prints what it got.
 */
async function callThroughService(
  namespace: string,
  secretData: Record<string, string>,
): Promise<{
  status?: number;
  body?: { status?: string; handlers?: { name: string; requestHook: { hook: string } }[] };
  error?: string;
}> {
  const name = `caller-${randomBytes(3).toString('hex')}`;
  const script = `const https = require('node:https'), fs = require('node:fs');
    const read = (f) => { try { return fs.readFileSync(f); } catch { return undefined; } };
    const req = https.request({ host: '${SERVICE}.${NAMESPACE}.svc', port: 443, path: '${DISCOVERY_PATH}',
      method: 'POST', ca: read('/tls/ca.crt'), cert: read('/tls/tls.crt'), key: read('/tls/tls.key'),
      headers: { 'content-type': 'application/json' } }, (res) => {
        let d = ''; res.on('data', (c) => (d += c));
        res.on('end', () => console.log(JSON.stringify({ status: res.statusCode, body: JSON.parse(d) })));
      });
    req.on('error', (e) => console.log(JSON.stringify({ error: e.code || e.message })));
    req.end(JSON.stringify({ apiVersion: '${HOOKS_API_VERSION}', kind: 'DiscoveryRequest' }));`;
  await applyList([
    { ...secret(name, secretData), metadata: { name, namespace } },
    {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name, namespace },
      spec: {
        restartPolicy: 'Never',
        automountServiceAccountToken: false,
        securityContext: { runAsNonRoot: true, runAsUser: 1000, seccompProfile: { type: 'RuntimeDefault' } },
        containers: [
          {
            name: 'call',
            image: IMAGE,
            command: ['node', '-e', script],
            securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } },
            volumeMounts: [{ name: 'tls', mountPath: '/tls', readOnly: true }],
          },
        ],
        volumes: [{ name: 'tls', secret: { secretName: name } }],
      },
    },
  ]);
  await eventually(
    `pod ${namespace}/${name} to finish`,
    () => kubectl(['get', 'pod', '-n', namespace, name, '-o', 'jsonpath={.status.phase}']),
    (phase) => phase === 'Succeeded' || phase === 'Failed',
    3 * MINUTE,
    () => kubectl(['describe', 'pod', '-n', namespace, name]),
  );
  const out = await kubectl(['logs', '-n', namespace, name]);
  await kubectl(['delete', 'pod,secret', '-n', namespace, name, '--wait=false']);
  return JSON.parse(out.trim().split('\n').at(-1)!) as never;
}

describe('(b) hooks through the Service', () => {
  it(
    'answers Discovery through the Service to a pod presenting CAPI client certificate',
    async () => {
      const pki = testPki();
      await kubectl(['create', 'namespace', 'capi-system']).catch(() => undefined);
      const answer = await callThroughService('capi-system', {
        'ca.crt': pki.ca.certPem,
        'tls.crt': pki.client.certPem,
        'tls.key': pki.client.keyPem,
      });
      expect(answer.error).toBeUndefined();
      expect(answer.status).toBe(200);
      expect(answer.body?.status).toBe('Success');
      expect(answer.body?.handlers?.map((h) => h.requestHook.hook)).toEqual(
        expect.arrayContaining(['BeforeClusterUpgrade', 'AfterControlPlaneUpgrade', 'UpdateMachine']),
      );
    },
    10 * MINUTE,
  );

  it(
    'refuses, in the TLS handshake, a pod of another namespace without a client certificate',
    async () => {
      await kubectl(['create', 'namespace', 'tenant']);
      const answer = await callThroughService('tenant', { 'ca.crt': testPki().ca.certPem });
      expect(answer).toEqual({ error: 'ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED' });
    },
    10 * MINUTE,
  );
});

describe('(e) the serving certificate rotated', () => {
  it(
    'is served by both api replicas without a restart, as cert-manager rotates it in its Secret',
    async () => {
      const pki = testPki();
      const api = await pods('api');
      const restarts = () => api.map((p) => p.status.containerStatuses![0]!.restartCount);
      const servedSerials = async () => {
        const out = await nodeIn(
          api[0]!.metadata.name,
          'api',
          `const tls = require('node:tls');
         (async () => {
           const out = {};
           for (const ip of ${JSON.stringify(api.map((p) => p.status.podIP!))})
             out[ip] = await new Promise((resolve) => {
               const s = tls.connect({ host: ip, port: 9443, servername: '${SERVICE}.${NAMESPACE}.svc',
                 ca: ${JSON.stringify(pki.ca.certPem)}, cert: ${JSON.stringify(pki.client.certPem)},
                 key: ${JSON.stringify(pki.client.keyPem)} }, () => {
                   resolve(s.getPeerCertificate().serialNumber.toLowerCase()); s.destroy(); });
               s.on('error', (e) => resolve('error ' + e.code));
             });
           console.log(JSON.stringify(out));
         })();`,
        );
        return Object.values(JSON.parse(out) as Record<string, string>);
      };
      const before = await servedSerials();
      expect(new Set(before).size).toBe(1);
      const rotated = servingCertificate();
      const serial = new X509Certificate(rotated.certPem).serialNumber.toLowerCase();
      expect(before).not.toContain(serial);
      const began = Date.now();
      await applyList([
        secret('capi-upgrade-orchestrator-webhook-service-cert', {
          'tls.crt': rotated.certPem,
          'tls.key': rotated.keyPem,
          'ca.crt': pki.ca.certPem,
        }),
      ]);
      // The kubelet updates a Secret volume within its sync period and cache TTL (about a minute each).
      await eventually(
        'both replicas serving the rotated certificate',
        servedSerials,
        (s) => s.every((x) => x === serial),
        4 * MINUTE,
      );
      took.certificateRotation = (Date.now() - began) / 1000;
      const now = (await pods('api')).map((p) => p.status.containerStatuses![0]!.restartCount);
      expect(now).toEqual(restarts());
      expect(now).toEqual([0, 0]);
    },
    10 * MINUTE,
  );
});

describe('(c) pods deleted and nodes drained', () => {
  const apiReady = async () => (await pods('api')).filter(ready);

  it(
    'replaces a deleted api replica and a deleted worker, each Ready again',
    async () => {
      const [api] = await pods('api');
      const [worker] = await pods('worker');
      let began = Date.now();
      await kubectl(['delete', 'pod', '-n', NAMESPACE, api!.metadata.name]);
      took.apiDeleted = (Date.now() - began) / 1000;
      began = Date.now();
      await kubectl(['delete', 'pod', '-n', NAMESPACE, worker!.metadata.name]);
      took.workerDeleted = (Date.now() - began) / 1000;
      const after = await eventually(
        'two api replicas and a worker Ready again',
        async () => [...(await pods('api')), ...(await pods('worker'))],
        (ps) => ps.length === 3 && ps.every(ready),
        5 * MINUTE,
        () => kubectl(['get', 'pods', '-n', NAMESPACE, '-o', 'wide']),
      );
      const names = after.map((p) => p.metadata.name);
      expect(names).not.toContain(api!.metadata.name);
      expect(names).not.toContain(worker!.metadata.name);
    },
    10 * MINUTE,
  );

  it(
    'holds the PodDisruptionBudget: a drain that would leave no api replica Ready waits',
    async () => {
      const nodeOf = async () =>
        Object.fromEntries((await pods('api')).map((p) => [p.metadata.name, p.spec.nodeName!]));
      const seen: number[] = [];
      let watching = true;
      const watcher = (async () => {
        while (watching) {
          seen.push((await apiReady()).length);
          await new Promise((r) => setTimeout(r, 1_000));
        }
      })();
      try {
        // Both nodes cordoned: an evicted replica has nowhere to go until one comes back.
        await kubectl(['cordon', 'cp', 'w1']);
        const drain = (node: string, timeout: string) =>
          kubectl(['drain', node, '--ignore-daemonsets', '--delete-emptydir-data', `--timeout=${timeout}`]);
        const placed = Object.values(await nodeOf());
        // The node of the last Ready replica: one node holding both, or the second once the
        // first one's replica was evicted (the other was Ready, so the budget allowed it).
        let last = placed[0]!;
        if (placed[1] !== last) {
          await drain(last, '3m');
          last = placed[1]!;
        }
        const free = last === 'cp' ? 'w1' : 'cp';
        const blocked = await drain(last, '30s').then(
          () => 'drained',
          (err: unknown) => String(err),
        );
        expect(blocked).toMatch(/disruption budget/);
        expect((await apiReady()).length).toBe(1);
        // The other node back: the evicted replica runs there, and the drain goes through.
        await kubectl(['uncordon', free]);
        await drain(last, '3m');
        await eventually('two api replicas Ready', apiReady, (ps) => ps.length === 2, 3 * MINUTE);
        expect(new Set(Object.values(await nodeOf()))).toEqual(new Set([free]));
      } finally {
        watching = false;
        await watcher;
        await kubectl(['uncordon', 'cp', 'w1']).catch(() => undefined);
      }
      expect(seen.length).toBeGreaterThan(10);
      expect(Math.min(...seen)).toBeGreaterThanOrEqual(1);
    },
    10 * MINUTE,
  );
});
