// The parts of this process, each { name, start, ready?, live?, stop }: main.ts starts them in list
// order and stops them in reverse. They share one config, one set of Temporal clients and one
// management KubeConfig (one connection pool for the api's checks and the worker's activities).
import type { KubeConfig } from '@kubernetes/client-node';
import { BackgroundRecorder } from './api/hooks/background-recorder.ts';
import {
  createClusterUpgradeHandlers,
  type ClusterUpgradeHandlers,
} from './api/handlers/lifecycle/cluster-upgrades.ts';
import { HookRegistry } from './api/hooks/registry.ts';
import { createInPlaceHandlers } from './api/handlers/in-place/machine-updates.ts';
import { createNodeAgentCheck } from './platform/kube/node-agents.ts';
import { createNodeUpgraderCheck } from './platform/kube/node-upgraders.ts';
import {
  createRequestChecks,
  managementObjects,
  REQUEST_CHECKS_ON_MESSAGE,
  requestChecksOff,
  type RequestChecks,
} from './api/handlers/request-checks.ts';
import { isManagementClusterConfigured, MANAGEMENT_CLUSTER_NOT_CONFIGURED_MESSAGE } from './platform/kube/clients.ts';
import { DEFAULT_WORKLOAD_NAMESPACE } from './activities/machine-update.ts';
import { upgradePlanHandlers } from './api/handlers/upgrade-plan/generate-upgrade-plan.ts';
import { startHookServer, type HookServer } from './api/http/server.ts';
import type { AppConfig } from './config/index.ts';
import { startOpsServer, type HealthCheck, type OpsServer } from './ops/ops-server.ts';
import { startTemporalProbe } from './ops/temporal-probe.ts';
import { startVisibilityGauges } from './ops/visibility-gauges.ts';
import { visibilityPort } from './platform/temporal/visibility.ts';
import { NodeUpgradeWatch } from './activities/node-upgrade-watch.ts';
import type { TemporalClients } from './platform/temporal/clients.ts';
import { workflowPort } from './platform/temporal/workflows.ts';
import {
  connectFailureMessage,
  watchTemporalCredentials,
  type TemporalCredentials,
} from './platform/temporal/connection.ts';
import type { Logger } from './log.ts';
import { WorkerHost } from './worker-host.ts';
import { createWorker } from './worker.ts';
import { waitForDrain } from './platform/temporal/worker-deployment.ts';
import type { BuildInfo } from './version.ts';

export interface Component {
  name: string;
  start(): Promise<void>;
  /** Its /readyz check, if it has one. */
  ready?: HealthCheck;
  /** Its /livez check, if it has one. */
  live?: HealthCheck;
  stop(): Promise<void>;
}

/** What the components of one process share. */
export interface Shared {
  config: AppConfig;
  log: Logger;
  build: BuildInfo & { role: string };
  credentials: TemporalCredentials;
  temporal: TemporalClients;
  /** The management cluster (possibly not configured: isManagementClusterConfigured). */
  management: KubeConfig;
  /** Set when the process begins to stop: readiness fails from then on. */
  stopping: boolean;
  /** The other components' checks, for the ops server (the components list, once built). */
  checks: () => { live: HealthCheck[]; ready: HealthCheck[] };
}

/** How long a stopping process keeps writing queued lifecycle events (the pod's grace period is 30 s). */
const RECORDER_FLUSH_MS = 5_000;

const apiRole = (config: AppConfig) => config.role === 'api' || config.role === 'all';
const workerRole = (config: AppConfig) => config.role === 'worker' || config.role === 'all';

/** Temporal's clients (lazy: the hook server starts, answering "unavailable", while Temporal is down), closed last. */
function temporalClients(s: Shared): Component {
  return { name: 'temporal clients', start: async () => undefined, stop: () => s.temporal.close() };
}

/** Reachability for /readyz and the metric (the api answers "retry later" while it is down). */
function temporalProbe(s: Shared): Component {
  const { config, log, temporal } = s;
  let probe: ReturnType<typeof startTemporalProbe> | undefined;
  return {
    name: 'temporal',
    ready: { name: 'temporal', informational: true, check: () => probe?.problem() },
    start: async () => {
      probe = startTemporalProbe(
        (deadline) =>
          temporal.connection.withDeadline(deadline, () => temporal.connection.workflowService.getSystemInfo({})),
        10_000,
        (problem) =>
          problem === undefined
            ? log.info('Temporal is reachable')
            : log.error(
                connectFailureMessage(config.temporal, new Error(problem)) +
                  (apiRole(config) ? ': hooks answer "retry later" until it is back' : ''),
              ),
      );
    },
    stop: async () => probe?.stop(),
  };
}

/** /livez, /readyz, /metrics and /version: started early, so the kubelet's probes are answered (not ready yet) while the rest starts. */
function opsServer(s: Shared): Component & { server(): OpsServer | undefined } {
  let server: OpsServer | undefined;
  return {
    name: 'ops server',
    server: () => server,
    start: async () => {
      server = await startOpsServer({ ...s.config.ops, build: s.build, ...s.checks() });
    },
    stop: async () => server?.close(),
  };
}

/**
 * The worker, replaced with a new connection when Temporal's TLS credentials change; on stop it
 * drains first when Worker Versioning asks it to (docs/worker-versioning.md).
 */
/** The worker component: its host, and the credential changes it follows. */
export interface WorkerComponent extends Component {
  host(): WorkerHost | undefined;
  /** A new connection with new TLS material (one replacement at a time, in order). */
  replace(next: TemporalCredentials): void;
  /** A reloaded API key, set on the current worker's connection. */
  setApiKey(apiKey: string): void;
}

function worker(s: Shared): WorkerComponent {
  const { config, log, temporal } = s;
  let workers: WorkerHost | undefined;
  let replacing = Promise.resolve();
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
        management: s.management,
        upgradeWatch,
        temporal: workflowPort(() => temporal.client),
        nodeUpgradeJob: config.nodeUpgradeJob,
        nodeUpgraderNamespace: config.nodeUpgraderNamespace,
        ...(config.notificationWebhookUrl ? { notificationWebhookUrl: config.notificationWebhookUrl } : {}),
      },
    );
  const check = (want: 'live' | 'ready') => () => {
    if (s.stopping) return undefined;
    if (!workers) return want === 'ready' ? 'starting' : undefined;
    const state = workers.worker.getState();
    if (state === 'RUNNING') return undefined;
    // Readiness wants RUNNING; liveness fails only once the worker is gone for good.
    return want === 'ready' || state === 'FAILED' || state === 'STOPPED' ? `worker ${state}` : undefined;
  };
  return {
    name: 'worker',
    live: { name: 'worker', check: check('live') },
    ready: { name: 'worker', check: check('ready') },
    host: () => workers,
    start: async () => {
      if (!isManagementClusterConfigured(s.management)) {
        // Expected without a cluster (make dev without MANAGEMENT_KUBECONFIG, docker compose): a warning, not an error.
        log.warn(
          `${MANAGEMENT_CLUSTER_NOT_CONFIGURED_MESSAGE}: the steps of upgrades and machine updates that read it cannot run (an upgrade holds at its pre-upgrade health check, which says so); set MANAGEMENT_KUBECONFIG`,
        );
      }
      workers = new WorkerHost(await newWorker(s.credentials));
      const v = config.workerVersioning;
      log.info(
        v
          ? `worker: Worker Deployment ${v.deploymentName}, build ${v.buildId} (new runs come once it is the current version)`
          : 'worker: unversioned (no TEMPORAL_WORKER_BUILD_ID)',
      );
    },
    setApiKey: (apiKey) => void workers?.worker.options.connection?.setApiKey(apiKey).catch(() => undefined),
    replace: (next) => {
      replacing = replacing.then(async () => {
        try {
          workers?.replace(await newWorker(next));
          log.info('Temporal TLS credentials changed: worker reconnected');
        } catch (err) {
          log.error(`Temporal TLS credentials changed, but ${String(err)}: keeping the current connection`);
        }
      });
    },
    stop: async () => {
      await replacing;
      if (workers && config.workerVersioning && config.workerDrainTimeoutMs > 0) {
        // A rollout: keep polling until no run pinned to this build needs it (docs/worker-versioning.md).
        const outcome = await waitForDrain(temporal.client, config.workerVersioning, {
          timeoutMs: config.workerDrainTimeoutMs,
        });
        log.info(`worker: build ${config.workerVersioning.buildId} stopping (${outcome})`);
      }
      workers?.shutdown();
      await workers?.done;
    },
  };
}

/**
 * The api's request checks. On (the default), they fail closed: without a management cluster every
 * call that would start or signal a workflow is held ("retry"), never let through.
 */
function requestChecks(s: Shared): RequestChecks {
  if (!s.config.requestChecks) {
    s.log.warn(
      'HOOK_REQUEST_CHECKS=off: hook requests are not checked against the management cluster; anyone who can reach the hook port can start, abort or update in place (development and tests only)',
    );
    return requestChecksOff;
  }
  if (!isManagementClusterConfigured(s.management)) {
    s.log.error(
      `${MANAGEMENT_CLUSTER_NOT_CONFIGURED_MESSAGE}: HOOK_REQUEST_CHECKS is on, so every hook call that would start or signal a workflow is held; set MANAGEMENT_KUBECONFIG, or HOOK_REQUEST_CHECKS=off for a stack without a management cluster`,
    );
  } else s.log.info(REQUEST_CHECKS_ON_MESSAGE);
  return createRequestChecks(managementObjects(s.management));
}

/** The management cluster for the node agent and upgrader checks, when one is configured. */
function managementAccess(s: Shared): KubeConfig | undefined {
  if (isManagementClusterConfigured(s.management)) return s.management;
  s.log.warn(
    `${MANAGEMENT_CLUSTER_NOT_CONFIGURED_MESSAGE}: CanUpdate* will not claim in-place updates for nodeUpgradeExecutor=delegate or nodeUpgradeExecutor=management`,
  );
  return undefined;
}

/**
 * The hook server and what answers behind it; on stop it takes no more calls, then writes the
 * queued lifecycle events CAPI will not send again (a few seconds), then closes the answer cache.
 */
function hooks(s: Shared): Component & { server(): HookServer | undefined } {
  const { config, log, temporal } = s;
  let server: HookServer | undefined;
  let lifecycle: ClusterUpgradeHandlers | undefined;
  // Lifecycle events recorded off the request path; dropped on stop (CAPI calls again if it cares).
  const recorder = new BackgroundRecorder({
    log: { warn: (obj, msg) => log.warn(obj, msg), error: (obj, msg) => log.error(obj, msg) },
  });
  return {
    name: 'hookServer',
    server: () => server,
    ready: { name: 'hookServer', check: () => (s.stopping ? 'shutting down' : server ? undefined : 'starting') },
    start: async () => {
      const checks = requestChecks(s);
      const taskQueue = config.temporal.taskQueue;
      lifecycle = createClusterUpgradeHandlers({
        client: temporal.client,
        taskQueue,
        checks,
        recorder,
        version: s.build.version,
        log,
        waitRetryAfterMaxSeconds: config.server.waitRetryAfterMaxSeconds,
        views: { maxListsPerSecond: config.temporal.visibilityListsPerSecond },
      });
      const management = managementAccess(s);
      const nodeAgents = management && createNodeAgentCheck({ management, namespace: DEFAULT_WORKLOAD_NAMESPACE });
      const nodeUpgraders =
        management && createNodeUpgraderCheck({ management, namespace: config.nodeUpgraderNamespace });
      const inPlace = createInPlaceHandlers({
        client: temporal.client,
        taskQueue,
        checks,
        ...(nodeAgents ? { nodeAgents } : {}),
        ...(nodeUpgraders ? { nodeUpgraders } : {}),
      });
      const registry = new HookRegistry(config.handlers);
      server = await startHookServer({
        server: config.server,
        logLevel: config.logLevel,
        app: { registry, lifecycle, upgradePlan: upgradePlanHandlers, inPlace },
      });
    },
    stop: async () => {
      await server?.close();
      await recorder.flush(RECORDER_FLUSH_MS);
      recorder.close();
      lifecycle?.views.close();
    },
  };
}

/** Reloads Temporal's API key and TLS material when their files change. */
function credentialWatch(s: Shared, worker: WorkerComponent | undefined): Component {
  const { config, log, temporal } = s;
  let watch: { stop(): void } | undefined;
  return {
    name: 'credential watch',
    start: async () => {
      watch = watchTemporalCredentials(
        config.temporal,
        s.credentials,
        ({ apiKey, reconnect }) => {
          if (apiKey !== undefined) {
            temporal.setApiKey(apiKey);
            worker?.setApiKey(apiKey);
            log.info('Temporal API key reloaded');
          }
          if (reconnect) {
            temporal.reconnect(reconnect);
            worker?.replace(reconnect);
          }
        },
        (err) => log.warn(`Temporal credentials not reloaded: ${err instanceof Error ? err.message : String(err)}`),
      );
    },
    stop: async () => watch?.stop(),
  };
}

/** The visibility gauges (workflows by phase), kept by the worker's process. */
function gauges(s: Shared): Component {
  let running: { stop(): void } | undefined;
  return {
    name: 'visibility gauges',
    start: async () => {
      running = startVisibilityGauges(visibilityPort(s.temporal.client));
    },
    stop: async () => running?.stop(),
  };
}

/** The components of this process in start order (the reverse is the stop order), and the ones run() names. */
export function components(s: Shared): {
  list: Component[];
  ops: ReturnType<typeof opsServer>;
  hooks?: ReturnType<typeof hooks>;
  worker?: WorkerComponent;
} {
  const w = workerRole(s.config) ? worker(s) : undefined;
  const h = apiRole(s.config) ? hooks(s) : undefined;
  const ops = opsServer(s);
  const list = [
    temporalClients(s),
    temporalProbe(s),
    ops,
    // The worker starts before the hook server and stops after it: the api takes no more hook
    // calls, then running activities are let finish.
    ...(w ? [w] : []),
    ...(h ? [h] : []),
    credentialWatch(s, w),
    ...(w ? [gauges(s)] : []),
  ];
  return { list, ops, ...(h ? { hooks: h } : {}), ...(w ? { worker: w } : {}) };
}
