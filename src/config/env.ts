// Reading environment variables into typed values. A bad value is recorded as a
// problem naming the variable (and the fallback is used), so that parseConfig
// reports every problem at once.
import { parseGoDuration } from '../domain/durations.ts';

export class EnvReader {
  readonly env: Record<string, string | undefined>;
  /** Every problem found so far, in the order the variables were read. */
  readonly problems: string[] = [];

  constructor(env: Record<string, string | undefined>) {
    this.env = env;
  }

  str(name: string, fallback: string): string {
    const v = this.env[name];
    return v === undefined || v === '' ? fallback : v;
  }

  int(name: string, fallback: number, min: number, max: number): number {
    const raw = this.env[name];
    if (raw === undefined || raw === '') return fallback;
    const n = Number(raw);
    if (!Number.isInteger(n) || n < min || n > max) {
      this.problems.push(`${name}=${JSON.stringify(raw)}: expected an integer from ${min} to ${max}`);
      return fallback;
    }
    return n;
  }

  /** Unset (or empty) stays undefined; a bad value is a problem. */
  optionalInt(name: string, min: number, max: number): number | undefined {
    return this.env[name] === undefined || this.env[name] === '' ? undefined : this.int(name, min, min, max);
  }

  /** A Go duration (`500ms`, `2s`) in milliseconds. */
  duration(name: string, fallback: number, min: number, max: number): number {
    const raw = this.env[name];
    if (raw === undefined || raw === '') return fallback;
    const ms = parseGoDuration(raw);
    if (ms === undefined || ms < min || ms > max) {
      this.problems.push(
        `${name}=${JSON.stringify(raw)}: expected a duration from ${min}ms to ${max / 1000}s (e.g. 500ms, 2s)`,
      );
      return fallback;
    }
    return ms;
  }

  bool(name: string, fallback: boolean): boolean {
    const raw = this.env[name];
    if (raw === undefined || raw === '') return fallback;
    if (/^(true|1|yes)$/i.test(raw)) return true;
    if (/^(false|0|no)$/i.test(raw)) return false;
    this.problems.push(`${name}=${JSON.stringify(raw)}: expected true or false`);
    return fallback;
  }
}
