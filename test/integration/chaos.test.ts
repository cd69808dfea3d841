// The short version of `make chaos` (bench/chaos.ts): the same code with a
// fixed seed, ~10 faults over a few minutes, on a test bed, Temporal dev server, apis
// and workers of its own (it SIGKILLs and SIGSTOPs them: the tier's shared ones must
// not be). Every invariant must hold; a broken one prints its cases.
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from '@jest/globals';
import { formatReport, runChaos } from '../../support/chaos/run.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
/** Its 10 faults draw every kind (schedule.ts), the API server stopped twice and the PDB twice. */
const SEED = 87;

describe('a short chaos run', () => {
  let stopper: { stop: () => Promise<void>; killNow: () => void } | undefined;
  afterAll(async () => {
    // runChaos stops what it started itself; this is for a jest timeout in the middle of it.
    await stopper?.stop();
  });

  it('10 seeded faults through in-place updates of 10 KWOK nodes: every invariant holds', async () => {
    const report = await runChaos({
      root: ROOT,
      seed: SEED,
      faults: 10,
      maxMinutes: 8,
      faultWindowMs: 120_000,
      nodes: 10,
      limit: 3,
      apis: 2,
      workers: 2,
      short: true,
      agentDelayMs: 2_000,
      log: (line) => console.log(line),
      onStopper: (s) => (stopper = s),
    });
    console.log(formatReport(report).join('\n'));
    expect(report.faults).toHaveLength(10);
    expect(report.broken).toEqual([]);
    expect(report.converged).toBe(true);
  }, 1_500_000);
});
