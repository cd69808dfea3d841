// `RECORD_HISTORIES=1 make test-workflow` writes the histories of chosen test
// runs to test/fixtures/histories, exported with the temporal CLI (the
// documented way; protobufjs's JSON writer trips over jest's module
// registries); the replay test replays every file there.
import { writeFileSync } from 'node:fs';
import type { Client } from '@temporalio/client';
import { temporalCli } from './temporal-cli.ts';

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
    '--workflow-id',
    workflowId,
    '--output',
    'json',
    ...(runId ? ['--run-id', runId] : []),
  ];
  writeFileSync(new URL(`../fixtures/histories/${name}.json`, import.meta.url), await temporalCli(args));
}
