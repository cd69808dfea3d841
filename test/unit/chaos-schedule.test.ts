import { describe, expect, it } from '@jest/globals';
import { FAULT_KINDS, planFaults } from '../../bench/lib/chaos/schedule.ts';

describe('the chaos schedule', () => {
  const options = { seed: 42, faults: 100, windowMs: 30 * 60_000, short: false };

  it('is the same for the same seed (--seed N replays it) and another for another seed', () => {
    expect(planFaults(options)).toEqual(planFaults(options));
    expect(planFaults({ ...options, seed: 43 })).not.toEqual(planFaults(options));
  });

  it('holds the bounds: the number of faults, times in order within ~the window, pauses in range', () => {
    const plan = planFaults(options);
    expect(plan).toHaveLength(100);
    expect(plan.map((f) => f.atMs)).toEqual([...plan.map((f) => f.atMs)].sort((a, b) => a - b));
    expect(plan.at(-1)!.atMs).toBeLessThanOrEqual(1.5 * options.windowMs);
    const stops = plan.filter((f) => f.kind === 'stop-workload-apiserver');
    expect(stops.length).toBeGreaterThan(0);
    for (const f of stops) expect(f.pauseMs).toBeGreaterThanOrEqual(5_000);
    for (const f of stops) expect(f.pauseMs).toBeLessThanOrEqual(60_000);
    for (const f of planFaults({ ...options, short: true })) expect(f.pauseMs).toBeLessThanOrEqual(8_000);
  });

  it('draws every kind over a long run', () => {
    const kinds = new Set(planFaults(options).map((f) => f.kind));
    expect([...kinds].sort()).toEqual([...FAULT_KINDS].sort());
  });
});
