// Kubernetes label selectors in their string form (`a=b,c in (d,e),!f`), parsed
// and matched as k8s.io/apimachinery/pkg/labels does (Parse, Requirement.Matches):
// the same operators (=, ==, !=, in, notin, exists, !, >, <), key and value
// rules, and `in`/`notin` read as values inside a value list. One difference on
// purpose: an empty selector selects nothing here (apimachinery's selects
// everything), so an unset or blank policy never changes what a drain does.
//
// Pure module: no I/O.

export type SelectorOperator = '=' | '==' | '!=' | 'in' | 'notin' | 'exists' | '!' | '>' | '<';

export interface LabelRequirement {
  readonly key: string;
  readonly operator: SelectorOperator;
  readonly values: readonly string[];
}

/** Longest selector accepted (characters): a policy value, not a document. */
export const LABEL_SELECTOR_MAX_LENGTH = 1024;

export type ParsedSelector = { ok: true; requirements: LabelRequirement[] } | { ok: false; message: string };

const LABEL_NAME = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const INTEGER = /^[-+]?[0-9]+$/;
const SPECIAL = new Set(['=', '!', '(', ')', ',', '>', '<']);
const WHITESPACE = new Set([' ', '\t', '\r', '\n']);

type Token =
  | { kind: 'id'; text: string }
  | { kind: 'op'; text: '=' | '==' | '!=' | '!' | '>' | '<' | '(' | ')' | ',' }
  | { kind: 'end' };

function tokenize(text: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < text.length) {
    const ch = text[i] ?? '';
    if (WHITESPACE.has(ch)) {
      i++;
    } else if (SPECIAL.has(ch)) {
      const two = text.slice(i, i + 2);
      if (two === '==' || two === '!=') {
        tokens.push({ kind: 'op', text: two });
        i += 2;
      } else {
        tokens.push({ kind: 'op', text: ch as '=' | '!' | '(' | ')' | ',' | '>' | '<' });
        i++;
      }
    } else {
      let j = i;
      while (j < text.length && !SPECIAL.has(text[j] ?? '') && !WHITESPACE.has(text[j] ?? '')) j++;
      tokens.push({ kind: 'id', text: text.slice(i, j) });
      i = j;
    }
  }
  tokens.push({ kind: 'end' });
  return tokens;
}

function show(t: Token): string {
  return t.kind === 'end' ? 'the end' : JSON.stringify(t.text);
}

/** Why `key` is no label key (`[prefix/]name`), or undefined. */
function keyProblem(key: string): string | undefined {
  const slash = key.indexOf('/');
  const prefix = slash >= 0 ? key.slice(0, slash) : undefined;
  const name = slash >= 0 ? key.slice(slash + 1) : key;
  if (prefix !== undefined && (prefix.length === 0 || prefix.length > 253 || !DNS_SUBDOMAIN.test(prefix)))
    return `label key ${JSON.stringify(key)}: the prefix must be a DNS subdomain`;
  if (name.length === 0 || name.length > 63 || !LABEL_NAME.test(name))
    return `label key ${JSON.stringify(key)}: the name must be 1-63 characters, alphanumeric at both ends, with - _ . inside`;
  return undefined;
}

function valueProblem(key: string, value: string): string | undefined {
  if (value === '' || (value.length <= 63 && LABEL_NAME.test(value))) return undefined;
  return `label value ${JSON.stringify(value)} of ${key}: at most 63 characters, alphanumeric at both ends, with - _ . inside`;
}

/** A syntax error, thrown from inside the parser and returned by {@link parseLabelSelector}. */
class SelectorSyntaxError extends Error {}

/** The tokens of one selector, read front to back. */
class TokenReader {
  private pos = 0;
  private readonly tokens: readonly Token[];
  constructor(tokens: readonly Token[]) {
    this.tokens = tokens;
  }
  peek(): Token {
    return this.tokens[this.pos] ?? { kind: 'end' };
  }
  next(): Token {
    return this.tokens[this.pos++] ?? { kind: 'end' };
  }
}

const fail = (message: string): never => {
  throw new SelectorSyntaxError(message);
};

const endsRequirement = (t: Token): boolean => t.kind === 'end' || (t.kind === 'op' && t.text === ',');

/**
 * Parses a label selector. Blank text is `{ ok: true, requirements: [] }`, which
 * {@link selectorMatches} reads as "selects nothing". Messages are deterministic.
 */
export function parseLabelSelector(text: string): ParsedSelector {
  if (text.length > LABEL_SELECTOR_MAX_LENGTH)
    return { ok: false, message: `longer than ${LABEL_SELECTOR_MAX_LENGTH} characters` };
  const reader = new TokenReader(tokenize(text));
  const requirements: LabelRequirement[] = [];
  if (reader.peek().kind === 'end') return { ok: true, requirements };
  try {
    for (;;) {
      const requirement = parseRequirement(reader);
      requirements.push(requirement);
      const { key } = requirement;
      const sep = reader.next();
      if (sep.kind === 'end') return { ok: true, requirements };
      if (!(sep.kind === 'op' && sep.text === ','))
        fail(`expected "," or the end after the requirement on ${key}, found ${show(sep)}`);
      if (reader.peek().kind === 'end') fail('expected a requirement after ","');
    }
  } catch (err) {
    if (err instanceof SelectorSyntaxError) return { ok: false, message: err.message };
    throw err;
  }
}

/** One requirement: `[!]key`, `key op value` or `key in|notin (values)`. */
function parseRequirement(reader: TokenReader): LabelRequirement {
  let t = reader.next();
  let negated = false;
  if (t.kind === 'op' && t.text === '!') {
    negated = true;
    t = reader.next();
  }
  if (t.kind !== 'id') return fail(`expected a label key, found ${show(t)}`);
  const key = t.text;
  const bad = keyProblem(key);
  if (bad) fail(bad);
  const after = reader.peek();
  let operator: SelectorOperator;
  let values: string[] = [];
  if (negated || endsRequirement(after)) {
    if (negated && !endsRequirement(after)) fail(`expected "," or the end after !${key}, found ${show(after)}`);
    operator = negated ? '!' : 'exists';
  } else {
    const op = reader.next();
    if (op.kind === 'id' && (op.text === 'in' || op.text === 'notin')) {
      operator = op.text;
      values = parseValueList(reader, key, operator);
    } else if (op.kind === 'op' && ['=', '==', '!=', '>', '<'].includes(op.text)) {
      operator = op.text as '=' | '==' | '!=' | '>' | '<';
      values = [parseComparedValue(reader, key, operator)];
    } else {
      return fail(`expected an operator (=, ==, !=, in, notin, >, <) after ${key}, found ${show(op)}`);
    }
  }
  for (const v of values) {
    const problem = valueProblem(key, v);
    if (problem) fail(problem);
  }
  return { key, operator, values };
}

/** `(v1, v2, …)` after `in` or `notin`: identifiers and commas up to ")"; empty entries are the empty value. */
function parseValueList(reader: TokenReader, key: string, operator: 'in' | 'notin'): string[] {
  const open = reader.next();
  if (!(open.kind === 'op' && open.text === '(')) fail(`expected "(" after ${key} ${operator}, found ${show(open)}`);
  const set = new Set<string>();
  let expectValue = true;
  for (;;) {
    const v = reader.next();
    if (v.kind === 'op' && v.text === ')') {
      if (expectValue) set.add('');
      break;
    }
    if (v.kind === 'op' && v.text === ',') {
      if (expectValue) set.add('');
      expectValue = true;
      continue;
    }
    if (v.kind === 'id' && expectValue) {
      set.add(v.text);
      expectValue = false;
      continue;
    }
    fail(`expected a value, "," or ")" in the values of ${key}, found ${show(v)}`);
  }
  return [...set].sort();
}

/** The value after `=`, `==`, `!=`, `>` or `<` (empty when none follows); `>` and `<` need an integer. */
function parseComparedValue(reader: TokenReader, key: string, operator: '=' | '==' | '!=' | '>' | '<'): string {
  const v = reader.peek();
  let value: string;
  if (v.kind === 'id') {
    reader.next();
    value = v.text;
  } else if (endsRequirement(v)) {
    value = '';
  } else {
    return fail(`expected a value after ${key}${operator}, found ${show(v)}`);
  }
  if ((operator === '>' || operator === '<') && !INTEGER.test(value))
    fail(`${key}${operator}${value}: the value must be an integer`);
  return value;
}

function requirementMatches(r: LabelRequirement, labels: Readonly<Record<string, string>>): boolean {
  const has = Object.hasOwn(labels, r.key);
  const value = has ? labels[r.key] : undefined;
  switch (r.operator) {
    case '=':
    case '==':
    case 'in':
      return has && r.values.includes(value ?? '');
    case '!=':
    case 'notin':
      return !has || !r.values.includes(value ?? '');
    case 'exists':
      return has;
    case '!':
      return !has;
    case '>':
    case '<': {
      if (!has || !INTEGER.test(value ?? '')) return false;
      const [a, b] = [BigInt(value ?? '0'), BigInt(r.values[0] ?? '0')];
      return r.operator === '>' ? a > b : a < b;
    }
  }
}

/** Whether the labels satisfy every requirement; an empty selector selects nothing. */
export function selectorMatches(
  requirements: readonly LabelRequirement[],
  labels: Readonly<Record<string, string>> | undefined,
): boolean {
  if (requirements.length === 0) return false;
  return requirements.every((r) => requirementMatches(r, labels ?? {}));
}

/**
 * A selector made only of `!=`, `notin` and `!key` selects every pod that lacks a label, so nearly
 * all of them: as a skip selector that would quietly turn the drain off. The operators that need
 * the label present.
 */
export function namesAPresentLabel(requirements: readonly LabelRequirement[]): boolean {
  return requirements.some((r) => !['!=', 'notin', '!'].includes(r.operator));
}

/**
 * A pod selector set as policy (drainSkipPodSelector, blockingPodSelector) from its text; `name` is
 * what the message names, as in `setting drainSkipPodSelector` or `Cluster ns/c annotation …`.
 * Blank = none. Refused: no label selector, too long, or only `!=`/`notin`/`!key`, which as
 * `role` (`a skip selector`) `effect` (`skips every pod without that label`).
 */
export function parsePolicyPodSelector(
  name: string,
  text: string,
  role: string,
  effect: string,
): { ok: true; selector: LabelRequirement[] } | { ok: false; message: string } {
  const shown = text.length > LABEL_SELECTOR_MAX_LENGTH ? `(${text.length} characters)` : `=${JSON.stringify(text)}`;
  const parsed = parseLabelSelector(text);
  if (!parsed.ok) return { ok: false, message: `${name}${shown}: not a usable label selector: ${parsed.message}` };
  if (parsed.requirements.length > 0 && !namesAPresentLabel(parsed.requirements))
    return {
      ok: false,
      message:
        `${name}${shown}: ${role} needs a requirement on a label pods have (=, ==, in, a key, >, <): ` +
        `one of only !=, notin and !key ${effect}`,
    };
  return { ok: true, selector: parsed.requirements };
}
