// Reading environment variables by their declarations (variables.ts): the text is parsed as the
// declaration says, checked against its schema, and a bad value is recorded as a problem naming
// the variable and what a good one looks like (the default is used meanwhile), so that
// parseConfig reports every problem at once.
import type { Static, TSchema } from 'typebox';
import { Value } from 'typebox/value';
import { parseGoDuration } from '../domain/durations.ts';
import type { HookName } from '../model/hooks.ts';
import type { ValueOf, Variable } from './schema.ts';
import { hookEnvName } from './server.ts';
import { HOOK_VARIABLES, VARIABLES, type HookVariableName, type VariableName } from './variables.ts';

/** A value longer than this is cut in a problem: a line names the variable, it does not echo a file. */
const SHOWN = 80;

/** The value a variable's text stands for, before its schema checks it; undefined: not of its type. */
function parse(raw: string, variable: Variable): unknown {
  switch (variable['x-parse']) {
    case 'integer': {
      const n = Number(raw);
      return Number.isInteger(n) ? n : undefined;
    }
    case 'duration':
      return parseGoDuration(raw);
    case 'boolean':
      if (/^(?:true|1|yes)$/i.test(raw)) return true;
      if (/^(?:false|0|no)$/i.test(raw)) return false;
      return undefined;
    case 'text':
      return raw;
  }
}

/** What a good value looks like, from the declaration. */
export function expected(variable: Variable): string {
  if (variable['x-expected']) return variable['x-expected'];
  const { minimum, maximum } = variable as Variable & { minimum?: number; maximum?: number };
  switch (variable['x-parse']) {
    case 'integer':
      return `an integer from ${minimum} to ${maximum}`;
    case 'duration':
      return `a duration from ${minimum}ms to ${(maximum ?? 0) / 1000}s (e.g. 500ms, 2s)`;
    case 'boolean':
      return 'true or false';
    case 'text': {
      const words = (variable as Variable & { enum?: string[] }).enum;
      return words ? `${words.slice(0, -1).join(', ')} or ${words.at(-1)}` : 'a string';
    }
  }
}

export class EnvReader {
  readonly env: Record<string, string | undefined>;
  /** Every problem found so far, in the order the variables were read. */
  readonly problems: string[] = [];

  constructor(env: Record<string, string | undefined>) {
    this.env = env;
  }

  /** A declared variable's value; unset, empty or bad: its default (a bad one is also a problem). */
  get<K extends VariableName>(name: K): ValueOf<(typeof VARIABLES)[K]> {
    return this.read(name, VARIABLES[name]) as ValueOf<(typeof VARIABLES)[K]>;
  }

  /** One hook's variable: `HOOK_<HOOK>_NAME` for BeforeClusterUpgrade is HOOK_BEFORE_CLUSTER_UPGRADE_NAME. */
  hook<K extends HookVariableName>(template: K, hook: HookName): ValueOf<(typeof HOOK_VARIABLES)[K]> {
    const name = template.replace('<HOOK>', hookEnvName(hook));
    return this.read(name, HOOK_VARIABLES[template]) as ValueOf<(typeof HOOK_VARIABLES)[K]>;
  }

  /** A value its declaration admits but a further rule refuses, reported as the declaration words it. */
  refuse(name: VariableName, reason?: string): void {
    this.report(name, VARIABLES[name], this.env[name] ?? '', reason);
  }

  private read<S extends TSchema>(name: string, variable: Variable<S>): Static<S> | undefined {
    const given = this.env[name];
    const raw = variable['x-trim'] ? given?.trim() : given;
    if (raw === undefined || raw === '') return variable.default as Static<S> | undefined;
    const value = parse(raw, variable);
    if (value !== undefined && Value.Check(variable, value)) return value as Static<S>;
    this.report(name, variable, raw);
    return variable.default as Static<S> | undefined;
  }

  private report(name: string, variable: Variable, raw: string, reason?: string): void {
    const what = reason ?? `expected ${expected(variable)}`;
    this.problems.push(
      variable['x-secret'] ? `${name}: ${what}` : `${name}=${JSON.stringify(raw.slice(0, SHOWN))}: ${what}`,
    );
  }
}
