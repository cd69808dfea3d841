// `make dev`'s own management cluster, so that an upgrade can run with no other
// command: the test bed's kube-apiserver + etcd (scripts/testbed.sh, management
// only: Cluster API's, cert-manager's and our CRDs) and Cluster API's managers
// (scripts/capi.sh: core, CABPK, KCP and CAPD's in-memory backend with the
// RuntimeSDK, ClusterTopology and InPlaceUpdates gates), all local processes on
// loopback. etcd keeps its data under the data dir and Ctrl-C only stops the
// processes, so the next `make dev` resumes the clusters and upgrades it held.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createCertificateAuthority, issueCertificate } from './certs.ts';
import { childEnvironment } from '../config/environment.ts';

const ROOT = new URL('../../', import.meta.url).pathname;
const TESTBED = join(ROOT, 'scripts/testbed.sh');
const CAPI = join(ROOT, 'scripts/capi.sh');

/** The subjects of the client certificates CAPI's core and KCP managers present (config/capi-client-certificate). */
export const CAPI_CLIENT_SUBJECTS = {
  capi: 'capi-controller-manager',
  kcp: 'capi-kubeadm-control-plane-controller-manager',
} as const;

/** The ExtensionConfig `make dev` registers: CAPI names our handlers `<handler>.<this>`. */
export const DEV_EXTENSION_NAME = 'capi-upgrade-orchestrator';

/**
 * The ExtensionConfig's settings: in-place updates through a management-cluster upgrader
 * (CAPD's in-memory machines have no host), and the drain leaves CAPD's fake control-plane
 * "static pods" alone, which carry no mirror annotation.
 */
export const IN_MEMORY_EXTENSION_SETTINGS = [
  'nodeUpgradeExecutor=management',
  'drainSkipPodSelector=tier=control-plane,component in (etcd,kube-apiserver,kube-controller-manager,kube-scheduler)',
];

export interface CapiState {
  managementKubeconfig: string;
  kubectl: string;
  capiVersion: string;
  manifestsDir: string;
}

export interface EmbeddedManagement {
  state: CapiState;
  /** Registers (or updates) the extension's ExtensionConfig and waits until CAPI discovered it; the handler names. */
  register(name: string, url: string, caFile: string, settings: string[]): Promise<string[]>;
  stop(): Promise<void>;
}

/** Runs one of the scripts, its progress lines on `progress`; rejects with the script's last lines. */
export function runScript(
  script: string,
  args: string[],
  opts: { env?: Record<string, string>; progress?: (line: string) => void; timeoutMs?: number } = {},
): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', [script, ...args], {
      env: childEnvironment(opts.env),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    const tail: string[] = [];
    let partial = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => {
      const lines = (partial + chunk.toString()).split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) {
        opts.progress?.(line);
        tail.push(line);
        if (tail.length > 20) tail.shift();
      }
    });
    const timer = setTimeout(() => child.kill('SIGTERM'), opts.timeoutMs ?? 30 * 60_000);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolve(stdout);
      else
        reject(
          new Error(
            `${script.slice(ROOT.length)} ${args[0] ?? ''} failed (${signal ?? `exit ${code}`}):\n${[...tail, partial].join('\n')}`,
          ),
        );
    });
  });
}

/**
 * The client certificates CAPI's core and KCP managers present to the extension, made once under
 * `dir` (client-ca.crt, capi/tls.{crt,key}, kcp/tls.{crt,key}): `make dev` requires them as
 * config/default does.
 */
export function ensureCapiClientCertificates(dir: string): { clientCaFile: string; allowedSubjects: string } {
  const clientCaFile = join(dir, 'client-ca.crt');
  const pairs = Object.keys(CAPI_CLIENT_SUBJECTS).map((m) => join(dir, m, 'tls.key'));
  if (!existsSync(clientCaFile) || !pairs.every((f) => existsSync(f))) {
    const ca = createCertificateAuthority('capi-upgrade-orchestrator dev client CA');
    for (const [manager, subject] of Object.entries(CAPI_CLIENT_SUBJECTS)) {
      const pair = issueCertificate(ca, { commonName: subject, usage: 'client' });
      mkdirSync(join(dir, manager), { recursive: true });
      writeFileSync(join(dir, manager, 'tls.crt'), pair.certPem);
      writeFileSync(join(dir, manager, 'tls.key'), pair.keyPem, { mode: 0o600 });
    }
    writeFileSync(clientCaFile, ca.certPem);
  }
  return {
    clientCaFile,
    allowedSubjects: Object.values(CAPI_CLIENT_SUBJECTS)
      .map((s) => `CN=${s}`)
      .join(','),
  };
}

/**
 * Starts the management cluster under `dir` (testbed/, capi/), or starts again the one a
 * previous run left there; `clientCertDir` holds CAPI's client certificates.
 */
export async function startEmbeddedManagement(opts: {
  dir: string;
  clientCertDir: string;
  progress: (line: string) => void;
}): Promise<EmbeddedManagement> {
  const testbedDir = join(opts.dir, 'testbed');
  const capiDir = join(opts.dir, 'capi');
  mkdirSync(testbedDir, { recursive: true });
  const { progress } = opts;
  const resumed = existsSync(join(testbedDir, 'testbed.json'));
  const stopTestbed = () => runScript(TESTBED, ['stop', testbedDir], { progress }).then(() => undefined);
  if (resumed) {
    progress(`[dev] starting the management cluster kept in ${testbedDir}`);
    await runScript(TESTBED, ['start', testbedDir], { progress }).catch(async (err: unknown) => {
      progress(`[dev] it did not start (${String(err).split('\n')[0]}): making a new one`);
      await runScript(TESTBED, ['up', testbedDir], { progress, env: { TESTBED_MANAGEMENT_ONLY: '1' } });
    });
  } else {
    progress('[dev] creating a management cluster (kube-apiserver + etcd)');
    await runScript(TESTBED, ['up', testbedDir], { progress, env: { TESTBED_MANAGEMENT_ONLY: '1' } });
  }
  const stopCapi = () => runScript(CAPI, ['down', capiDir], { progress }).then(() => undefined);
  try {
    progress('[dev] starting Cluster API (core, kubeadm bootstrap and control plane, in-memory infrastructure)');
    await runScript(CAPI, ['up', testbedDir, capiDir], {
      progress,
      env: { CAPI_EXTENSION_CLIENT_CERT_DIR: opts.clientCertDir },
    });
  } catch (err) {
    await stopCapi().catch(() => undefined);
    await stopTestbed().catch(() => undefined);
    throw err;
  }
  const state = JSON.parse(readFileSync(join(capiDir, 'capi.json'), 'utf8')) as CapiState;
  return {
    state,
    register: async (name, url, caFile, settings) =>
      (await runScript(CAPI, ['register-extension', capiDir, name, url, caFile, ...settings], { progress }))
        .split('\n')
        .filter(Boolean),
    stop: async () => {
      await stopCapi().catch((err: unknown) => progress(String(err)));
      await stopTestbed().catch((err: unknown) => progress(String(err)));
    },
  };
}
