import { describe, expect, it } from '@jest/globals';
import type { HookAnswer } from '../../support/chaos/capi-player.ts';
import { untrueAnswers } from '../../support/chaos/invariants.ts';
import { FAULT_KINDS, planFaults } from '../../support/chaos/schedule.ts';
import type { MachineUpdateStatus } from '../../src/model/machine-update.ts';

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

describe("the chaos run's check of hook answers against the runs' record", () => {
  const id = 'machine-update/ns/m0/abc';
  const t = Date.parse('2026-01-01T00:00:00Z');
  const succeeded = (doneAt: number) =>
    new Map([
      [
        id,
        {
          phase: 'Succeeded',
          steps: [{ type: 'Uncordon', completeTime: new Date(doneAt).toISOString() }],
        } as unknown as MachineUpdateStatus,
      ],
    ]);
  const answer = (o: Partial<HookAnswer>): HookAnswer => ({
    machine: 0,
    version: 'v1.31.15',
    workflowId: id,
    sentAt: t,
    answeredAt: t + 100,
    status: 'Success',
    retryAfterSeconds: 10,
    message: 'updating',
    duringFault: false,
    ...o,
  });

  it('accepts answers true within 10 s: done after the last step, still running until it ended', () => {
    const answers = [
      answer({}),
      answer({ sentAt: t + 9_000, answeredAt: t + 9_100 }),
      answer({ sentAt: t + 20_000, answeredAt: t + 20_100, retryAfterSeconds: 0 }),
    ];
    expect(untrueAnswers(answers, succeeded(t + 5_000), new Set())).toEqual([]);
  });

  it('names a done the run does not back, a stale "still running", an internal error and an abort nobody sent', () => {
    const lies = untrueAnswers(
      [
        answer({ retryAfterSeconds: 0 }),
        answer({ sentAt: t + 30_000, answeredAt: t + 30_100 }),
        answer({ status: 'Failure', message: 'internal error in the UpdateMachine handler; see the extension logs' }),
        answer({ status: 'Failure', message: 'update of machine ns/m0 aborted: x', retryAfterSeconds: 0 }),
      ],
      succeeded(t + 15_000),
      new Set(),
    );
    expect(lies).toHaveLength(4);
    expect(untrueAnswers([answer({ retryAfterSeconds: 0 })], new Map([[id, 'RUNNING']]), new Set())).toHaveLength(1);
  });
});
