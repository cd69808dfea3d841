// What JSON.parse would build from a body, measured on its bytes before it is
// built. A body's size alone does not bound the work: 6 MiB of `[{},{},…]` is
// two million objects, ~1.4 s of one event loop and ~130 MiB of heap, where 6 MiB
// of CAPI-shaped requests parses in ~100 ms (docs/limits.md). And a value nested thousands deep
// overflows the stack of any recursive walk after the parse.
//
// Items are the `{`, `[`, `,` and `:` outside strings: one per object or array,
// one per object member (its colon) and one per comma between members or
// elements. Bytes of a UTF-8 multi-byte character are never ASCII, so a byte scan
// is exact.

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_OBJECT = 0x7b;
const OPEN_ARRAY = 0x5b;
const CLOSE_OBJECT = 0x7d;
const CLOSE_ARRAY = 0x5d;
const COMMA = 0x2c;
const COLON = 0x3a;

export interface JsonBounds {
  /** Most items (see above) a body may hold. */
  maxItems: number;
  /** Deepest nesting of objects and arrays a body may hold. */
  maxDepth: number;
}

export interface JsonMeasure {
  items: number;
  depth: number;
  /** The first bound passed; the scan stops there. */
  exceeded?: keyof JsonBounds;
}

/** Counts items and nesting of `body` up to `bounds` (it need not be valid JSON: the parse judges that). */
export function measureJson(body: Uint8Array, bounds: JsonBounds): JsonMeasure {
  const { maxItems, maxDepth } = bounds;
  let items = 0;
  let depth = 0;
  let deepest = 0;
  for (let i = 0; i < body.length; i++) {
    const c = body[i];
    if (c === QUOTE) {
      // Skip the string: to its closing quote, past escaped characters.
      for (i++; i < body.length && body[i] !== QUOTE; i++) if (body[i] === BACKSLASH) i++;
    } else if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
      items++;
      if (++depth > deepest) deepest = depth;
      if (depth > maxDepth) return { items, depth: deepest, exceeded: 'maxDepth' };
      if (items > maxItems) return { items, depth: deepest, exceeded: 'maxItems' };
    } else if (c === CLOSE_OBJECT || c === CLOSE_ARRAY) {
      depth--;
    } else if (c === COMMA || c === COLON) {
      if (++items > maxItems) return { items, depth: deepest, exceeded: 'maxItems' };
    }
  }
  return { items, depth: deepest };
}
