// The real-CAPI tier's services, started once per run by the global setup:
// Cluster API's own managers on the test bed (scripts/capi.sh), the extension
// started exactly as `make dev` starts it (src/local/dev.ts: its own Temporal
// dev server, worker and HTTPS hook server), and the ExtensionConfig that
// registers it with CAPI. Test files find all of it through CAPI_TIER_* variables.
// As config/default deploys it, the extension requires a client certificate
// (mutual TLS, an allow-list of CAPI's subjects) and CAPI's core and KCP managers
// present theirs (the test PKI's), so every hook call in this tier is authenticated.
// In-place updates go through the `management` executor (docs/node-upgrade-request.md):
// the test bed installs the NodeUpgradeRequest CRD into the management cluster as
// config/default does, and the tests start a stand-in upgrader (capi-node-upgrader.ts) for CAPD's
// in-memory machines; the drain leaves CAPD's fake static pods alone (drainSkipPodSelector).
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { IN_MEMORY_EXTENSION_SETTINGS } from '../../src/local/embedded-management.ts';
import { DEFAULT_NODE_UPGRADER_NAMESPACE } from '../../src/model/machine-update.ts';
import { stopDevProcess } from './dev-process.ts';
import { CAPI_CORE_CLIENT_SUBJECT, CAPI_KCP_CLIENT_SUBJECT, testPki } from './pki.ts';

/** The ExtensionConfig name: handler names CAPI sees are `<handler>.<this>`. */
export const EXTENSION_NAME = 'capi-uo';
/** Where node upgraders keep their Leases (the extension's NODE_UPGRADER_NAMESPACE; config/rbac's namespace). */
export const UPGRADER_NAMESPACE = DEFAULT_NODE_UPGRADER_NAMESPACE;

/**
 * `make dev`'s ports as 0: each server binds a free port itself, as late as it can; chosen
 * beforehand, a port could be taken by one of the stacks starting beside this one.
 */
export const FREE_PORTS = { TEMPORAL_PORT: '0', TEMPORAL_UI_PORT: '0', HOOK_SERVER_PORT: '0', OPS_SERVER_PORT: '0' };

export interface CapiTierEnv {
  /** scripts/capi.sh's capi.json: management kubeconfig, kubectl, managers. */
  CAPI_TIER_STATE: string;
  /** The extension's stdout: one JSON "hook answered" line per hook call. */
  CAPI_TIER_EXTENSION_LOG: string;
  CAPI_TIER_TEMPORAL_ADDRESS: string;
  CAPI_TIER_EXTENSION_NAME: string;
  /** https://127.0.0.1:<port>: the extension's hook server (it requires a client certificate). */
  CAPI_TIER_HOOK_URL: string;
  /** The CA of its serving certificate. */
  CAPI_TIER_HOOK_CA_FILE: string;
  /** The node upgraders' Lease namespace (NODE_UPGRADER_NAMESPACE). */
  CAPI_TIER_UPGRADER_NAMESPACE: string;
}

export interface CapiTier {
  env: CapiTierEnv;
  stop(): Promise<void>;
}

const ROOT = new URL('../../', import.meta.url).pathname;
const CAPI_SCRIPT = join(ROOT, 'scripts/capi.sh');

function run(file: string, args: string[], timeoutMs = 120_000, env: Record<string, string> = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const options = { maxBuffer: 16 << 20, timeout: timeoutMs, env: { ...process.env, ...env } };
    execFile(file, args, options, (err, stdout, stderr) => {
      if (err) reject(new Error(`${file} ${args.join(' ')} failed (${err.message.split('\n')[0]}):\n${stderr}`));
      else resolve(stdout);
    });
  });
}

function script(args: string[], timeoutMs: number, env: Record<string, string> = {}): Promise<string> {
  return run('bash', args, timeoutMs, env);
}

/** `make dev` minus the Makefile: node src/local/dev.ts with the ports and data dir given. */
async function startExtension(
  dir: string,
  managementKubeconfig: string,
): Promise<{ child: ChildProcess; log: string; temporalAddress: string; hookUrl: string; caFile: string }> {
  mkdirSync(dir, { recursive: true });
  const clientCaFile = join(dir, 'client-ca.crt');
  writeFileSync(clientCaFile, testPki().clientCa.certPem);
  const log = join(dir, 'extension.log');
  const out = openSync(log, 'a');
  const child = spawn(process.execPath, ['--disable-warning=ExperimentalWarning', join(ROOT, 'src/local/dev.ts')], {
    cwd: ROOT,
    stdio: ['ignore', out, out],
    // A process group of its own: stopping it also stops its Temporal dev server,
    // even when the extension had to be killed before it could stop that child.
    detached: true,
    env: {
      ...process.env,
      CAPI_UO_DATA_DIR: dir,
      ...FREE_PORTS,
      MANAGEMENT_KUBECONFIG: managementKubeconfig,
      TLS_CLIENT_CA_FILE: clientCaFile,
      HOOK_CLIENT_ALLOWED_SUBJECTS: `CN=${CAPI_CORE_CLIENT_SUBJECT},CN=${CAPI_KCP_CLIENT_SUBJECT}`,
      NODE_UPGRADER_NAMESPACE: UPGRADER_NAMESPACE,
    },
  });
  // Bundling the workflows takes seconds, minutes on a loaded machine.
  const deadline = Date.now() + 300_000;
  while (!readFileSync(log, 'utf8').includes('capi-upgrade-orchestrator is running')) {
    if (child.exitCode !== null || Date.now() > deadline) {
      await stopDevProcess(child, dir);
      throw new Error(`the extension (src/local/dev.ts) did not start; its output:\n${readFileSync(log, 'utf8')}`);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  const output = readFileSync(log, 'utf8');
  const printed = (label: string): string => {
    const value = new RegExp(`^\\s*${label}\\s+(\\S+)`, 'm').exec(output)?.[1];
    if (!value) throw new Error(`the extension did not print its ${label}; its output:\n${output}`);
    return value;
  };
  return {
    child,
    log,
    temporalAddress: printed('Temporal frontend'),
    hookUrl: printed('Hook server'),
    caFile: join(dir, 'certs', 'ca.crt'),
  };
}

/** Starts CAPI on the test bed whose testbed.json is given, then the extension, then registers it. */
export async function startCapiTier(dir: string, testbedJson: string): Promise<CapiTier> {
  const testbedDir = join(testbedJson, '..');
  const capiDir = join(dir, 'capi');
  const testbed = JSON.parse(readFileSync(testbedJson, 'utf8')) as { workerKubeconfig: string };
  const clientCerts = join(dir, 'capi-client-certs');
  const pki = testPki();
  for (const [manager, pair] of [
    ['capi', pki.client],
    ['kcp', pki.kcpClient],
  ] as const) {
    mkdirSync(join(clientCerts, manager), { recursive: true });
    writeFileSync(join(clientCerts, manager, 'tls.crt'), pair.certPem);
    writeFileSync(join(clientCerts, manager, 'tls.key'), pair.keyPem, { mode: 0o600 });
  }
  let extension: Awaited<ReturnType<typeof startExtension>> | undefined;
  const stop = async () => {
    if (extension) await stopDevProcess(extension.child, join(dir, 'extension'));
    await script([CAPI_SCRIPT, 'down', capiDir], 120_000).catch((err: unknown) => console.error(String(err)));
  };
  try {
    const [capi, started] = await Promise.allSettled([
      script([CAPI_SCRIPT, 'up', testbedDir, capiDir], 30 * 60_000, { CAPI_EXTENSION_CLIENT_CERT_DIR: clientCerts }),
      // As deployed: the worker's least-privilege identity (its role covers the api's too).
      startExtension(join(dir, 'extension'), testbed.workerKubeconfig),
    ]);
    if (started.status === 'fulfilled') extension = started.value;
    if (capi.status === 'rejected') throw capi.reason;
    if (started.status === 'rejected') throw started.reason;
    if (!extension) throw new Error('unreachable: the extension neither started nor failed');
    const state = JSON.parse(readFileSync(join(capiDir, 'capi.json'), 'utf8')) as {
      managementKubeconfig: string;
      kubectl: string;
    };
    // One process plays the api and the worker (src/local/dev.ts) as the worker's ServiceAccount:
    // it also needs the api's Role on the upgraders' Leases (config/rbac/api-role.yaml).
    await run(state.kubectl, [
      '--kubeconfig',
      state.managementKubeconfig,
      'create',
      'rolebinding',
      '-n',
      UPGRADER_NAMESPACE,
      'capi-tier-worker-reads-node-upgraders',
      '--role=capi-upgrade-orchestrator-api-node-upgraders',
      `--serviceaccount=${UPGRADER_NAMESPACE}:capi-upgrade-orchestrator-worker`,
    ]);
    await script(
      [
        CAPI_SCRIPT,
        'register-extension',
        capiDir,
        EXTENSION_NAME,
        extension.hookUrl,
        extension.caFile,
        ...IN_MEMORY_EXTENSION_SETTINGS,
      ],
      120_000,
    );
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    env: {
      CAPI_TIER_STATE: join(capiDir, 'capi.json'),
      CAPI_TIER_EXTENSION_LOG: extension.log,
      CAPI_TIER_TEMPORAL_ADDRESS: extension.temporalAddress,
      CAPI_TIER_EXTENSION_NAME: EXTENSION_NAME,
      CAPI_TIER_HOOK_URL: extension.hookUrl,
      CAPI_TIER_HOOK_CA_FILE: extension.caFile,
      CAPI_TIER_UPGRADER_NAMESPACE: UPGRADER_NAMESPACE,
    },
    stop,
  };
}
