import { execFile } from 'node:child_process';
import { rmSync } from 'node:fs';
import { reapOrphanedNodes } from '../../support/nodes/reap.ts';

export default async function globalTeardown(): Promise<void> {
  const services = globalThis.__capiTestServices;
  if (!services) return;
  globalThis.__capiTestServices = undefined;
  // The real-node tier's test processes have exited: whatever of their nodes is left (a
  // test's teardown that did not run) is taken down, and named.
  // (With --runInBand the tests ran in this process: its own are left-overs too.)
  const leftNodes = await reapOrphanedNodes(process.pid).catch((err: Error) => [`(reaping failed: ${err.message})`]);
  if (leftNodes.length > 0) console.error(`took down node namespaces a test left: ${leftNodes.join(', ')}`);
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
