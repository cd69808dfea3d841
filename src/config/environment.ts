// The process's environment is read here only: the rest of src/ asks for a declared variable
// (`variable('TEMPORAL_PORT')`, parsed and checked as variables.ts declares it) or, to start a
// child process, for the environment it inherits.
import { EnvReader } from './env.ts';
import { ConfigError } from './index.ts';
import type { ValueOf } from './schema.ts';
import type { VARIABLES, VariableName } from './variables.ts';

/** One declared variable's value (unset: its default); a bad value throws a ConfigError naming it. */
export function variable<K extends VariableName>(
  name: K,
  env: Record<string, string | undefined> = process.env,
): ValueOf<(typeof VARIABLES)[K]> {
  const read = new EnvReader(env);
  const value = read.get(name);
  if (read.problems.length > 0) throw new ConfigError(read.problems);
  return value;
}

/** This process's environment, for a reader that takes one whole (parseConfig, buildInfo). */
export function processEnvironment(): Record<string, string | undefined> {
  return process.env;
}

/** The environment a child process inherits: this one's, with `extra` over it. */
export function childEnvironment(extra: Record<string, string | undefined> = {}): NodeJS.ProcessEnv {
  return { ...process.env, ...extra };
}

/**
 * Sets a declared variable for the rest of this process (`make dev` points the management
 * cluster's readers at the cluster it started).
 */
export function setVariable(name: VariableName, value: string): void {
  process.env[name] = value;
}
