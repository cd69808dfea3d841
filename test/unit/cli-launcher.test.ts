// `capi-upgrades` from a checkout (bin/capi-upgrades, and `npm run capi-upgrades`), on the Node a user has: the
// README's commands run on the tool cache's Node 24 when this shell's Node cannot run TypeScript, and say in one
// line how to get it when there is none (not ERR_UNKNOWN_FILE_EXTENSION).
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';

const ROOT = join(import.meta.dirname, '../..');
const scratch = mkdtempSync(join(tmpdir(), 'capi-uo-launcher-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** A `node` first on PATH that cannot strip types, as Node 20 (this Node with type stripping off). */
function oldNodeDir(): string {
  const dir = join(scratch, 'old-node');
  mkdirSync(dir, { recursive: true });
  const shim = join(dir, 'node');
  writeFileSync(shim, `#!/bin/sh\nexec '${process.execPath}' --no-experimental-strip-types "$@"\n`);
  chmodSync(shim, 0o755);
  return dir;
}

/** A tool cache holding this Node as its Node 24, as scripts/env.sh installs it. */
function cacheWithNode(): string {
  const cache = join(scratch, 'cache');
  const bin = join(cache, 'node-24', 'node_modules', '.bin');
  mkdirSync(bin, { recursive: true });
  const node = join(bin, 'node');
  writeFileSync(node, `#!/bin/sh\nexec '${process.execPath}' "$@"\n`);
  chmodSync(node, 0o755);
  return cache;
}

function run(command: string, args: string[], cache: string) {
  const npmDir = dirname(spawnSync('sh', ['-c', 'command -v npm'], { encoding: 'utf8' }).stdout.trim());
  return spawnSync(command, args, {
    cwd: ROOT,
    encoding: 'utf8',
    env: {
      PATH: `${oldNodeDir()}:${npmDir}:/usr/bin:/bin`,
      HOME: process.env.HOME,
      CAPI_UO_CACHE: cache,
      // npm keeps compiled modules in /tmp unless told where: a run leaves nothing there.
      NODE_COMPILE_CACHE: join(cache, 'node-compile-cache'),
    },
  });
}

const built = existsSync(join(ROOT, 'dist/cli/capi-upgrades.js'));

describe('capi-upgrades from a checkout', () => {
  it.each([
    ['bin/capi-upgrades', ['--help']],
    ['npm', ['run', '--silent', 'capi-upgrades', '--', '--help']],
  ])('%s runs on the tool cache Node 24 when this shell has an older Node', (command, args) => {
    const r = run(command, args, cacheWithNode());
    expect(r.stderr).toBe('');
    expect(r.stdout).toMatch(/^usage: capi-upgrades <command>/);
    expect(r.status).toBe(0);
  });

  it.each([
    ['bin/capi-upgrades', ['list']],
    ['npm', ['run', '--silent', 'capi-upgrades', '--', 'list']],
  ])('%s without Node 24 says in one line how to get it', (command, args) => {
    if (built) return; // then the build runs on any Node: nothing to say
    const r = run(command, args, join(scratch, 'empty-cache'));
    expect(r.stderr).not.toContain('ERR_UNKNOWN_FILE_EXTENSION');
    expect(r.stderr.split('\n')[0]).toMatch(/^capi-upgrades: needs Node 24 .*make env/);
    expect(r.status).not.toBe(0);
  });
});
