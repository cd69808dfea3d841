// `capi-upgrades rollout …` as an operator runs it: a child process with the
// TEMPORAL_* settings against the real dev server, a worker serving the
// rollout workflow with a fake fleet behind its activities.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { NativeConnection, Worker } from '@temporalio/worker';
import type { RolloutRow } from '../../src/cli/rollouts.ts';
import type { FleetRolloutStatus } from '../../src/model/fleet-rollout.ts';
import { FakeFleet, fakeFleetActivities } from '../support/fake-fleet.ts';
import { capiUpgrades, capiUpgradesInBackground, watchFrames } from '../support/cli.ts';
import { createTestWorker } from '../support/temporal.ts';
import { waitFor } from '../support/wait.ts';

const taskQueue = `cli-rollout-${randomUUID()}`;

const cli = (...args: string[]) => capiUpgrades(args, { TEMPORAL_TASK_QUEUE: taskQueue });
const json = async <T>(...args: string[]): Promise<T> => JSON.parse((await cli(...args, '-o', 'json')).stdout) as T;

describe('capi-upgrades rollout', () => {
  let fleet = new FakeFleet(3);
  let worker: Worker;
  let connection: NativeConnection;
  let running: Promise<void>;
  const name = `r-${randomUUID().slice(0, 8)}`;
  let watching: ReturnType<typeof capiUpgradesInBackground> | undefined;

  beforeAll(async () => {
    ({ worker, connection } = await createTestWorker({ taskQueue, activities: fakeFleetActivities(() => fleet) }));
    running = worker.run();
  });
  afterAll(async () => {
    watching?.stop();
    worker.shutdown();
    await running;
    await connection.close();
  });

  it('starts a rollout, shows it waiting for approval, approves it and lists it', async () => {
    const start = await cli(
      'rollout',
      'start',
      name,
      '--selector',
      'env=prod',
      '--version',
      'v1.33.0',
      '--waves',
      '1,100%',
      '--approve-before',
      '2',
    );
    expect(start.stderr).toBe('');
    expect(start.code).toBe(0);
    expect(start.stdout).toContain(`started fleet-rollout/${name}`);
    const waiting = await waitFor(
      () => cli('rollout', 'status', name),
      (r) => r.stdout.includes('waiting for approval of wave 2'),
    );
    expect(waiting.stdout).toContain('fleet/c00  1     v1.32.4  done');
    expect(waiting.stdout).toMatch(/fleet\/c01\s+2\s+v1\.32\.4\s+pending/);
    const watch = capiUpgradesInBackground(['rollout', 'status', name, '--watch', '--interval', '1s'], {
      TEMPORAL_TASK_QUEUE: taskQueue,
    });
    watching = watch;
    await waitFor(
      async () => watch.seen.stdout,
      (out) => out.includes('waves:     1/2 done, wave 2 waiting-approval'),
    );
    expect(await cli('rollout', 'approve', name, '--wave', '2', '--by', 'alice')).toMatchObject({
      code: 0,
      stdout: `approve sent to fleet-rollout/${name}\n`,
    });
    const done = await waitFor(
      () => json<FleetRolloutStatus>('rollout', 'status', name),
      (s) => s.phase === 'Completed',
    );
    expect(done.waves[1]?.approvedBeforeBy).toBe('alice');
    // The watch ended with the rollout, on its last view.
    expect(await watch.exited).toBe(0);
    expect(watchFrames(watch.seen.stdout).at(-1)).toMatch(
      new RegExp(`^rollout ${name} → v1\\.33\\.0  Completed\\nwaves: +2/2 done\\nclusters: +3/3 upgraded\\n`),
    );
    expect(done.clusters.map((c) => c.state)).toEqual(['done', 'done', 'done']);
    const rows = await waitFor(
      () => json<RolloutRow[]>('rollout', 'list'),
      (r) => r.some((x) => x.name === name && x.phase === 'Completed'),
    );
    expect(rows.find((x) => x.name === name)).toMatchObject({ status: 'COMPLETED' });
  });

  it('pauses, resumes and aborts with the clusters in flight', async () => {
    fleet = new FakeFleet(6);
    // Slow enough that the rollout is still running when the abort comes (each CLI call is a process).
    fleet.upgradeMs = 8_000;
    const r = `${name}-ctl`;
    expect(
      (await cli('rollout', 'start', r, '--selector', '', '--version', 'v1.33.0', '--max-concurrent', '2')).code,
    ).toBe(0);
    expect((await cli('rollout', 'pause', r)).code).toBe(0);
    await waitFor(
      () => json<FleetRolloutStatus>('rollout', 'status', r),
      (s) => s.phase === 'Paused',
    );
    expect((await cli('rollout', 'resume', r)).code).toBe(0);
    await waitFor(
      () => json<FleetRolloutStatus>('rollout', 'status', r),
      (s) => s.phase === 'Running',
    );
    expect((await cli('rollout', 'abort', r, '--reason', 'bad canary', '--abort-in-flight')).code).toBe(0);
    const aborted = await waitFor(
      () => json<FleetRolloutStatus>('rollout', 'status', r),
      (s) => s.phase === 'Aborted',
    );
    expect(aborted.message).toBe('aborted: bad canary');
    expect(fleet.aborted.length).toBeGreaterThan(0);
    expect(await cli('rollout', 'pause', r)).toMatchObject({
      code: 2,
      stderr: `capi-upgrades: rollout ${r} has ended (COMPLETED)\n`,
    });
  });

  it('refuses bad input before starting anything, naming the field, exit code 2', async () => {
    expect(
      await cli('rollout', 'start', 'bad', '--selector', 'x=y', '--version', 'v1.33.0', '--waves', '1,50%'),
    ).toMatchObject({
      code: 2,
      stderr: 'capi-upgrades: rollout start: waves must end at 100% (the last wave is "50%")\n',
    });
    expect(
      await cli('rollout', 'start', 'bad', '--selector', 'x=y', '--version', 'v1.33.0', '--failure-budget=-1'),
    ).toMatchObject({
      code: 2,
      stderr: 'capi-upgrades: rollout start: failureBudget must be a whole number ≥ 0, got -1\n',
    });
    expect(await cli('rollout', 'status', 'nope')).toMatchObject({
      code: 2,
      stderr: 'capi-upgrades: no rollout named nope\n',
    });
    // An empty selection is refused by the rollout itself, once it has looked.
    fleet = new FakeFleet(0);
    expect(
      await cli('rollout', 'start', `${name}-empty`, '--selector', 'env=nowhere', '--version', 'v1.33.0'),
    ).toMatchObject({
      code: 2,
      stderr: `capi-upgrades: rollout ${name}-empty refused: selector matched no clusters (labelSelector "env=nowhere"): nothing to roll out\n`,
    });
  });
});
