// The memory settings the production image runs with (the Dockerfile's ENV
// NODE_OPTIONS and MALLOC_ARENA_MAX): the benchmarks start the api and the
// worker with them, so what they measure is what ships.
import { readFileSync } from 'node:fs';

const DOCKERFILE = new URL('../Dockerfile', import.meta.url);

/** The value of `NAME="…"` or `NAME=…` in the Dockerfile's ENV lines; throws naming it when absent. */
function imageEnvValue(name: string, dockerfile: URL): string {
  const text = readFileSync(dockerfile, 'utf8');
  const match = new RegExp(`^\\s*(?:ENV\\s+)?${name}=(?:"([^"]*)"|(\\S+))`, 'm').exec(text);
  if (!match) throw new Error(`no ${name}=… in ${dockerfile.toString()}`);
  return match[1] ?? match[2] ?? '';
}

export function imageNodeOptions(dockerfile = DOCKERFILE): string[] {
  return imageEnvValue('NODE_OPTIONS', dockerfile).split(/\s+/).filter(Boolean);
}

/** The environment besides NODE_OPTIONS that sizes the process's memory (glibc's malloc arenas). */
export function imageMemoryEnv(dockerfile = DOCKERFILE): { MALLOC_ARENA_MAX: string } {
  return { MALLOC_ARENA_MAX: imageEnvValue('MALLOC_ARENA_MAX', dockerfile) };
}
