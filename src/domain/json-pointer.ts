// JSON pointers (RFC 6901) and the JSON values they address: parse and format
// pointers, resolve them through objects only, set or delete what they name.
// Pure: no I/O, no Node built-ins (workflow code may use it).

/** Splits a JSON pointer into unescaped tokens; undefined when it is not a valid pointer. */
export function parsePointer(pointer: string): string[] | undefined {
  if (pointer === '') return [];
  if (!pointer.startsWith('/')) return undefined;
  const tokens: string[] = [];
  for (const raw of pointer.slice(1).split('/')) {
    if (/~(?![01])/.test(raw)) return undefined;
    tokens.push(raw.replace(/~1/g, '/').replace(/~0/g, '~'));
  }
  return tokens;
}

/** Joins unescaped tokens into a JSON pointer (`~` → `~0`, `/` → `~1`). */
export function formatPointer(tokens: readonly string[]): string {
  return tokens.map((t) => `/${t.replace(/~/g, '~0').replace(/\//g, '~1')}`).join('');
}

/** Orders token lists element-wise (UTF-16 code units), a prefix before what lies under it. */
export function compareTokens(a: readonly string[], b: readonly string[]): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a[i] ?? '';
    const y = b[i] ?? '';
    if (x !== y) return x < y ? -1 : 1;
  }
  return a.length - b.length;
}

/** True when `prefix` equals `tokens` or is an ancestor of it. */
export function isPrefix(prefix: readonly string[], tokens: readonly string[]): boolean {
  return prefix.length <= tokens.length && prefix.every((t, i) => tokens[i] === t);
}

export type JsonObject = Record<string, unknown>;

export function isObject(v: unknown): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Sets an own property (safe for keys such as `__proto__`). */
export function setOwn(obj: JsonObject, k: string, value: unknown): void {
  Object.defineProperty(obj, k, { value, enumerable: true, writable: true, configurable: true });
}

/** A deep copy of a JSON value (undefined members dropped, undefined array items as null). */
export function cloneJson(v: unknown): unknown {
  if (Array.isArray(v)) return v.map((x) => (x === undefined ? null : cloneJson(x)));
  if (isObject(v)) {
    const out: JsonObject = {};
    for (const k of Object.keys(v)) {
      if (v[k] !== undefined) setOwn(out, k, cloneJson(v[k]));
    }
    return out;
  }
  return v;
}

export type Lookup =
  | { readonly kind: 'found'; readonly value: unknown }
  | { readonly kind: 'missing'; readonly depth: number }
  | { readonly kind: 'blocked' };

/** Resolves tokens through objects only; an array or scalar on the way gives `blocked`. */
export function lookup(root: unknown, tokens: readonly string[]): Lookup {
  let node = root;
  for (let i = 0; i < tokens.length; i++) {
    if (!isObject(node)) return { kind: 'blocked' };
    const t = tokens[i] ?? '';
    if (!Object.hasOwn(node, t) || node[t] === undefined) return { kind: 'missing', depth: i };
    node = node[t];
  }
  return { kind: 'found', value: node };
}

/** Sets (value defined) or deletes (undefined) the member at `tokens`, creating missing objects; false when blocked. */
export function setOrDelete(root: JsonObject, tokens: readonly string[], value: unknown): boolean {
  let node: JsonObject = root;
  for (let i = 0; i < tokens.length - 1; i++) {
    const t = tokens[i] ?? '';
    const next = Object.hasOwn(node, t) ? node[t] : undefined;
    if (next === undefined) {
      if (value === undefined) return true;
      const created: JsonObject = {};
      setOwn(node, t, created);
      node = created;
    } else if (isObject(next)) {
      node = next;
    } else {
      return false;
    }
  }
  const last = tokens[tokens.length - 1] ?? '';
  if (value === undefined) delete node[last];
  else setOwn(node, last, value);
  return true;
}
