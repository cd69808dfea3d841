// Temp directories that name their owner: a later run takes down what a killed one left
// running (the fleet benchmark's management test bed), and nothing whose owner lives.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import { ownedTempDir, reapOrphanedDirs } from '../../support/owned-dirs.ts';

/** The pid of a process that has ended (and been waited for). */
function deadPid(): number {
  const child = spawnSync('sh', ['-c', 'echo $$'], { encoding: 'utf8' });
  return Number(child.stdout.trim());
}

describe('owned temp directories', () => {
  const parent = mkdtempSync(join(tmpdir(), 'capi-uo-owned-'));
  afterAll(() => rmSync(parent, { recursive: true, force: true }));

  it('takes down and removes the directories whose owner is gone, and only those', async () => {
    const orphan = ownedTempDir('bench-mgmt-', parent);
    const dead = deadPid();
    writeFileSync(join(orphan, 'owner.pid'), String(dead));
    const ours = ownedTempDir('bench-mgmt-', parent);
    const unmarked = join(parent, 'bench-mgmt-unmarked');
    mkdirSync(unmarked);
    const otherPrefix = ownedTempDir('something-else-', parent);
    writeFileSync(join(otherPrefix, 'owner.pid'), String(dead));

    const takenDown: string[] = [];
    const reaped = await reapOrphanedDirs(
      'bench-mgmt-',
      async (dir) => {
        // Taken down while its state is still there to read.
        expect(existsSync(join(dir, 'owner.pid'))).toBe(true);
        takenDown.push(dir);
      },
      parent,
    );

    expect(takenDown).toEqual([orphan]);
    expect(reaped).toEqual([{ dir: orphan, owner: dead }]);
    expect(existsSync(orphan)).toBe(false);
    expect(existsSync(ours)).toBe(true);
    expect(existsSync(unmarked)).toBe(true);
    expect(existsSync(otherPrefix)).toBe(true);
  });

  it('leaves a directory whose owner file is not a pid', async () => {
    const garbled = ownedTempDir('bench-mgmt-', parent);
    writeFileSync(join(garbled, 'owner.pid'), '../../etc');
    const reaped = await reapOrphanedDirs('bench-mgmt-', async () => {}, parent);
    expect(reaped).toEqual([]);
    expect(existsSync(garbled)).toBe(true);
  });
});

describe('bench/fleet.ts options', () => {
  it('refuses --request-checks without a management cluster, before it starts anything', () => {
    const run = spawnSync(
      process.execPath,
      ['--disable-warning=ExperimentalWarning', 'bench/fleet.ts', '--request-checks', 'on'],
      { encoding: 'utf8', timeout: 60_000 },
    );
    expect(run.status).toBe(1);
    expect(run.stderr).toContain('--request-checks needs --management testbed');
    // The checkout's own path (a worktree may be named after Temporal) is no mention of it.
    expect(run.stderr.replaceAll(process.cwd(), '.')).not.toContain('temporal');
  });
});
