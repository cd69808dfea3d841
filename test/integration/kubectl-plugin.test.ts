// `kubectl capi-upgrades` as an operator runs it: the real kubectl (the test bed's) finds the
// plugin and its completion on PATH (bin/), against upgrades CAPI drives through the hooks on
// the real Temporal dev server (activities stubbed). `status --watch` redraws until the run ends.
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { execFile } from 'node:child_process';
import { dirname, resolve } from 'node:path';
import { promisify } from 'node:util';
import { inBackground, temporalEnv, watchFrames } from '../support/cli.ts';
import { requireEnv } from '../support/services.ts';
import {
  beforeClusterUpgrade,
  driveChainedUpgrade,
  hangUntilCancelled,
  startUpgradeHarness,
  type UpgradeHarness,
} from '../support/upgrade-harness.ts';
import { waitFor } from '../support/wait.ts';

const run = promisify(execFile);
const env = () => ({
  PATH: `${resolve('bin')}:${dirname(requireEnv('KUBECTL'))}:${dirname(process.execPath)}:/usr/bin:/bin`,
  ...temporalEnv(),
});
const kubectlWatch = (args: string[]) => inBackground('kubectl', ['capi-upgrades', ...args], env());

describe('kubectl capi-upgrades', () => {
  let h: UpgradeHarness;
  let key: string;
  let watching: ReturnType<typeof kubectlWatch> | undefined;
  beforeEach(async () => {
    h = await startUpgradeHarness();
    await h.startWorker();
    key = `${h.ref.namespace}/${h.ref.name}`;
  });
  afterEach(async () => {
    watching?.stop();
    await h.close();
  });

  it('status --watch redraws an upgrade until it is upgraded, then exits 0', async () => {
    await h.call('BeforeClusterUpgrade', beforeClusterUpgrade());
    watching = kubectlWatch(['status', key, '--watch', '--interval', '1s']);
    // Its first frame before CAPI drives on: a plugin that starts slower than the stubbed upgrade
    // runs would otherwise see it Upgraded at once, and draw once.
    const w = watching;
    await waitFor(
      async () => w.seen.stdout.includes(key),
      (drawn) => drawn,
      30_000,
    );
    await driveChainedUpgrade(h);
    expect(await watching.exited).toBe(0);
    const frames = watchFrames(watching.seen.stdout);
    expect(frames.length).toBeGreaterThan(1);
    expect(frames.at(-1)).toMatch(
      new RegExp(`^${key}  v1\\.30\\.5 → v1\\.33\\.0  Upgraded\\nsteps: +\\d+ done, 0 waiting, 0 failed`),
    );
    expect(frames[0]).toContain(key);
  });

  it('status --watch shows what holds the upgrade and exits 1 when an operator aborts it; completion names it', async () => {
    h.activities.health = () => hangUntilCancelled();
    await waitFor(
      () => h.call('BeforeClusterUpgrade', beforeClusterUpgrade()),
      (a) => a.message?.includes('running the pre-upgrade health check') ?? false,
    );
    watching = kubectlWatch(['status', key, '--watch', '--interval', '1s']);
    await waitFor(
      async () => watching!.seen.stdout,
      (out) => out.includes('holds:     BeforeClusterUpgrade v1.33.0: running the pre-upgrade health check'),
      15_000,
    );

    // kubectl asks the plugin's completion executable; the names come from Temporal.
    const completion = await run('kubectl', ['__complete', 'capi-upgrades', 'status', `${h.ref.namespace}/`], {
      env: env(),
    });
    expect(completion.stdout.split('\n')).toContain(key);

    await run('kubectl', ['capi-upgrades', 'abort', key, '--reason', 'change freeze'], { env: env() });
    expect(await watching.exited).toBe(1);
    expect(watchFrames(watching.seen.stdout).at(-1)).toMatch(
      new RegExp(`^${key}  .*v1\\.33\\.0  Aborted \\(change freeze\\)`),
    );
  });

  it('says a bad argument as the plugin, exit code 2', async () => {
    const bad = await run('kubectl', ['capi-upgrades', 'status', key, '--watch', '-o', 'json'], { env: env() }).catch(
      (err: { code: number; stderr: string }) => err,
    );
    expect(bad).toMatchObject({
      code: 2,
      stderr: 'kubectl capi-upgrades: --watch shows a view for people: leave out -o json\n',
    });
  });
});
