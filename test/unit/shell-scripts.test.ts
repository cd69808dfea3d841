// The project's own bash (bootstrap, test bed, CAPI tier, CI) under shellcheck:
// a quoting slip there breaks a fresh machine's first `make test`. The node
// upgrade script has its own POSIX-sh check beside its tests.
import { describe, expect, it } from '@jest/globals';
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';

const ROOT = new URL('../..', import.meta.url).pathname;
const scripts = [
  ...readdirSync(join(ROOT, 'scripts'))
    .filter((f) => f.endsWith('.sh'))
    .map((f) => `scripts/${f}`),
  '.ci/run',
  'bin/capi-upgrades',
];

describe('project shell scripts', () => {
  it('finds the scripts it checks', () => {
    expect(scripts).toEqual(
      expect.arrayContaining(['scripts/env.sh', 'scripts/testbed.sh', '.ci/run', 'bin/capi-upgrades']),
    );
  });

  it.each(scripts)('%s passes shellcheck', (script) => {
    const r = spawnSync('shellcheck', ['-x', script], { cwd: ROOT, encoding: 'utf8' });
    expect(r.error).toBeUndefined();
    expect(r.stdout + r.stderr).toBe('');
    expect(r.status).toBe(0);
  });
});
