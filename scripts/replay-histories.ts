// Replays workflow histories against a workflow bundle and prints one JSON
// line per history: {"file","ok","error"?}. Exit 1 when any fails.
//   node scripts/replay-histories.ts <bundle.js> <history.json>...
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';
import { DefaultLogger, Runtime, Worker } from '@temporalio/worker';

const [bundle, ...files] = process.argv.slice(2);
if (!bundle || files.length === 0) {
  console.error('usage: node scripts/replay-histories.ts <bundle.js> <history.json>...');
  process.exit(2);
}
Runtime.install({ logger: new DefaultLogger('ERROR') });
let failed = 0;
for (const file of files) {
  const history = JSON.parse(readFileSync(file, 'utf8')) as unknown;
  try {
    await Worker.runReplayHistory({ workflowBundle: { codePath: bundle } }, history, `replay-${basename(file)}`);
    console.log(JSON.stringify({ file: basename(file), ok: true }));
  } catch (err) {
    failed++;
    console.log(
      JSON.stringify({
        file: basename(file),
        ok: false,
        error: `${(err as Error).name}: ${(err as Error).message}`.slice(0, 500),
      }),
    );
  }
}
process.exit(failed ? 1 : 0);
