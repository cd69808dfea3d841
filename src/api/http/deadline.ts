// CAPI appends `?timeout=<Go duration>` (the discovered timeoutSeconds) and
// gives up on the call after it. We answer well inside it.

export { parseGoDuration } from '../../domain/durations.ts';

/** Time we allow ourselves: the caller's timeout less a margin for the network and CAPI's own work. */
export function hookBudgetMs(callerTimeoutMs: number): number {
  const margin = Math.min(2000, Math.max(250, callerTimeoutMs * 0.2));
  return Math.max(100, callerTimeoutMs - margin);
}
