// Closing the Temporal clients while a call waits for its retry: @temporalio/client's retry timer
// outlives Connection.close() and throws from grpc-js when it fires. A process stopping in order
// (make dev with its management cluster still to stop) must not die of it.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from '@jest/globals';

const run = promisify(execFile);
const CHILD = new URL('../support/closed-channel-child.ts', import.meta.url).pathname;

describe('TemporalClients.close', () => {
  it('leaves the process up when a call retries after the close', async () => {
    // Port 1 on loopback: nothing listens, every attempt is refused at once and retried.
    const { stdout, stderr } = await run(process.execPath, ['--disable-warning=ExperimentalWarning', CHILD, '1'], {
      timeout: 30_000,
    }).catch((err: { stdout?: string; stderr?: string; code?: number }) => {
      throw new Error(`the process died (exit ${err.code}):\n${err.stderr ?? ''}`);
    });
    expect(stderr).not.toContain('Channel has been shut down');
    expect(stdout.trim()).toBe('survived');
  });
});
