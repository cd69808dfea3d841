// The post-rollout step of a new worker build (config/versioning): waits until
// the build's workers poll, then makes it the Worker Deployment's current
// version. Reads the same settings as the worker (TEMPORAL_*, the image's
// TEMPORAL_WORKER_BUILD_ID). Exit 0 when current (already or now); 1 on
// failure (Temporal unreachable, the build never polled in time); 2 when the
// settings are wrong or name no build id.
//   node dist/ops/promote-worker-version.js [timeout, e.g. 15m]
import { ConfigError, parseConfig } from '../config/index.ts';
import { parseGoDuration } from '../domain/durations.ts';
import { connectFailureMessage, connectTemporal } from '../platform/temporal/connection.ts';
import { promoteWorkerVersion } from '../platform/temporal/worker-deployment.ts';

async function main(): Promise<number> {
  const timeoutText = process.argv[2] ?? '15m';
  const timeoutMs = parseGoDuration(timeoutText);
  if (timeoutMs === undefined) {
    console.error(`timeout ${JSON.stringify(timeoutText)}: expected a duration such as 15m`);
    return 2;
  }
  let config;
  try {
    config = parseConfig();
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    console.error(err.message);
    return 2;
  }
  const version = config.workerVersioning;
  if (!version) {
    console.error('TEMPORAL_WORKER_BUILD_ID is not set: this image runs unversioned workers, nothing to promote');
    return 2;
  }
  const { temporal } = config;
  let connection: Awaited<ReturnType<typeof connectTemporal>>;
  try {
    connection = await connectTemporal(temporal);
  } catch (err) {
    console.error(connectFailureMessage(temporal, err));
    return 1;
  }
  try {
    const result = await promoteWorkerVersion(connection, temporal.namespace, version, { timeoutMs });
    console.log(
      result === 'promoted'
        ? `${version.deploymentName}/${version.buildId} is now the current version`
        : `${version.deploymentName}/${version.buildId} was already the current version`,
    );
    return 0;
  } catch (err) {
    console.error((err as Error).message);
    return 1;
  } finally {
    await connection.close();
  }
}

process.exitCode = await main();
