// The CLI's `--watch` views and loop, and its shell completion (the bash script run by a real bash).
import { describe, expect, it } from '@jest/globals';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { complete, completionScript, type CompletionLookup } from '../../src/cli/completion.ts';
import { UsageError, type UpgradeReport } from '../../src/cli/operations.ts';
import { rolloutProgress, upgradeProgress, type Progress } from '../../src/cli/progress.ts';
import { parseWatchDuration, watch } from '../../src/cli/watch.ts';
import type { FleetRolloutStatus } from '../../src/model/fleet-rollout.ts';

const run = promisify(execFile);

function report(over: Partial<UpgradeReport['run']>, memo: NonNullable<UpgradeReport['memo']>): UpgradeReport {
  return {
    run: {
      cluster: 'fleet-a/prod-1',
      targetVersion: 'v1.33.0',
      phase: memo.phase,
      status: 'RUNNING',
      workflowId: 'wf',
      runId: 'r',
      startTime: '2026-11-25T10:00:00.000Z',
      ...over,
    },
    memo,
    machineUpdates: [],
  };
}

const gate = (state: 'Waiting' | 'Open' | 'Failed', message: string) => ({ state, message, retryAfterSeconds: 0 });

describe('upgradeProgress', () => {
  it('says steps done, machines done/total and what holds the upgrade, and does not end while it runs', () => {
    const r = report({}, {
      phase: 'Upgrading',
      targetVersion: 'v1.33.0',
      gates: {
        'BeforeClusterUpgrade@v1.33.0': gate('Open', 'ok'),
        'BeforeWorkersUpgrade@v1.33.0': gate('Waiting', 'BeforeWorkersUpgrade v1.33.0: 2 machines updating'),
      },
    } as NonNullable<UpgradeReport['memo']>);
    const p = upgradeProgress(r, { total: 5, byPhase: { Succeeded: 3, Updating: 2 } });
    expect(p.text).toBe(
      [
        'fleet-a/prod-1  v1.33.0  Upgrading',
        'steps:     1 done, 1 waiting, 0 failed',
        'machines:  3/5 updated in place (2 updating)',
        'holds:     BeforeWorkersUpgrade v1.33.0: 2 machines updating',
      ].join('\n'),
    );
    expect(p.exitCode).toBeUndefined();
  });

  it('says a step held by the alert gate once, on the gate’s line', () => {
    const message = 'upgrade to v1.33.0 held: alert KubeNodeNotReady firing in prometheus (gate alerts)';
    const r = report({}, {
      phase: 'Upgrading',
      targetVersion: 'v1.33.0',
      gates: { 'BeforeClusterUpgrade@v1.33.0': gate('Waiting', `BeforeClusterUpgrade v1.33.0: ${message}`) },
    } as NonNullable<UpgradeReport['memo']>);
    r.status = {
      phase: 'Upgrading',
      targetVersion: 'v1.33.0',
      alerts: {
        held: { step: 'BeforeClusterUpgrade v1.33.0', since: '2026-11-25T10:01:00.000Z', message, firing: [] },
      },
    } as unknown as NonNullable<UpgradeReport['status']>;
    const text = upgradeProgress(r).text;
    expect(text.split(message).length - 1).toBe(1);
    expect(text).toContain(
      `held by:   alerts at BeforeClusterUpgrade v1.33.0 since 2026-11-25T10:01:00.000Z: ${message}`,
    );
    expect(text).not.toContain('holds:');
  });

  it('says an aborted or failed upgrade’s halt from the status query, not the step it was waiting at', () => {
    const r = report({}, {
      phase: 'Pending',
      targetVersion: 'v1.33.0',
      gates: { 'BeforeClusterUpgrade@v1.33.0': gate('Waiting', 'BeforeClusterUpgrade v1.33.0: waiting for upgradeAt') },
    } as NonNullable<UpgradeReport['memo']>);
    // As upgradeStatus returns it when a worker answered the query: status, no memo.
    r.status = {
      phase: 'Aborted',
      targetVersion: 'v1.33.0',
      reason: 'manual check',
      gates: r.memo!.gates,
    } as unknown as NonNullable<UpgradeReport['status']>;
    delete r.memo;
    const p = upgradeProgress(r);
    expect(p.text).toContain('holds:     upgrade to v1.33.0 aborted: manual check; signal "resume" to continue');
    expect(p.text).not.toContain('waiting for upgradeAt');
    expect(p.exitCode).toBe(1);
  });

  it('ends 0 when upgraded, 1 when failed, aborted or closed without upgrading', () => {
    const memo = (phase: string) =>
      ({ phase, targetVersion: 'v1.33.0', gates: {} }) as unknown as NonNullable<UpgradeReport['memo']>;
    expect(upgradeProgress(report({ status: 'COMPLETED' }, memo('Upgraded'))).exitCode).toBe(0);
    expect(upgradeProgress(report({}, memo('Failed'))).exitCode).toBe(1);
    expect(upgradeProgress(report({}, memo('Aborted'))).exitCode).toBe(1);
    const terminated = upgradeProgress(report({ status: 'TERMINATED' }, memo('Upgrading')));
    expect(terminated).toMatchObject({
      exitCode: 1,
      text: expect.stringContaining('workflow:  TERMINATED') as unknown,
    });
  });
});

describe('rolloutProgress', () => {
  const status = (phase: FleetRolloutStatus['phase']): FleetRolloutStatus => ({
    name: 'q4',
    targetVersion: 'v1.33.0',
    phase,
    message: 'wave 2: 1 of 3 clusters upgrading',
    startTime: '2026-11-25T10:00:00.000Z',
    waves: [
      { wave: 1, size: 1, state: 'done' },
      { wave: 2, size: 3, state: 'running' },
    ],
    clusters: [
      { namespace: 'a', name: 'c1', uid: '1', version: 'v1.32.0', wave: 1, state: 'done' },
      { namespace: 'a', name: 'c2', uid: '2', version: 'v1.32.0', wave: 2, state: 'upgrading' },
      { namespace: 'a', name: 'c3', uid: '3', version: 'v1.32.0', wave: 2, state: 'deferred' },
      { namespace: 'a', name: 'c4', uid: '4', version: 'v1.32.0', wave: 2, state: 'pending' },
      { namespace: 'a', name: 'c5', uid: '5', version: 'v1.32.0', state: 'skipped', skip: 'no topology' },
    ],
  });
  it('counts waves and clusters, and ends with the rollout', () => {
    const p = rolloutProgress(status('Running'));
    expect(p.text).toBe(
      [
        'rollout q4 → v1.33.0  Running',
        'waves:     1/2 done, wave 2 running',
        'clusters:  1/4 upgraded (1 upgrading, 1 pending, 1 deferred, 1 skipped)',
        'now:       wave 2: 1 of 3 clusters upgrading',
        'held by:   capi-pacing on a/c3: deferred by CAPI annotation',
      ].join('\n'),
    );
    expect(p.exitCode).toBeUndefined();
    expect(rolloutProgress(status('Completed')).exitCode).toBe(0);
    expect(rolloutProgress(status('Stopped')).exitCode).toBe(1);
    expect(rolloutProgress(status('Aborted')).exitCode).toBe(1);
  });
  it('shows what the look ahead found in the next wave', () => {
    const message = 'wave 3: 1 of 2 clusters will hold it: a/c9: node n1 NotReady';
    const nextWave = { wave: 3, state: 'checked' as const, checked: 2, holding: [], message };
    expect(rolloutProgress({ ...status('Running'), nextWave }).text).toContain(`\nnext wave: ${message}`);
  });
});

describe('watch', () => {
  const reads = (views: (Progress | Error)[]) => {
    let i = 0;
    return async () => {
      const v = views[Math.min(i++, views.length - 1)]!;
      if (v instanceof Error) throw v;
      return v;
    };
  };

  it('prints each changed view once into a pipe, survives a failed read, and returns the end code', async () => {
    let out = '';
    const code = await watch({
      read: reads([
        { text: 'a' },
        { text: 'a' },
        new Error('deadline exceeded'),
        { text: 'b' },
        { text: 'c', exitCode: 0 },
      ]),
      intervalMs: 1,
      write: (t) => (out += t),
      tty: false,
    });
    expect(code).toBe(0);
    expect(out).toBe('a\n\na\n(read failed: deadline exceeded; retrying)\n\nb\n\nc\n');
  });

  it('redraws in place on a terminal', async () => {
    let out = '';
    await watch({
      read: reads([{ text: 'a' }, { text: 'b', exitCode: 1 }]),
      intervalMs: 1,
      write: (t) => (out += t),
      tty: true,
    });
    expect(out).toBe('\x1b[H\x1b[2Ja\n\x1b[H\x1b[2Jb\n');
  });

  it('gives up at the timeout (exit 1), and on a usage error or too many failed reads at once', async () => {
    let out = '';
    const code = await watch({
      read: reads([{ text: 'held' }]),
      intervalMs: 20,
      timeoutMs: 50,
      write: (t) => (out += t),
      tty: false,
    });
    expect(code).toBe(1);
    expect(out).toMatch(/timed out waiting for the run to end\n$/);
    await expect(
      watch({ read: reads([new UsageError('no upgrade found')]), intervalMs: 1, write: () => {}, tty: false }),
    ).rejects.toThrow('no upgrade found');
    await expect(
      watch({ read: reads([new Error('unavailable')]), intervalMs: 1, write: () => {}, tty: false, maxFailures: 3 }),
    ).rejects.toThrow('unavailable');
  });

  it('takes durations in s, m and h, and names the flag of a bad one', () => {
    expect(parseWatchDuration('interval', '5s')).toBe(5_000);
    expect(parseWatchDuration('timeout', '2h')).toBe(7_200_000);
    expect(parseWatchDuration('timeout', undefined)).toBeUndefined();
    expect(parseWatchDuration('interval', undefined, 2_000)).toBe(2_000);
    expect(() => parseWatchDuration('interval', '0s')).toThrow('--interval 0s: at least 1s');
    expect(() => parseWatchDuration('timeout', '10')).toThrow('--timeout 10: expected a duration');
  });
});

describe('completion', () => {
  const lookup: CompletionLookup = {
    clusters: async () => ['fleet-a/prod-1', 'fleet-a/prod-2', 'fleet-b/edge-1'],
    rollouts: async () => ['q4-patch'],
  };
  const lines = async (...words: string[]) => (await complete(words, lookup)).trimEnd().split('\n');

  it('completes commands, options, their values and the names Temporal knows, never files', async () => {
    expect(await lines('')).toEqual([
      'list',
      'status',
      'abort',
      'resume',
      'retry',
      'history',
      'readiness',
      'rollout',
      'completion',
      'demo',
      ':4',
    ]);
    expect(await lines('ro')).toEqual(['rollout', ':4']);
    expect(await lines('status', 'fleet-a/')).toEqual(['fleet-a/prod-1', 'fleet-a/prod-2', ':4']);
    expect(await lines('status', 'fleet-a/prod-1', '--w')).toEqual(['--watch', ':4']);
    expect(await lines('list', '--phase', 'F')).toEqual(['Failed', ':4']);
    expect(await lines('readiness', 'fleet-a/prod-1', '--')).toEqual([
      '--to',
      '--setting',
      '--all',
      '--namespace',
      '--max-concurrent',
      ':4',
    ]);
    expect(await lines('rollout', 'st')).toEqual(['start', 'status', ':4']);
    expect(await lines('rollout', 'approve', '')).toEqual(['q4-patch', ':4']);
    expect(await lines('rollout', 'list', '')).toEqual([':4']);
    expect(await lines('completion', '')).toEqual(['bash', 'zsh', ':4']);
  });

  it('the bash script completes through the program itself, in a real bash', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'completion-'));
    try {
      // The program as a user has it on PATH: this checkout's CLI, with no Temporal to ask.
      const program = join(dir, 'capi-upgrades');
      await writeFile(
        program,
        `#!/usr/bin/env bash\nexec ${JSON.stringify(process.execPath)} --disable-warning=ExperimentalWarning ${JSON.stringify(resolve('src/cli/capi-upgrades.ts'))} "$@"\n`,
        { mode: 0o755 },
      );
      const script = completionScript('bash', 'capi-upgrades');
      const { stdout } = await run(
        'bash',
        [
          '-c',
          `${script}\nCOMP_WORDS=(capi-upgrades rollout s); COMP_CWORD=2; _capi_upgrades; printf '%s\\n' "\${COMPREPLY[@]}"`,
        ],
        { env: { PATH: `${dir}:${process.env.PATH ?? ''}`, TEMPORAL_ADDRESS: '127.0.0.1:1' } },
      );
      expect(stdout).toBe('start\nstatus\n');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('refuses a shell it has no script for', () => {
    expect(() => completionScript('fish', 'capi-upgrades')).toThrow('completion fish: expected bash or zsh');
  });
});
