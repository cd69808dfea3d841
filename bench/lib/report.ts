// What every benchmark's main shares: its options checked, its exit code, the
// machine it ran on, and its figures as percentiles in aligned tables.
import { availableParallelism, cpus, loadavg } from 'node:os';

/** Runs a benchmark's main: its result is the exit code; a negative one leaves the process running (a forked server). */
export function runMain(main: () => Promise<number>): void {
  main().then(
    (code) => {
      if (code >= 0) process.exitCode = code;
    },
    (err: unknown) => {
      console.error(err instanceof Error ? (err.stack ?? err.message) : String(err));
      process.exitCode = 1;
    },
  );
}

/** The machine a figure was measured on, and how busy it was. */
export function machineLine(loadBefore: number): string {
  return (
    `node ${process.version}, ${availableParallelism()} CPUs (${cpus()[0]?.model.trim() ?? 'unknown'}),` +
    ` ${process.platform}/${process.arch}; 1-min load average ${loadBefore.toFixed(2)} before,` +
    ` ${(loadavg()[0] ?? 0).toFixed(2)} after`
  );
}

/** A numeric command-line option's value, checked against its range. */
export function numberOption(name: string, raw: string, min: number, max: number, integer: boolean): number {
  const n = Number(raw);
  if (!Number.isFinite(n) || n < min || n > max || (integer && !Number.isInteger(n)))
    throw new Error(`--${name} ${JSON.stringify(raw)}: expected ${integer ? 'an integer' : 'a number'} ${min}..${max}`);
  return n;
}

/** Nearest-rank percentile of an ascending array; NaN when empty. */
export function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return NaN;
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[index] ?? NaN;
}

/** Milliseconds with two decimals below 10 ms, one above. */
export const formatMs = (v: number): string => (Number.isNaN(v) ? '-' : v < 10 ? v.toFixed(2) : v.toFixed(1));

/** Aligned columns; the first row is the header. */
export function table(rows: string[][], rightAligned: (column: number) => boolean): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
  const line = (r: string[]) =>
    r.map((cell, i) => (rightAligned(i) ? cell.padStart(widths[i]!) : cell.padEnd(widths[i]!))).join('  ');
  return [line(rows[0]!), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.slice(1).map(line)]
    .map((l) => l.trimEnd())
    .join('\n');
}
