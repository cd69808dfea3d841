// `capi-upgrades demo` from a checkout (bin/capi-upgrades sends `demo` here) and `make demo`:
// the demo (demo.ts) on the running `make dev` whose data dir it finds (CAPI_UO_DATA_DIR or the
// checkout's .data/). Exit 0 when both Clusters are upgraded, 2 for a usage error, 1 otherwise.
import { parseArgs } from 'node:util';
import { UsageError } from '../cli/operations.ts';
import { parseWatchDuration } from '../cli/watch.ts';
import { DemoUsageError, checkDemoVersions, runDemo } from './demo.ts';
import { readDevState } from './dev-state.ts';

const USAGE = `usage: capi-upgrades demo [--from v1.33.0] [--to v1.35.0] [--rolling-only] [--timeout 60m] [-o json]

  on a running \`make dev\`: a topology Cluster of CAPD's in-memory ClusterClass upgraded through Cluster API
  and the extension by replacement, then one in place (--rolling-only: the first only); docs/try-it.md`;

async function main(argv: string[]): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        from: { type: 'string' },
        to: { type: 'string' },
        'rolling-only': { type: 'boolean' },
        timeout: { type: 'string' },
        output: { type: 'string', short: 'o' },
        help: { type: 'boolean', short: 'h' },
      },
    }));
  } catch (err) {
    throw new DemoUsageError((err instanceof Error ? err.message : String(err)).split('\n')[0] ?? 'bad arguments');
  }
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  const json = values.output === 'json';
  if (values.output !== undefined && !json) throw new DemoUsageError(`-o ${values.output}: only json is supported`);
  const from = values.from ?? 'v1.33.0';
  const to = values.to ?? 'v1.35.0';
  checkDemoVersions(from, to);
  let state;
  try {
    state = readDevState();
  } catch (err) {
    throw new DemoUsageError(err instanceof Error ? err.message : String(err));
  }
  const result = await runDemo(state, {
    from,
    to,
    inPlace: values['rolling-only'] !== true,
    timeoutMs: parseWatchDuration('timeout', values.timeout, 60 * 60_000)!,
    // With -o json the progress goes to stderr, the result alone to stdout.
    write: (line) => (json ? console.error(line) : console.log(line)),
  });
  if (json) console.log(JSON.stringify(result, null, 2));
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    const usage = err instanceof DemoUsageError || err instanceof UsageError;
    console.error(`capi-upgrades demo: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(usage ? 2 : 1);
  },
);
