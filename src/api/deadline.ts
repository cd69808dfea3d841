// CAPI appends `?timeout=<Go duration>` (the discovered timeoutSeconds) and
// gives up on the call after it. We answer well inside it.

const UNIT_MS: Record<string, number> = { ns: 1e-6, us: 1e-3, µs: 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** Parses a Go `time.Duration.String()` value such as `10s`, `1m30s`, `500ms`; undefined when malformed. */
export function parseGoDuration(text: string): number | undefined {
  if (text === '0') return 0;
  const re = /(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/gy;
  let total = 0;
  let consumed = 0;
  for (let m = re.exec(text); m; m = re.exec(text)) {
    total += Number(m[1]) * (UNIT_MS[m[2] as string] ?? 0);
    consumed = re.lastIndex;
  }
  return consumed === text.length && consumed > 0 ? total : undefined;
}

/** Time we allow ourselves: the caller's timeout less a margin for the network and CAPI's own work. */
export function hookBudgetMs(callerTimeoutMs: number): number {
  const margin = Math.min(2000, Math.max(250, callerTimeoutMs * 0.2));
  return Math.max(100, callerTimeoutMs - margin);
}
