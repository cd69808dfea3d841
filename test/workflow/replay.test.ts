// Replays recorded histories of today's code (RECORD_HISTORIES=1, see
// test/support/record-history.ts) against the workflow bundle: a change that
// would break running AUTO_UPGRADE runs (cluster upgrades, rollouts, slots)
// fails here, and then needs a patched() or a build whose runs are pinned
// (docs/worker-versioning.md). The replay runs in a child process: protobufjs's
// JSON reader trips over jest's module registries.
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from '@jest/globals';
import { requireEnv } from '../support/services.ts';

const dir = fileURLToPath(new URL('../fixtures/histories/', import.meta.url));
const files = readdirSync(dir)
  .filter((f) => f.endsWith('.json'))
  .map((f) => join(dir, f));

interface ReplayLine {
  file: string;
  ok: boolean;
  error?: string;
}

async function replay(paths: string[]): Promise<{ code: number; lines: ReplayLine[] }> {
  return await new Promise((resolve) => {
    execFile(
      process.execPath,
      [
        '--disable-warning=ExperimentalWarning',
        'scripts/replay-histories.ts',
        requireEnv('TEST_WORKFLOW_BUNDLE'),
        ...paths,
      ],
      { maxBuffer: 16 * 1024 * 1024 },
      (err, stdout) => {
        const lines = stdout
          .split('\n')
          .filter((l) => l.startsWith('{'))
          .map((l) => JSON.parse(l) as ReplayLine);
        resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, lines });
      },
    );
  });
}

describe('replay of recorded histories', () => {
  it('replays every recorded history deterministically', async () => {
    // The main paths of every long-lived workflow type (see record-history.ts for how they are made).
    expect(files.map((f) => f.replace(/.*\//, ''))).toEqual(
      expect.arrayContaining([
        'cluster-upgrade-chained-with-capacity.json',
        'cluster-upgrade-abort-and-resume.json',
        'cluster-upgrade-superseded.json',
        'cluster-upgrade-deleted-during-upgrade.json',
        'cluster-upgrade-continued-mid-wait.json',
        'cluster-upgrade-readiness-rechecked.json',
        'machine-update.json',
        'machine-update-aborted-while-queued.json',
        'machine-update-failed-and-retried.json',
        'machine-update-slots.json',
        'fleet-rollout-waves.json',
        'fleet-rollout-next-wave-checked.json',
      ]),
    );
    const { code, lines } = await replay(files);
    expect(lines.filter((l) => !l.ok)).toEqual([]);
    expect(lines).toHaveLength(files.length);
    expect(code).toBe(0);
  });

  it('fails on a history the code no longer matches', async () => {
    const source = files.find((f) => f.includes('cluster-upgrade-chained')) as string;
    const tampered = readFileSync(source, 'utf8').replace(/"checkClusterHealth"/, '"someOtherActivity"');
    const path = join(mkdtempSync(join(tmpdir(), 'replay-')), 'tampered.json');
    writeFileSync(path, tampered);
    const { code, lines } = await replay([path]);
    expect(code).toBe(1);
    expect(lines[0]?.ok).toBe(false);
    expect(lines[0]?.error).toMatch(/[Nn]ondeterminis/);
  });
});
