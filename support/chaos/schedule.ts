// The chaos run's fault schedule: a pure function of the seed and the bounds, so
// `--seed N` replays the same faults (kind, time, pause, target) in the same order.

export const FAULT_KINDS = [
  'kill-worker',
  'kill-api',
  'kill-temporal',
  'stop-workload-apiserver',
  'pdb-blocks-drain',
  'agent-fails-once',
  'abort-then-new-spec',
  'newer-spec',
] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

export interface PlannedFault {
  /** Index in the schedule (1-based in logs). */
  n: number;
  kind: FaultKind;
  /** When it starts, ms after the workload started. */
  atMs: number;
  /** How long the fault lasts (a process down, the API server stopped, the PDB there), ms. */
  pauseMs: number;
  /** Picks the target (which process, which machine) among those there are when it fires: [0, 1). */
  pick: number;
}

export interface ScheduleOptions {
  seed: number;
  faults: number;
  /** The faults are spread over this window. */
  windowMs: number;
  /** Short pauses (the `make test` version): the same kinds, seconds instead of up to a minute. */
  short: boolean;
}

/** mulberry32: a small, well-mixed 32-bit PRNG; the same seed gives the same numbers on every machine. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Pause range of each kind, seconds: [long run, short run]. */
const PAUSES: Record<FaultKind, { long: [number, number]; short: [number, number] }> = {
  'kill-worker': { long: [1, 20], short: [1, 4] },
  'kill-api': { long: [1, 20], short: [1, 4] },
  'kill-temporal': { long: [1, 20], short: [1, 4] },
  'stop-workload-apiserver': { long: [5, 60], short: [3, 8] },
  'pdb-blocks-drain': { long: [5, 60], short: [3, 8] },
  // The agent answers Failed once: no pause; CAPI's retry after the backoff starts the update over.
  'agent-fails-once': { long: [0, 0], short: [0, 0] },
  // The time between the operator's abort and the new desired spec that resumes the machine.
  'abort-then-new-spec': { long: [1, 20], short: [1, 4] },
  'newer-spec': { long: [0, 0], short: [0, 0] },
};

export function planFaults(o: ScheduleOptions): PlannedFault[] {
  const next = prng(o.seed);
  const mean = o.windowMs / Math.max(1, o.faults);
  const out: PlannedFault[] = [];
  let at = 0;
  for (let n = 1; n <= o.faults; n++) {
    at += Math.round(mean * (0.5 + next()));
    const kind = FAULT_KINDS[Math.floor(next() * FAULT_KINDS.length)]!;
    const [lo, hi] = o.short ? PAUSES[kind].short : PAUSES[kind].long;
    out.push({ n, kind, atMs: at, pauseMs: Math.round((lo + next() * (hi - lo)) * 1000), pick: next() });
  }
  return out;
}
