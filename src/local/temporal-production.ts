// Starts and stops the production-shaped Temporal (the server's four services
// as separate processes on PostgreSQL, SQL visibility) through
// scripts/temporal-production.sh, for the test harness and the benchmarks. The
// script is the only place that knows how it is laid out.
import { execFile } from 'node:child_process';
import { readFileSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import { withTemporal } from '../platform/temporal/session.ts';
import { ensureSearchAttributes } from '../temporal-setup.ts';
import { logTail } from './log-tail.ts';
import type { DevServer } from './temporal-dev-server.ts';
import { childEnvironment } from '../config/environment.ts';

export type TemporalServiceName = 'frontend' | 'history' | 'matching' | 'worker';

export interface ProductionTemporalOptions {
  /** Where PostgreSQL's data, each service's config and log, and temporal.json live. */
  stateDir: string;
  namespace?: string;
  /** History shards (the script's default is 4). */
  historyShards?: number;
  /** How long `up` may take, in ms. */
  startTimeoutMs?: number;
}

export interface ProductionTemporal extends DevServer {
  /** Process ids: each Temporal service and the PostgreSQL postmaster. */
  pids: Record<TemporalServiceName | 'postgres', number>;
  /** Prometheus metrics of each service. */
  metricsUrls: Record<TemporalServiceName, string>;
  stateDir: string;
  /** Starts a service again after it was killed (same config, same ports). */
  restart(service: TemporalServiceName): Promise<number>;
}

interface StateFile {
  address: string;
  namespace: string;
  metricsUrls: Record<TemporalServiceName, string>;
  pids: Record<TemporalServiceName | 'postgres', number>;
}

const script = new URL('../../scripts/temporal-production.sh', import.meta.url).pathname;

async function run(args: string[], env: NodeJS.ProcessEnv, timeoutMs: number): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    execFile('bash', [script, ...args], { env, timeout: timeoutMs }, (err, _stdout, stderr) => {
      if (err) reject(new Error(`scripts/temporal-production.sh ${args.join(' ')} failed: ${err.message}\n${stderr}`));
      else resolve();
    });
  });
}

export async function startProductionTemporal(options: ProductionTemporalOptions): Promise<ProductionTemporal> {
  const timeoutMs = options.startTimeoutMs ?? 180_000;
  const env = childEnvironment({
    ...(options.namespace ? { TEMPORAL_PRODUCTION_NAMESPACE: options.namespace } : {}),
    ...(options.historyShards ? { TEMPORAL_PRODUCTION_SHARDS: String(options.historyShards) } : {}),
    TEMPORAL_PRODUCTION_TIMEOUT: String(Math.ceil(timeoutMs / 1000)),
  });
  try {
    await run(['up', options.stateDir], env, timeoutMs + 30_000);
  } catch (err) {
    // Once more in a clean state directory (the script has stopped what it started): a service that
    // exits at its start, as when another process takes a port between the script's check and the
    // bind, is the machine's doing, not the code's. The failed run's service logs are printed first.
    const failed = `${options.stateDir}.failed`;
    renameSync(options.stateDir, failed);
    console.error(`${String(err)}\n${serviceLogTails(failed)}\nstarting it again in a clean state directory`);
    await run(['up', options.stateDir], env, timeoutMs + 30_000);
  }
  const state = JSON.parse(readFileSync(join(options.stateDir, 'temporal.json'), 'utf8')) as StateFile;
  const stop = async (): Promise<void> => {
    await run(['down', options.stateDir], env, 120_000).catch((err: unknown) => console.error(String(err)));
  };
  try {
    // As the extension does at its start, so tests that start workflows directly can set them.
    await withTemporal(state, (temporal) => ensureSearchAttributes(temporal.connection, state.namespace));
  } catch (err) {
    await stop();
    throw err;
  }
  const temporal: ProductionTemporal = {
    address: state.address,
    namespace: state.namespace,
    pid: state.pids.frontend,
    pids: state.pids,
    metricsUrls: state.metricsUrls,
    stateDir: options.stateDir,
    stop,
    async restart(service) {
      await run(['restart', options.stateDir, service], env, timeoutMs);
      const again = JSON.parse(readFileSync(join(options.stateDir, 'temporal.json'), 'utf8')) as StateFile;
      temporal.pids = again.pids;
      temporal.pid = again.pids.frontend;
      return again.pids[service];
    },
  };
  return temporal;
}

/** The last lines of each service's log under a state directory, for a failed start. */
function serviceLogTails(stateDir: string): string {
  return (['frontend', 'history', 'matching', 'worker'] as const)
    .map((svc) => {
      const file = join(stateDir, svc, 'log');
      return `${svc} (${file}):\n${logTail(file)}`;
    })
    .join('\n');
}
