// Is the Temporal frontend answering? Probed in the background (GetSystemInfo,
// short deadline) so /readyz and the metric read a cached answer and never
// wait on Temporal themselves.
import { temporalReachable } from './metrics.ts';

export interface TemporalProbe {
  /** undefined when the last probe answered; else why not. */
  problem(): string | undefined;
  stop(): void;
}

/** `onChange` hears the first answer and every change after it (for one log line per change). */
export function startTemporalProbe(
  ping: (deadline: number) => Promise<unknown>,
  intervalMs = 10_000,
  onChange?: (problem: string | undefined) => void,
): TemporalProbe {
  let problem: string | undefined = 'not probed yet';
  let first = true;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  const round = async () => {
    const before = problem;
    try {
      await ping(Date.now() + Math.min(5_000, intervalMs));
      problem = undefined;
    } catch (err) {
      // A stable phrase: the gRPC details can carry addresses and change every call.
      const code = (err as { code?: unknown }).code;
      problem = `unreachable${typeof code === 'number' ? ` (gRPC code ${code})` : ''}`;
    }
    temporalReachable.set(problem === undefined ? 1 : 0);
    if (!stopped && (first || problem !== before)) onChange?.(problem);
    first = false;
    if (!stopped) timer = setTimeout(() => void round(), intervalMs).unref();
  };
  void round();
  return {
    problem: () => problem,
    stop() {
      stopped = true;
      clearTimeout(timer);
    },
  };
}
