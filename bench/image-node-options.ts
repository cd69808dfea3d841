// The Node options the production image runs with (the Dockerfile's NODE_OPTIONS):
// the benchmarks start the worker with them, so what they measure is what ships.
import { readFileSync } from 'node:fs';

export function imageNodeOptions(dockerfile = new URL('../Dockerfile', import.meta.url)): string[] {
  const text = readFileSync(dockerfile, 'utf8');
  const value = /^\s*(?:ENV\s+)?NODE_OPTIONS="([^"]*)"/m.exec(text)?.[1];
  if (value === undefined) throw new Error(`no NODE_OPTIONS="…" in ${dockerfile.toString()}`);
  return value.split(/\s+/).filter(Boolean);
}
