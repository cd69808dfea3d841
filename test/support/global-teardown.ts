import { execFile } from 'node:child_process';
import { rmSync } from 'node:fs';

export default async function globalTeardown(): Promise<void> {
  const services = globalThis.__capiTestServices;
  if (!services) return;
  globalThis.__capiTestServices = undefined;
  // CAPI's managers and the extension first: they talk to the test bed.
  await services.capi?.stop();
  await Promise.allSettled([
    services.testbed ? stopTestbed(services.testbed) : undefined,
    services.capiTestbed ? stopTestbed(services.capiTestbed) : undefined,
    services.productionTestbed ? stopTestbed(services.productionTestbed) : undefined,
    services.temporal?.stop(),
    services.alerting?.stop(),
    services.production?.stop(),
  ]);
  if (!process.env.KEEP_TEST_SERVICES) rmSync(services.dir, { recursive: true, force: true });
}

/** Deletes the test bed's clusters and kills what is left of them (also after a partial `up`); never throws. */
async function stopTestbed(state: string): Promise<void> {
  const script = new URL('../../scripts/testbed.sh', import.meta.url).pathname;
  await new Promise<void>((resolve) => {
    execFile('bash', [script, 'down', state], { timeout: 120_000 }, (err, _stdout, stderr) => {
      if (err) console.error(`scripts/testbed.sh down ${state} failed: ${err.message}\n${stderr}`);
      resolve();
    });
  });
}
