// How one environment variable is declared: a TypeBox schema that carries its description,
// default and bounds, plus how its text becomes a value (`x-parse`) and, where the schema's own
// bounds do not say it, what a good value looks like (`x-expected`). The reader (env.ts) parses
// and reports from this alone, and the docs test lists the variables from it.
import { Type, type Static, type TBoolean, type TEnum, type TInteger, type TSchema, type TString } from 'typebox';
import { DNS1123_LABEL } from '../model/cluster-upgrade.ts';

/** How a variable's text becomes the value its schema checks. */
export type Parse = 'text' | 'integer' | 'duration' | 'boolean';

export interface VariableOptions {
  description: string;
  /** What a good value looks like, when the schema's bounds do not say it ("an absolute path"). */
  expected?: string;
  /** Surrounding whitespace is dropped before the value is read. */
  trim?: boolean;
  /** Its value is never repeated in a problem (a URL may carry a token). */
  secret?: boolean;
}

/** A declared variable: a TypeBox schema with the reader's annotations. */
export type Variable<S extends TSchema = TSchema> = S & {
  readonly description: string;
  readonly default?: unknown;
  readonly 'x-parse': Parse;
  readonly 'x-expected'?: string;
  readonly 'x-trim'?: boolean;
  readonly 'x-secret'?: boolean;
};
/** One with a default: reading it never gives undefined. */
export type Defaulted<S extends TSchema> = Variable<S> & { readonly default: Static<S> };

/** What reading a declared variable gives: its type, or undefined when it has no default and is unset. */
export type ValueOf<V> = V extends { readonly default: infer D }
  ? D
  : V extends TSchema
    ? Static<V> | undefined
    : never;

function declare(parse: Parse, o: VariableOptions, schemaOptions: Record<string, unknown>): Record<string, unknown> {
  return {
    ...schemaOptions,
    description: o.description,
    'x-parse': parse,
    ...(o.expected ? { 'x-expected': o.expected } : {}),
    ...(o.trim ? { 'x-trim': true } : {}),
    ...(o.secret ? { 'x-secret': true } : {}),
  };
}

interface TextOptions extends VariableOptions {
  pattern?: RegExp;
  maxLength?: number;
}

export function text(o: TextOptions & { default: string }): Defaulted<TString>;
export function text(o: TextOptions): Variable<TString>;
export function text(o: TextOptions & { default?: string }): Variable<TString> {
  const { pattern, maxLength } = o;
  return Type.String(
    declare('text', o, {
      ...(o.default !== undefined ? { default: o.default } : {}),
      ...(pattern ? { pattern: pattern.source } : {}),
      ...(maxLength !== undefined ? { maxLength } : {}),
    }),
  ) as Variable<TString>;
}

/** A DNS-1123 label: lowercase letters, digits and "-", at most 63 characters. */
export function dns1123Label(o: VariableOptions & { default: string }): Defaulted<TString>;
export function dns1123Label(o: VariableOptions): Variable<TString>;
export function dns1123Label(o: VariableOptions & { default?: string }): Variable<TString> {
  return text({
    expected: 'a DNS-1123 label (lowercase letters, digits and "-", at most 63 characters)',
    ...o,
    pattern: DNS1123_LABEL,
    maxLength: 63,
  });
}

interface BoundOptions extends VariableOptions {
  minimum: number;
  maximum: number;
}

export function integer(o: BoundOptions & { default: number }): Defaulted<TInteger>;
export function integer(o: BoundOptions): Variable<TInteger>;
export function integer(o: BoundOptions & { default?: number }): Variable<TInteger> {
  return Type.Integer(
    declare('integer', o, {
      minimum: o.minimum,
      maximum: o.maximum,
      ...(o.default !== undefined ? { default: o.default } : {}),
    }),
  ) as Variable<TInteger>;
}

/** A Go duration (`500ms`, `2s`), read as milliseconds; the bounds are milliseconds too. */
export function duration(o: BoundOptions & { default: number }): Defaulted<TInteger> {
  return Type.Integer(
    declare('duration', o, { minimum: o.minimum, maximum: o.maximum, default: o.default }),
  ) as Defaulted<TInteger>;
}

/** `true`, `1`, `yes` or `false`, `0`, `no` (any case). */
export function boolean(o: VariableOptions & { default: boolean }): Defaulted<TBoolean>;
export function boolean(o: VariableOptions): Variable<TBoolean>;
export function boolean(o: VariableOptions & { default?: boolean }): Variable<TBoolean> {
  return Type.Boolean(
    declare('boolean', o, o.default !== undefined ? { default: o.default } : {}),
  ) as Variable<TBoolean>;
}

/** One of a few words. */
export function oneOf<const W extends string[]>(
  words: readonly [...W],
  o: VariableOptions & { default: W[number] },
): Defaulted<TEnum<W>>;
export function oneOf<const W extends string[]>(words: readonly [...W], o: VariableOptions): Variable<TEnum<W>>;
export function oneOf<const W extends string[]>(
  words: readonly [...W],
  o: VariableOptions & { default?: W[number] },
): Variable<TEnum<W>> {
  return Type.Enum(words, declare('text', o, o.default !== undefined ? { default: o.default } : {})) as Variable<
    TEnum<W>
  >;
}
