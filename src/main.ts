// Process entry point. ROLE=api serves the hooks, ROLE=worker runs the
// Temporal worker, ROLE=all (the default) both. SIGTERM/SIGINT drain both.
// The process is a list of components (process-components.ts) started in
// order and stopped in reverse.
import { Runtime } from '@temporalio/worker';
import { managementKubeConfig } from './platform/kube/clients.ts';
import type { HookServer } from './api/http/server.ts';
import { ConfigError, parseConfig, type AppConfig } from './config/index.ts';
import { variable } from './config/environment.ts';
import { configureWorkloadReads } from './platform/kube/workload-kube-config.ts';
import type { OpsServer } from './ops/ops-server.ts';
import { components, type Component, type Shared } from './process-components.ts';
import { TemporalClients } from './platform/temporal/clients.ts';
import { readTemporalCredentials } from './platform/temporal/connection.ts';
import { createLogger, temporalSdkLogger, type Logger } from './log.ts';
import { ensureSearchAttributes } from './temporal-setup.ts';
import { buildInfoGauge } from './ops/metrics.ts';
import { buildInfo } from './version.ts';

export interface Running {
  hookServer?: HookServer;
  opsServer: OpsServer;
  /** Settles when the worker stops: by stop(), or on its own (a fatal error); not on a replacement. */
  workerDone?: Promise<void>;
  stop(): Promise<void>;
}

/** The one config, clients and management cluster every component shares. */
function shared(config: AppConfig, log: Logger): Shared {
  // Which build this is, before anything else (a malformed CAPI_UPGRADE_VERSION stops here, naming it).
  const build = { ...buildInfo(), role: config.role };
  log.info(
    { version: build.version, role: build.role, buildId: build.buildId, node: build.node },
    `capi-upgrade-orchestrator ${build.version} starting (role ${build.role})`,
  );
  buildInfoGauge.set({ version: build.version, role: build.role, build_id: build.buildId, node: build.node }, 1);
  // Before any workload cluster is read (api: node agents; worker: every activity).
  configureWorkloadReads(config.workloadReads);
  // Unreadable or invalid credential files stop the start here, naming the setting.
  const credentials = readTemporalCredentials(config.temporal);
  // The management cluster, once for every role: a MANAGEMENT_KUBECONFIG that cannot be read stops
  // the start here, naming it (a file named but unreadable is a mistake to fix, not a stack without a
  // cluster); none at all starts anyway, and each component that needs one says what it cannot do
  // (the worker's activities, the api's request checks and node checks). One KubeConfig, so the
  // api's reads and the worker's share one connection pool under ROLE=all.
  const management = managementKubeConfig(variable('MANAGEMENT_KUBECONFIG'), {
    KUBERNETES_SERVICE_HOST: variable('KUBERNETES_SERVICE_HOST'),
  });
  // Lazy: the hook server starts (and answers "unavailable") while Temporal is down.
  const temporal = new TemporalClients(config.temporal, credentials);
  ensureSearchAttributes(temporal.connection, config.temporal.namespace).then(
    ({ added }) => added.length > 0 && log.info({ added }, 'registered search attributes'),
    (err: unknown) =>
      log.warn({ err: String(err) }, 'could not register search attributes (filters in the Web UI need them)'),
  );
  return {
    config,
    log,
    build,
    credentials,
    temporal,
    management,
    stopping: false,
    checks: () => ({ live: [], ready: [] }),
  };
}

/** Stops the started components in reverse order; each one's failure is logged and the rest still stop. */
async function stopAll(started: Component[], log: Logger): Promise<void> {
  let failed: unknown;
  for (const c of [...started].reverse()) {
    try {
      await c.stop();
    } catch (err) {
      log.error({ err: String(err) }, `stopping ${c.name} failed`);
      failed ??= err;
    }
  }
  if (failed !== undefined) throw failed;
}

export async function run(config: AppConfig, log: Logger = createLogger(config.logLevel)): Promise<Running> {
  const s = shared(config, log);
  const parts = components(s);
  s.checks = () => ({
    live: parts.list.flatMap((c) => (c.live ? [c.live] : [])),
    ready: parts.list.flatMap((c) => (c.ready ? [c.ready] : [])),
  });
  const started: Component[] = [];
  for (const c of parts.list) {
    await c.start();
    started.push(c);
  }
  const hookServer = parts.hooks?.server();
  const workers = parts.worker?.host();
  return {
    ...(hookServer ? { hookServer } : {}),
    opsServer: parts.ops.server() as OpsServer,
    ...(workers ? { workerDone: workers.done } : {}),
    async stop() {
      s.stopping = true;
      await stopAll(started, log);
    },
  };
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
