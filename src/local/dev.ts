// `make dev`: the whole product on one machine. Starts the Temporal dev
// server (SQLite file under .data/ so state survives a restart, Web UI on
// :8233, our search attributes registered), a management cluster with Cluster
// API's real controllers (embedded-management.ts; or the one MANAGEMENT_KUBECONFIG
// names; or none with MANAGEMENT=none), the worker and the HTTPS hook server with
// a self-signed certificate made on first start, registers the extension with
// CAPI, runs a self-check workflow, prints the URLs and what to try, and stops
// everything on Ctrl-C, in reverse order, even while it is still starting.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { withTemporal } from '../platform/temporal/session.ts';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { parseConfig, type AppConfig } from '../config/index.ts';
import { DEFAULT_NODE_UPGRADER_NAMESPACE } from '../model/machine-update.ts';
import { workflowTypes } from '../model/workflow-types.ts';
import { createLogger } from '../log.ts';
import { installRuntime, run } from '../main.ts';
import { promoteWorkerVersion } from '../platform/temporal/worker-deployment.ts';
import { ensureDevServingCertificate } from './certs.ts';
import {
  DEV_EXTENSION_NAME,
  IN_MEMORY_EXTENSION_SETTINGS,
  ensureCapiClientCertificates,
  startEmbeddedManagement,
  type EmbeddedManagement,
} from './embedded-management.ts';
import { StandInUpgrader } from './in-memory-node-upgrader.ts';
import { startDevServer, type DevServer } from './temporal-dev-server.ts';
import { devDataDir, devStateFile, type DevState } from './dev-state.ts';
import { processEnvironment, setVariable, variable } from '../config/environment.ts';

type Mode = 'embedded' | 'existing' | 'none';

function modeOf(): Mode {
  return variable('MANAGEMENT_KUBECONFIG') ? 'existing' : variable('MANAGEMENT');
}

/**
 * What has started, stopped in reverse order. A signal while starting stops what is up so far;
 * the start then returns at its next step and whatever it started meanwhile is stopped too.
 */
class Components {
  private readonly stops: Array<{ name: string; stop: () => Promise<void> }> = [];
  private requested = false;

  add(name: string, stop: () => Promise<void>): void {
    this.stops.push({ name, stop });
  }

  get stopped(): boolean {
    return this.requested;
  }

  async stop(): Promise<void> {
    this.requested = true;
    for (let c = this.stops.pop(); c; c = this.stops.pop()) {
      await c.stop().catch((err: unknown) => progress(`[dev] stopping ${c!.name}: ${String(err)}`));
    }
  }
}

function progress(line: string): void {
  process.stderr.write(`${line}\n`);
}

async function ensureNamespace(kubeconfig: string, name: string): Promise<void> {
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfig);
  await kc
    .makeApiClient(CoreV1Api)
    .createNamespace({ body: { metadata: { name } } })
    .catch((err: unknown) => {
      if ((err as { code?: number }).code !== 409) throw err;
    });
}

/** What `make dev` has up: Temporal, the management cluster (embedded mode) and where its files are. */
interface Stack {
  mode: Mode;
  dataDir: string;
  certDir: string;
  temporal: DevServer;
  management?: EmbeddedManagement;
  clientCerts?: ReturnType<typeof ensureCapiClientCertificates>;
}

/** Temporal and the management cluster, side by side: each takes seconds to minutes. Undefined: stopped meanwhile. */
async function startStack(components: Components, mode: Mode, dataDir: string): Promise<Stack | undefined> {
  const clientCerts =
    mode === 'embedded' ? ensureCapiClientCertificates(join(dataDir, 'capi-client-certs')) : undefined;
  const [temporalStart, managementStart] = await Promise.allSettled([
    startDevServer({
      executable: variable('TEMPORAL_CLI'),
      dbFilename: join(dataDir, 'temporal.db'),
      logFile: join(dataDir, 'temporal.log'),
      port: variable('TEMPORAL_PORT'),
      uiPort: variable('TEMPORAL_UI_PORT'),
      ownProcessGroup: true,
    }),
    mode === 'embedded'
      ? startEmbeddedManagement({
          dir: join(dataDir, 'management'),
          clientCertDir: join(dataDir, 'capi-client-certs'),
          progress,
        })
      : Promise.resolve(undefined),
  ]);
  let management: EmbeddedManagement | undefined;
  if (managementStart.status === 'fulfilled' && managementStart.value) {
    management = managementStart.value;
    components.add('the management cluster', () => management!.stop());
  }
  if (temporalStart.status === 'fulfilled') components.add('Temporal', () => temporalStart.value.stop());
  if (temporalStart.status === 'rejected') throw temporalStart.reason;
  if (managementStart.status === 'rejected') throw managementStart.reason;
  if (components.stopped) return undefined;
  if (management) {
    await ensureNamespace(management.state.managementKubeconfig, DEFAULT_NODE_UPGRADER_NAMESPACE);
    // The activities and the request checks find the management cluster by this variable.
    setVariable('MANAGEMENT_KUBECONFIG', management.state.managementKubeconfig);
  }
  const certDir = join(dataDir, 'certs');
  return {
    mode,
    dataDir,
    certDir,
    temporal: temporalStart.value,
    ...(management ? { management } : {}),
    ...(clientCerts ? { clientCerts } : {}),
  };
}

/** The extension's settings for `make dev`: local addresses, and the environment's over them. */
function devConfig(stack: Stack): AppConfig {
  const { management, clientCerts } = stack;
  return parseConfig({
    HOOK_SERVER_HOST: '127.0.0.1',
    OPS_SERVER_HOST: '127.0.0.1',
    // OPS_SERVER_PORT: 8080 as documented unless given (the CAPI test tier gives 0: several stacks share a machine).
    LOG_LEVEL: 'info',
    // Without a management cluster there is nothing to check requests against: off (with a
    // warning at start). With one they run as in production.
    HOOK_REQUEST_CHECKS: variable('MANAGEMENT_KUBECONFIG') ? 'on' : 'off',
    ...(management && clientCerts
      ? {
          // As config/default deploys it: only CAPI's core and KCP managers may call.
          TLS_CLIENT_CA_FILE: clientCerts.clientCaFile,
          HOOK_CLIENT_ALLOWED_SUBJECTS: clientCerts.allowedSubjects,
          NODE_UPGRADER_NAMESPACE: DEFAULT_NODE_UPGRADER_NAMESPACE,
        }
      : {}),
    ...processEnvironment(),
    TEMPORAL_ADDRESS: stack.temporal.address,
    TLS_CERT_DIR: processEnvironment().TLS_CERT_DIR ?? stack.certDir,
  });
}

/**
 * Self-check: one workflow through client → server → worker → activity. Unversioned unless
 * TEMPORAL_WORKER_BUILD_ID is given (to rehearse a rollout): then this build is made current at
 * once, as config/versioning's Job does, or nothing would reach it.
 */
function selfCheck(temporal: DevServer, config: AppConfig): Promise<unknown> {
  const version = config.workerVersioning;
  return withTemporal(temporal, async (session) => {
    if (version)
      await promoteWorkerVersion(session.connection, session.namespace, version, { timeoutMs: 60_000, pollMs: 250 });
    return session.execute(workflowTypes.heartbeatProbe, {
      taskQueue: config.temporal.taskQueue,
      workflowId: `self-check-${Date.now()}`,
      args: [{ name: 'make dev', waitSeconds: 0 }],
    });
  });
}

/** Registers the extension with Cluster API, and starts the stand-in for CAPD's in-memory machines' node upgrader. */
async function registerWithCapi(
  components: Components,
  management: EmbeddedManagement,
  hookUrl: string,
  caFile: string,
): Promise<void> {
  progress(`[dev] registering the extension with Cluster API (ExtensionConfig ${DEV_EXTENSION_NAME})`);
  await management.register(DEV_EXTENSION_NAME, hookUrl, caFile, IN_MEMORY_EXTENSION_SETTINGS);
  const upgrader = new StandInUpgrader({
    managementKubeconfig: management.state.managementKubeconfig,
    namespace: DEFAULT_NODE_UPGRADER_NAMESPACE,
  });
  await upgrader.start();
  components.add('the in-memory node upgrader', () => upgrader.stop(2_000));
}

/** dev.json: what `capi-upgrades demo` and the tools read of this `make dev`; emptied when it stops. */
function writeDevState(components: Components, stack: Stack, hookUrl: string, caFile: string): void {
  const { temporal, management } = stack;
  const state: DevState = {
    temporalAddress: temporal.address,
    temporalNamespace: temporal.namespace,
    temporalPid: temporal.pid,
    ...(temporal.uiUrl ? { webUi: temporal.uiUrl } : {}),
    hookUrl,
    caFile,
    ...(management
      ? {
          management: {
            kubeconfig: management.state.managementKubeconfig,
            kubectl: management.state.kubectl,
            capiVersion: management.state.capiVersion,
            samplesDir: management.state.manifestsDir,
            extensionName: DEV_EXTENSION_NAME,
          },
        }
      : {}),
  };
  writeFileSync(devStateFile(stack.dataDir), `${JSON.stringify(state, null, 2)}\n`);
  components.add('the state file', async () => writeFileSync(devStateFile(stack.dataDir), '{}\n'));
}

async function dev(components: Components): Promise<void> {
  const started = Date.now();
  const mode = modeOf();
  const dataDir = devDataDir();
  const { created } = ensureDevServingCertificate(join(dataDir, 'certs'));
  const stack = await startStack(components, mode, dataDir);
  if (!stack) return;
  const { certDir, temporal, management } = stack;
  const managementKubeconfig = variable('MANAGEMENT_KUBECONFIG');
  const config = devConfig(stack);
  // The SDK's logs as JSON lines, as in production: a failed activity is one line, not a stack per retry.
  const log = createLogger(config.logLevel);
  installRuntime(config, log);
  const running = await run(config, log);
  components.add('the extension', () => running.stop());
  if (components.stopped) return;
  const probe = await selfCheck(temporal, config);
  const version = config.workerVersioning;

  const hookUrl = running.hookServer?.url ?? '(api role off)';
  const caFile = join(certDir, 'ca.crt');
  if (management && running.hookServer) await registerWithCapi(components, management, running.hookServer.url, caFile);
  writeDevState(components, stack, hookUrl, caFile);

  const managementLine =
    mode === 'embedded'
      ? `embedded: Cluster API ${management?.state.capiVersion} with CAPD's in-memory machines\n  Kubeconfig         ${managementKubeconfig}`
      : mode === 'existing'
        ? `MANAGEMENT_KUBECONFIG=${managementKubeconfig}`
        : 'none (MANAGEMENT=none): hooks answer, but no upgrade passes its health check; docs/try-it.md has requests to send';
  console.log(`
capi-upgrade-orchestrator is running (Ctrl-C stops everything) — up in ${Math.round((Date.now() - started) / 1000)}s

  Temporal Web UI    ${temporal.uiUrl}
  Temporal frontend  ${temporal.address}   (temporal workflow list --address ${temporal.address})
  Hook server        ${hookUrl}
  Ops server         ${running.opsServer.url}   (/metrics, /livez, /readyz, /version)
  Management cluster ${managementLine}
  Serving CA         ${caFile}${created ? '  (created now)' : ''}
  Client certs       ${config.server.clientCaFile ? `required (CA ${config.server.clientCaFile})` : 'not required: development only (config/default requires them)'}
  Data               ${dataDir}
  Shell tools        eval "$(make env)"   (puts temporal, kubectl, clusterctl, capi-upgrades and Node 24 on this shell's PATH)
  Worker             ${version ? `Worker Deployment ${version.deploymentName}, build ${version.buildId} (current)` : 'unversioned (no TEMPORAL_WORKER_BUILD_ID)'}
  Self-check         ${JSON.stringify(probe)}
${
  management
    ? `
  Try: capi-upgrades demo    (in another shell; docs/try-it.md)`
    : `
  Try: curl --cacert ${caFile} -X POST ${hookUrl}/hooks.runtime.cluster.x-k8s.io/v1alpha1/discovery \\
         -d '{"apiVersion":"hooks.runtime.cluster.x-k8s.io/v1alpha1","kind":"DiscoveryRequest"}'`
}
`);
}

const components = new Components();
const main = dev(components);
let signalled = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (signalled) process.exit(130);
    signalled = true;
    progress(`[dev] ${signal} received: stopping everything (again to force)`);
    void (async () => {
      await components.stop();
      await main.catch(() => undefined);
      await components.stop();
      process.exit(0);
    })();
  });
}
main.catch(async (err: unknown) => {
  if (signalled) return;
  console.error(err instanceof Error ? err.message : err);
  await components.stop();
  process.exit(1);
});
