// Chaos run (not a test: `make test` runs its short version,
// test/integration/chaos.test.ts). In-place updates of N KWOK nodes with
// maxConcurrentMachineUpdates, played by CAPI over HTTPS in waves of newer desired
// specs, while a seeded schedule injects faults: SIGKILL of a worker, an api or the
// Temporal server (restarted after a pause), SIGSTOP of the workload kube-apiserver,
// a PDB allowing 0 disruptions, a node agent failing once, an operator abort followed
// by a new desired spec, a newer desired spec mid-update. At the end: the invariants
// and the figures. It starts everything it uses and stops it all on exit, Ctrl-C included.
//
//   make chaos [BENCH_ARGS='--seed 42 --faults 100 --max-minutes 40 --nodes 50 --limit 5']
//
// The same --seed replays the same schedule (kinds, times, pauses, targets).
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { formatReport, runChaos } from '../support/chaos/run.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      seed: { type: 'string' },
      faults: { type: 'string', default: '100' },
      'max-minutes': { type: 'string', default: '45' },
      'fault-minutes': { type: 'string' },
      nodes: { type: 'string', default: '50' },
      limit: { type: 'string', default: '5' },
      apis: { type: 'string', default: '2' },
      workers: { type: 'string', default: '2' },
      'agent-delay': { type: 'string', default: '3' },
      short: { type: 'boolean', default: false },
      keep: { type: 'boolean', default: false },
    },
  });
  const seed = values.seed !== undefined ? Number(values.seed) : Math.floor(Math.random() * 2 ** 31);
  const faults = Number(values.faults);
  const maxMinutes = Number(values['max-minutes']);
  // By default the faults take the first two thirds of the time, leaving the rest to converge.
  const faultMinutes = values['fault-minutes'] !== undefined ? Number(values['fault-minutes']) : (maxMinutes * 2) / 3;
  for (const [name, v] of Object.entries({ seed, faults, maxMinutes, faultMinutes }))
    if (!Number.isFinite(v) || v < 0) throw new Error(`--${name}: not a number`);
  console.log(`seed ${seed} (replay: --seed ${seed})`);
  let stopper: { stop: () => Promise<void>; killNow: () => void } | undefined;
  let stopping = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    console.log(`${signal}: stopping everything started`);
    void (stopper?.stop() ?? Promise.resolve()).finally(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  process.once('exit', () => stopper?.killNow());
  const report = await runChaos({
    root: ROOT,
    seed,
    faults,
    maxMinutes,
    faultWindowMs: faultMinutes * 60_000,
    nodes: Number(values.nodes),
    limit: Number(values.limit),
    apis: Number(values.apis),
    workers: Number(values.workers),
    agentDelayMs: Number(values['agent-delay']) * 1000,
    short: values.short,
    keep: values.keep,
    log: (line) => console.log(line),
    onStopper: (s) => (stopper = s),
  });
  console.log('');
  for (const line of formatReport(report)) console.log(line);
  // The replay: the same arguments with the seed drawn.
  const args = process.argv.slice(2).filter((a, i, all) => a !== '--seed' && all[i - 1] !== '--seed');
  console.log(`\ncommand: make chaos BENCH_ARGS='--seed ${seed} ${args.join(' ')}'`);
  if (report.broken.length > 0) process.exitCode = 1;
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
