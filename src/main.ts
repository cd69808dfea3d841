// Process entry point. ROLE=api serves the hooks, ROLE=worker runs the
// Temporal worker, ROLE=all (the default) both. SIGTERM/SIGINT drain both.
import { Runtime } from '@temporalio/worker';
import { BackgroundRecorder } from './api/background-recorder.ts';
import { createClusterUpgradeHandlers } from './api/cluster-upgrades.ts';
import { HookRegistry } from './api/registry.ts';
import { createInPlaceHandlers } from './api/machine-updates.ts';
import { createNodeAgentCheck } from './platform/kube/node-agents.ts';
import { createNodeUpgraderCheck } from './platform/kube/node-upgraders.ts';
import type { KubeConfig } from '@kubernetes/client-node';
import {
  createRequestChecks,
  managementObjects,
  REQUEST_CHECKS_ON_MESSAGE,
  requestChecksOff,
  type RequestChecks,
} from './api/request-checks.ts';
import {
  isManagementClusterConfigured,
  MANAGEMENT_CLUSTER_NOT_CONFIGURED_MESSAGE,
  managementKubeConfig,
} from './platform/kube/clients.ts';
import { DEFAULT_WORKLOAD_NAMESPACE } from './activities/machine-update.ts';
import { upgradePlanHandlers } from './api/routes/upgrade-plan.ts';
import { startHookServer, type HookServer } from './api/server.ts';
import { ConfigError, parseConfig, type AppConfig } from './config/index.ts';
import { configureWorkloadReads } from './platform/kube/workload-kube-config.ts';
import { startOpsServer, type OpsServer } from './ops/ops-server.ts';
import { startTemporalProbe } from './ops/temporal-probe.ts';
import { startVisibilityGauges } from './ops/visibility-gauges.ts';
import { NodeUpgradeWatch } from './activities/node-upgrade-watch.ts';
import { TemporalClients } from './temporal-clients.ts';
import {
  connectFailureMessage,
  readTemporalCredentials,
  watchTemporalCredentials,
  type TemporalCredentials,
} from './temporal-connection.ts';
import { createLogger, temporalSdkLogger, type Logger } from './log.ts';
import { ensureSearchAttributes } from './temporal-setup.ts';
import { WorkerHost } from './worker-host.ts';
import { createWorker } from './worker.ts';
import { waitForDrain } from './ops/worker-deployment.ts';
import { buildInfoGauge } from './ops/metrics.ts';
import { buildInfo } from './version.ts';

export interface Running {
  hookServer?: HookServer;
  opsServer: OpsServer;
  /** Settles when the worker stops: by stop(), or on its own (a fatal error); not on a replacement. */
  workerDone?: Promise<void>;
  stop(): Promise<void>;
}

/** How long a stopping process keeps writing queued lifecycle events (the pod's grace period is 30 s). */
const RECORDER_FLUSH_MS = 5_000;

export async function run(config: AppConfig, log: Logger = createLogger(config.logLevel)): Promise<Running> {
  // Which build this is, before anything else (a malformed CAPI_UPGRADE_VERSION stops here, naming it).
  const build = { ...buildInfo(), role: config.role };
  log.info(
    { version: build.version, role: build.role, buildId: build.buildId, node: build.node },
    `capi-upgrade-orchestrator ${build.version} starting (role ${build.role})`,
  );
  buildInfoGauge.set({ version: build.version, role: build.role, build_id: build.buildId, node: build.node }, 1);
  // Before any workload cluster is read (api: node agents; worker: every activity).
  configureWorkloadReads(config.workloadReads);
  let hookServer: HookServer | undefined;
  let workers: WorkerHost | undefined;
  // Unreadable or invalid credential files stop the start here, naming the setting.
  const credentials = readTemporalCredentials(config.temporal);
  // Lazy: the hook server starts (and answers "unavailable") while Temporal is down.
  const temporal = new TemporalClients(config.temporal, credentials);
  const client = temporal.client;
  ensureSearchAttributes(temporal.connection, config.temporal.namespace).then(
    ({ added }) => added.length > 0 && log.info({ added }, 'registered search attributes'),
    (err: unknown) =>
      log.warn({ err: String(err) }, 'could not register search attributes (filters in the Web UI need them)'),
  );
  const apiRole = config.role === 'api' || config.role === 'all';
  const workerRole = config.role === 'worker' || config.role === 'all';
  // Lifecycle events recorded off the request path; dropped on stop (CAPI calls again if it cares).
  const recorder = new BackgroundRecorder({
    log: {
      warn: (obj, msg) => log.warn(obj, msg),
      error: (obj, msg) => log.error(obj, msg),
    },
  });
  // Reachability for /readyz and the metric (the api answers "retry later" while it is down).
  const temporalProbe = startTemporalProbe(
    (deadline) =>
      temporal.connection.withDeadline(deadline, () => temporal.connection.workflowService.getSystemInfo({})),
    10_000,
    (problem) =>
      problem === undefined
        ? log.info('Temporal is reachable')
        : log.error(
            connectFailureMessage(config.temporal, new Error(problem)) +
              (apiRole ? ': hooks answer "retry later" until it is back' : ''),
          ),
  );
  let stopping = false;
  const workerCheck = (want: 'live' | 'ready') => ({
    name: 'worker',
    check: () => {
      if (stopping) return undefined;
      if (!workers) return want === 'ready' ? 'starting' : undefined;
      const state = workers.worker.getState();
      if (state === 'RUNNING') return undefined;
      // Readiness wants RUNNING; liveness fails only once the worker is gone for good.
      return want === 'ready' || state === 'FAILED' || state === 'STOPPED' ? `worker ${state}` : undefined;
    },
  });
  // First, so the kubelet's probes are answered (not ready yet) while the rest starts.
  const opsServer = await startOpsServer({
    ...config.ops,
    build,
    live: workerRole ? [workerCheck('live')] : [],
    ready: [
      ...(apiRole
        ? [{ name: 'hookServer', check: () => (stopping ? 'shutting down' : hookServer ? undefined : 'starting') }]
        : []),
      ...(workerRole ? [workerCheck('ready')] : []),
      { name: 'temporal', informational: true, check: () => temporalProbe.problem() },
    ],
  });
  const checks = apiRole ? requestChecks(config, log) : requestChecksOff;
  const lifecycle = apiRole
    ? createClusterUpgradeHandlers({
        client,
        taskQueue: config.temporal.taskQueue,
        checks,
        recorder,
        version: build.version,
        log,
        waitRetryAfterMaxSeconds: config.server.waitRetryAfterMaxSeconds,
        views: { maxListsPerSecond: config.temporal.visibilityListsPerSecond },
      })
    : undefined;
  if (lifecycle) {
    const management = managementAccess(log);
    const nodeAgents = management && createNodeAgentCheck({ management, namespace: DEFAULT_WORKLOAD_NAMESPACE });
    const nodeUpgraders =
      management && createNodeUpgraderCheck({ management, namespace: config.nodeUpgraderNamespace });
    hookServer = await startHookServer({
      server: config.server,
      logLevel: config.logLevel,
      app: {
        registry: new HookRegistry(config.handlers),
        lifecycle,
        upgradePlan: upgradePlanHandlers,
        inPlace: createInPlaceHandlers({
          client,
          taskQueue: config.temporal.taskQueue,
          checks,
          ...(nodeAgents ? { nodeAgents } : {}),
          ...(nodeUpgraders ? { nodeUpgraders } : {}),
        }),
      },
    });
  }
  let replaceWorker: (credentials: TemporalCredentials) => Promise<void> = async () => undefined;
  let replacing = Promise.resolve();
  if (workerRole) {
    // A MANAGEMENT_KUBECONFIG that cannot be read stops the start here, naming it; none at all
    // starts anyway (and says so): every activity that needs the cluster fails saying the same.
    const management = managementKubeConfig();
    if (!isManagementClusterConfigured(management)) {
      // Expected without a cluster (make dev without MANAGEMENT_KUBECONFIG, docker compose): a warning, not an error.
      log.warn(
        `${MANAGEMENT_CLUSTER_NOT_CONFIGURED_MESSAGE}: the steps of upgrades and machine updates that read it cannot run (an upgrade holds at its pre-upgrade health check, which says so); set MANAGEMENT_KUBECONFIG`,
      );
    }
    // One watch for node upgrades across worker replacements, completing through the current connection.
    const upgradeWatch = new NodeUpgradeWatch(() => temporal.asyncCompletion, {
      pollMs: config.worker.nodeUpgradePollMs,
    });
    const newWorker = (credentials: TemporalCredentials) =>
      createWorker(
        {
          ...config.temporal,
          credentials,
          ...(config.workflowBundlePath ? { workflowBundlePath: config.workflowBundlePath } : {}),
          tuning: config.worker,
          ...(config.workerVersioning ? { versioning: config.workerVersioning } : {}),
        },
        {
          management,
          upgradeWatch,
          temporal: () => client,
          nodeUpgradeJob: config.nodeUpgradeJob,
          nodeUpgraderNamespace: config.nodeUpgraderNamespace,
          ...(config.notificationWebhookUrl ? { notificationWebhookUrl: config.notificationWebhookUrl } : {}),
        },
      );
    workers = new WorkerHost(await newWorker(credentials));
    const v = config.workerVersioning;
    log.info(
      v
        ? `worker: Worker Deployment ${v.deploymentName}, build ${v.buildId} (new runs come once it is the current version)`
        : 'worker: unversioned (no TEMPORAL_WORKER_BUILD_ID)',
    );
    replaceWorker = async (next) => {
      try {
        workers?.replace(await newWorker(next));
        log.info('Temporal TLS credentials changed: worker reconnected');
      } catch (err) {
        log.error(`Temporal TLS credentials changed, but ${String(err)}: keeping the current connection`);
      }
    };
  }
  const credentialWatch = watchTemporalCredentials(
    config.temporal,
    credentials,
    ({ apiKey, reconnect }) => {
      if (apiKey !== undefined) {
        temporal.setApiKey(apiKey);
        void workers?.worker.options.connection?.setApiKey(apiKey).catch(() => undefined);
        log.info('Temporal API key reloaded');
      }
      if (reconnect) {
        temporal.reconnect(reconnect);
        // One replacement at a time, in order.
        replacing = replacing.then(() => replaceWorker(reconnect));
      }
    },
    (err) => log.warn(`Temporal credentials not reloaded: ${err instanceof Error ? err.message : String(err)}`),
  );
  const gauges = workers ? startVisibilityGauges(client) : undefined;
  return {
    ...(hookServer ? { hookServer } : {}),
    opsServer,
    ...(workers ? { workerDone: workers.done } : {}),
    async stop() {
      stopping = true;
      credentialWatch.stop();
      // Stop taking hook calls first, then let running activities finish.
      await hookServer?.close();
      // Lifecycle events CAPI will not send again: a few seconds to write what is queued.
      await recorder.flush(RECORDER_FLUSH_MS);
      recorder.close();
      lifecycle?.views.close();
      await replacing;
      if (workers && config.workerVersioning && config.workerDrainTimeoutMs > 0) {
        // A rollout: keep polling until no run pinned to this build needs it (docs/worker-versioning.md).
        const outcome = await waitForDrain(client, config.workerVersioning, { timeoutMs: config.workerDrainTimeoutMs });
        log.info(`worker: build ${config.workerVersioning.buildId} stopping (${outcome})`);
      }
      workers?.shutdown();
      await workers?.done;
      gauges?.stop();
      temporalProbe.stop();
      await opsServer.close();
      await temporal.close();
    },
  };
}

/**
 * The api's request checks. On (the default), they fail closed: without a management cluster every
 * call that would start or signal a workflow is held ("retry"), never let through. An unreadable
 * MANAGEMENT_KUBECONFIG stops the start, naming it.
 */
function requestChecks(config: AppConfig, log: Logger): RequestChecks {
  if (!config.requestChecks) {
    log.warn(
      'HOOK_REQUEST_CHECKS=off: hook requests are not checked against the management cluster; anyone who can reach the hook port can start, abort or update in place (development and tests only)',
    );
    return requestChecksOff;
  }
  const management = managementKubeConfig();
  if (!isManagementClusterConfigured(management)) {
    log.error(
      `${MANAGEMENT_CLUSTER_NOT_CONFIGURED_MESSAGE}: HOOK_REQUEST_CHECKS is on, so every hook call that would start or signal a workflow is held; set MANAGEMENT_KUBECONFIG, or HOOK_REQUEST_CHECKS=off for a stack without a management cluster`,
    );
  } else log.info(REQUEST_CHECKS_ON_MESSAGE);
  return createRequestChecks(managementObjects(management));
}

/** The management cluster for the node agent and upgrader checks, when this process can reach it. */
function managementAccess(log: Logger): KubeConfig | undefined {
  const without =
    'CanUpdate* will not claim in-place updates for nodeUpgradeExecutor=delegate or nodeUpgradeExecutor=management';
  let management;
  try {
    management = managementKubeConfig();
  } catch (err) {
    log.warn(`${err instanceof Error ? err.message : String(err)}: ${without}`);
    return undefined;
  }
  if (!isManagementClusterConfigured(management)) {
    log.warn(`${MANAGEMENT_CLUSTER_NOT_CONFIGURED_MESSAGE}: ${without}`);
    return undefined;
  }
  return management;
}

/**
 * Temporal's runtime, before anything uses it: this process owns SIGTERM/SIGINT (the api stops first, then the
 * worker drains; the runtime would otherwise take them and stop only the worker), and the SDK's worker, workflow
 * and activity logs go out as JSON lines of `log` (without it they are console text, each failed activity with
 * its whole stack).
 */
export function installRuntime(config: AppConfig, log: Logger): void {
  Runtime.install({
    shutdownSignals: [],
    logger: temporalSdkLogger(log, config.logLevel),
    // The SDK's own metrics (worker slots, poll and task latencies) on a port of their own.
    ...(config.temporalSdkMetricsAddress
      ? { telemetryOptions: { metrics: { prometheus: { bindAddress: config.temporalSdkMetricsAddress } } } }
      : {}),
  });
}

export function stopOnSignals(stop: () => Promise<void>, log: Logger = createLogger()): void {
  let stopping = false;
  const handler = (signal: NodeJS.Signals) => {
    if (stopping) {
      process.exit(130);
    }
    stopping = true;
    log.info(`${signal} received: shutting down (again to force)`);
    stop().then(
      () => process.exit(0),
      (err: unknown) => {
        log.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', handler);
  process.on('SIGTERM', handler);
}

async function main(): Promise<void> {
  let config: AppConfig;
  try {
    config = parseConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      createLogger().fatal({ problems: err.problems }, err.message);
      process.exit(2);
    }
    throw err;
  }
  const log = createLogger(config.logLevel);
  installRuntime(config, log);
  let running: Running | undefined;
  let stopping = false;
  // Installed before anything starts: a signal during start-up exits at once.
  stopOnSignals(async () => {
    stopping = true;
    await running?.stop();
  }, log);
  running = await run(config, log);
  // A worker that ends on its own is broken: exit so the Deployment restarts us.
  running.workerDone?.then(
    () => !stopping && (log.fatal('worker stopped unexpectedly'), process.exit(1)),
    (err: unknown) => {
      log.fatal({ err }, 'worker failed');
      process.exit(1);
    },
  );
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main().catch((err: unknown) => {
    // Start-up failures (a credential file, Temporal unreachable for the worker) name what to fix.
    createLogger().fatal({ err }, err instanceof Error ? err.message : String(err));
    process.exit(1);
  });
}
