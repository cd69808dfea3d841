// Registers the project's search attributes on the namespace at start, so the
// Web UI can filter "all upgrades of cluster X" and "all failed upgrades" on
// any Temporal server (the dev server registers them from flags too).
// Best effort: Temporal Cloud manages attributes through its own API, and a
// missing permission must not keep the extension from starting.
import type { Connection } from '@temporalio/client';
// Default import: the package is CommonJS, and Node's ESM loader does not see its named exports.
import proto from '@temporalio/proto';
import { allSearchAttributeKeys } from './model/search-attributes.ts';

export async function ensureSearchAttributes(connection: Connection, namespace: string): Promise<{ added: string[] }> {
  const existing = await connection.operatorService.listSearchAttributes({ namespace });
  const known = new Set(Object.keys(existing.customAttributes ?? {}));
  const missing = allSearchAttributeKeys.filter((k) => !known.has(k.name));
  if (missing.length === 0) return { added: [] };
  await connection.operatorService.addSearchAttributes({
    namespace,
    searchAttributes: Object.fromEntries(
      missing.map((k) => [k.name, proto.temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD]),
    ),
  });
  return { added: missing.map((k) => k.name) };
}
