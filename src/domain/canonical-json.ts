// Canonical JSON (object keys sorted by UTF-16 code units) and a 64-bit
// FNV-1a hash of it: equal values give byte-identical text and the same hash.
// Pure (no node:crypto), so workflow code may call it too. Not a cryptographic
// hash: it tells values apart, it does not protect them.

type JsonObject = Record<string, unknown>;

function isPlainObject(v: unknown): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** JSON with object keys sorted by UTF-16 code units; `undefined` members are dropped like JSON.stringify does. */
export function canonicalJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map((x) => (x === undefined ? 'null' : canonicalJson(x))).join(',')}]`;
  if (isPlainObject(v)) {
    const parts: string[] = [];
    for (const k of Object.keys(v).sort()) {
      if (v[k] !== undefined) parts.push(`${JSON.stringify(k)}:${canonicalJson(v[k])}`);
    }
    return `{${parts.join(',')}}`;
  }
  if (typeof v === 'number' && !Number.isFinite(v)) return 'null';
  return JSON.stringify(v) ?? 'null';
}

const FNV_OFFSET = 0xcbf29ce484222325n;
const FNV_PRIME = 0x100000001b3n;

/** 64-bit FNV-1a over the UTF-8 bytes of `text`, as 16 lowercase hex digits. */
export function fnv1a64(text: string): string {
  let h = FNV_OFFSET;
  for (const byte of new TextEncoder().encode(text)) {
    h = BigInt.asUintN(64, (h ^ BigInt(byte)) * FNV_PRIME);
  }
  return h.toString(16).padStart(16, '0');
}
