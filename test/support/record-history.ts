// `RECORD_HISTORIES=1 make test-workflow` writes the histories of chosen test
// runs to test/fixtures/histories, exported with the temporal CLI (the
// documented way; protobufjs's JSON writer trips over jest's module
// registries); the replay test replays every file there.
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { promisify } from 'node:util';
import type { Client } from '@temporalio/client';
import { requireEnv } from './services.ts';

const run = promisify(execFile);

export async function recordHistoryIfAsked(
  _client: Client,
  workflowId: string,
  name: string,
  runId?: string,
): Promise<void> {
  if (!process.env.RECORD_HISTORIES) return;
  const args = [
    'workflow',
    'show',
    '--address',
    requireEnv('TEMPORAL_ADDRESS'),
    '--namespace',
    requireEnv('TEMPORAL_NAMESPACE'),
    '--workflow-id',
    workflowId,
    '--output',
    'json',
  ];
  if (runId) args.push('--run-id', runId);
  const { stdout } = await run(process.env.TEMPORAL_CLI ?? 'temporal', args, { maxBuffer: 64 * 1024 * 1024 });
  writeFileSync(new URL(`../fixtures/histories/${name}.json`, import.meta.url), stdout);
}
