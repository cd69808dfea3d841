// The ops port the docs name (`curl 127.0.0.1:8080/metrics`) is the one `make dev` and the image listen on.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { parseConfig } from '../../src/config/index.ts';

const ROOT = join(import.meta.dirname, '../..');
const read = (path: string) => readFileSync(join(ROOT, path), 'utf8');

describe('the ops port', () => {
  it('is 8080 by default, as the README and docs/operations.md say', () => {
    expect(read('README.md')).toContain('the ops port 8080');
    expect(read('docs/operations.md')).toContain('The ops port (8080');
    expect(parseConfig({}).ops.port).toBe(8080);
  });

  it('is not overridden by make dev (src/local/dev.ts), which prints it in its banner', () => {
    // make dev passes its own settings over the environment's defaults: an OPS_SERVER_PORT there would win over
    // the documented one (it was '0', any free port, printed nowhere). The CAPI tier gives OPS_SERVER_PORT=0 itself.
    const dev = read('src/local/dev.ts');
    expect(dev).not.toMatch(/^\s*OPS_SERVER_PORT:/m);
    expect(dev).toMatch(/^ {2}Ops server {9}\$\{running\.opsServer\.url\}/m);
    expect(read('test/support/capi-tier.ts')).toContain("OPS_SERVER_PORT: '0'");
  });
});
