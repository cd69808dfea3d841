// The dev server's start when its first try dies: the test setup starts several
// stacks at once, and a dev server that loses one of its ports to a neighbour
// exits before it answers. The start is tried again on new ports, and when it
// never comes up the error carries the server's own last words (its log lives
// in a temp dir that is gone by the time anyone reads CI's output).
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { Connection } from '@temporalio/client';
import { startDevServer, type DevServer } from '../../src/local/temporal-dev-server.ts';

const TEMPORAL = process.env.TEMPORAL_CLI ?? 'temporal';
const PANIC = 'panic: listen tcp 127.0.0.1:7235: bind: address already in use';

describe('starting the Temporal dev server', () => {
  let dir: string;
  let server: DevServer | undefined;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'capi-uo-devstart-'));
  });
  afterEach(async () => {
    await server?.stop();
    server = undefined;
    jest.restoreAllMocks();
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  /** A `temporal` that dies like a lost port bind for its first `failures` runs, then is the real CLI. */
  function flakyCli(name: string, failures: number): { executable: string; runs: () => number } {
    const counter = join(dir, `${name}.runs`);
    writeFileSync(counter, '');
    const executable = join(dir, `${name}.sh`);
    writeFileSync(
      executable,
      `#!/usr/bin/env bash
echo run >> ${JSON.stringify(counter)}
if [ "$(wc -l < ${JSON.stringify(counter)})" -le ${failures} ]; then echo ${JSON.stringify(PANIC)}; exit 2; fi
exec ${JSON.stringify(TEMPORAL)} "$@"
`,
    );
    chmodSync(executable, 0o755);
    return { executable, runs: () => readFileSync(counter, 'utf8').split('\n').filter(Boolean).length };
  }

  it('tries again on new ports when the first server exits before it answers, and the second serves', async () => {
    const cli = flakyCli('once', 1);
    const warn = jest.spyOn(console, 'warn').mockImplementation(() => {});
    server = await startDevServer({
      executable: cli.executable,
      dbFilename: join(dir, 'once.db'),
      logFile: join(dir, 'once.log'),
      uiPort: 0,
    });
    expect(cli.runs()).toBe(2);
    expect(warn).toHaveBeenCalledTimes(1);
    expect(String(warn.mock.calls[0]?.[0])).toContain(PANIC);
    expect(String(warn.mock.calls[0]?.[0])).toContain('trying again (2 of 3)');
    // A Web UI port asked as 0 is a real one.
    expect(server.uiUrl).toMatch(/^http:\/\/localhost:[1-9]\d*$/);
    const connection = await Connection.connect({ address: server.address });
    try {
      const { namespaceInfo } = await connection.workflowService.describeNamespace({ namespace: server.namespace });
      expect(namespaceInfo?.name).toBe('default');
    } finally {
      await connection.close();
    }
  });

  it('gives up after its attempts with the server log in the error', async () => {
    const cli = flakyCli('never', 99);
    jest.spyOn(console, 'warn').mockImplementation(() => {});
    const start = startDevServer({
      executable: cli.executable,
      dbFilename: join(dir, 'never.db'),
      logFile: join(dir, 'never.log'),
      attempts: 3,
    });
    await expect(start).rejects.toThrow(/exited with 2 before it answered on 127\.0\.0\.1:\d+/);
    await expect(start).rejects.toThrow(PANIC);
    expect(cli.runs()).toBe(3);
  });
});
