// `make dev`: the whole product on one machine. Starts the Temporal dev
// server (SQLite file under .data/ so state survives a restart, Web UI on
// :8233, our search attributes registered), the worker and the HTTPS hook
// server with a self-signed certificate made on first start, runs a
// self-check workflow, prints the URLs, and stops everything on Ctrl-C.
import { join, resolve } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { parseConfig } from '../config/index.ts';
import { workflowTypes } from '../model/workflow-types.ts';
import { createLogger } from '../log.ts';
import { installRuntime, run, stopOnSignals } from '../main.ts';
import { promoteWorkerVersion } from '../ops/worker-deployment.ts';
import { ensureDevServingCertificate } from './certs.ts';
import { startDevServer } from './temporal-dev-server.ts';

async function dev(): Promise<void> {
  const dataDir = resolve(process.env.CAPI_UO_DATA_DIR ?? '.data');
  const certDir = join(dataDir, 'certs');
  const temporalPort = Number(process.env.TEMPORAL_PORT ?? 7233);
  const uiPort = Number(process.env.TEMPORAL_UI_PORT ?? 8233);
  const { created } = ensureDevServingCertificate(certDir);

  const temporal = await startDevServer({
    executable: process.env.TEMPORAL_CLI ?? 'temporal',
    dbFilename: join(dataDir, 'temporal.db'),
    logFile: join(dataDir, 'temporal.log'),
    port: temporalPort,
    uiPort,
  });
  const config = parseConfig({
    HOOK_SERVER_HOST: '127.0.0.1',
    OPS_SERVER_HOST: '127.0.0.1',
    // OPS_SERVER_PORT: 8080 as documented unless given (the CAPI test tier gives 0: several stacks share a machine).
    LOG_LEVEL: 'info',
    // Without a management cluster there is nothing to check requests against: off (with a
    // warning at start). With MANAGEMENT_KUBECONFIG (the CAPI test tier) they run as in production.
    HOOK_REQUEST_CHECKS: process.env.MANAGEMENT_KUBECONFIG ? 'on' : 'off',
    ...process.env,
    TEMPORAL_ADDRESS: temporal.address,
    TLS_CERT_DIR: process.env.TLS_CERT_DIR ?? certDir,
  });
  // The SDK's logs as JSON lines, as in production: a failed activity is one line, not a stack per retry.
  const log = createLogger(config.logLevel);
  installRuntime(config, log);
  const running = await run(config, log).catch(async (err: unknown) => {
    await temporal.stop();
    throw err;
  });
  const stopAll = async () => {
    await running.stop();
    await temporal.stop();
  };
  stopOnSignals(stopAll, log);

  // Self-check: one workflow through client → server → worker → activity.
  const connection = await Connection.connect({ address: temporal.address });
  const client = new Client({ connection, namespace: temporal.namespace });
  // Unversioned unless TEMPORAL_WORKER_BUILD_ID is given (to rehearse a rollout): then this build
  // is made current at once, as config/versioning's Job does, or nothing would reach it.
  const version = config.workerVersioning;
  if (version) await promoteWorkerVersion(connection, temporal.namespace, version, { timeoutMs: 60_000, pollMs: 250 });
  const probe = await client.workflow.execute(workflowTypes.heartbeatProbe, {
    taskQueue: config.temporal.taskQueue,
    workflowId: `self-check-${Date.now()}`,
    args: [{ name: 'make dev', waitSeconds: 0 }],
  });
  await connection.close();

  const hookUrl = running.hookServer?.url ?? '(api role off)';
  console.log(`
capi-upgrade-orchestrator is running (Ctrl-C stops everything)

  Temporal Web UI    ${temporal.uiUrl}
  Temporal frontend  ${temporal.address}   (temporal workflow list --address ${temporal.address})
  Hook server        ${hookUrl}
  Ops server         ${running.opsServer.url}   (/metrics, /livez, /readyz, /version)
  Serving CA         ${join(certDir, 'ca.crt')}${created ? '  (created now)' : ''}
  Client certs       ${config.server.clientCaFile ? `required (CA ${config.server.clientCaFile})` : 'not required: development only (config/default requires them)'}
  Data               ${dataDir}
  Shell tools        eval "$(make env)"   (puts temporal, kubectl, clusterctl, capi-upgrades and Node 24 on this shell's PATH)
  Worker             ${version ? `Worker Deployment ${version.deploymentName}, build ${version.buildId} (current)` : 'unversioned (no TEMPORAL_WORKER_BUILD_ID)'}
  Self-check         ${JSON.stringify(probe)}

  Try: curl --cacert ${join(certDir, 'ca.crt')} -X POST ${hookUrl}/hooks.runtime.cluster.x-k8s.io/v1alpha1/discovery \\
         -d '{"apiVersion":"hooks.runtime.cluster.x-k8s.io/v1alpha1","kind":"DiscoveryRequest"}'
`);
}

dev().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
