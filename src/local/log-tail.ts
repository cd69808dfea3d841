// The last lines of a child process's log, for an error message: the log itself
// lives in a temp dir that is gone by the time anyone reads a CI run's output.
import { readFileSync } from 'node:fs';

export function logTail(file: string, lines = 20): string {
  try {
    return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}
