// `--watch`: read a run's progress every interval and redraw it until the run
// ends (exit 0 when it did what was asked, 1 when it failed, was aborted or
// stopped), or until --timeout (exit 1, as `kubectl rollout status` does).
// On a terminal the view is redrawn in place; into a pipe or file each changed
// view is printed once, so a log of the watch holds every state it saw.
import type { Progress } from './progress.ts';
import { UsageError } from './operations.ts';

export interface WatchOptions {
  read: () => Promise<Progress>;
  intervalMs: number;
  timeoutMs?: number;
  write: (text: string) => void;
  tty: boolean;
  /** Reads that failed in a row before the watch gives up (Temporal away for that long). */
  maxFailures?: number;
}

const CLEAR = '\x1b[H\x1b[2J';

export async function watch(o: WatchOptions): Promise<number> {
  const deadline = o.timeoutMs !== undefined ? Date.now() + o.timeoutMs : Infinity;
  let last: string | undefined;
  let failures = 0;
  for (;;) {
    let view: Progress;
    try {
      view = await o.read();
      failures = 0;
    } catch (err) {
      if (err instanceof UsageError || ++failures >= (o.maxFailures ?? 10)) throw err;
      // One failed read (a Temporal restart, a deadline) is shown, not fatal.
      view = {
        text: `${last ?? ''}\n(read failed: ${err instanceof Error ? err.message.split('\n')[0] : String(err)}; retrying)`,
      };
    }
    if (view.text !== last) {
      o.write(o.tty ? `${CLEAR}${view.text}\n` : `${last === undefined ? '' : '\n'}${view.text}\n`);
      last = view.text;
    }
    if (view.exitCode !== undefined) return view.exitCode;
    if (Date.now() + o.intervalMs > deadline) {
      o.write(`timed out waiting for the run to end\n`);
      return 1;
    }
    await new Promise((resolve) => setTimeout(resolve, o.intervalMs));
  }
}

/** `--interval 2s` / `--timeout 30m`: a duration in s, m or h. */
export function parseWatchDuration(flag: string, text: string | undefined, fallbackMs?: number): number | undefined {
  if (text === undefined) return fallbackMs;
  const m = /^(\d{1,6})(s|m|h)$/.exec(text);
  if (!m) throw new UsageError(`--${flag} ${text}: expected a duration such as 5s, 10m or 2h`);
  const ms = Number(m[1]) * { s: 1_000, m: 60_000, h: 3_600_000 }[m[2] as 's' | 'm' | 'h'];
  if (ms < 1_000) throw new UsageError(`--${flag} ${text}: at least 1s`);
  return ms;
}
