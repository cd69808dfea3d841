/**
 * The catalog of Kubernetes versions upgrade plans may step through.
 *
 * By default the built-in list of real releases ({@link KUBERNETES_RELEASES}); an operator can
 * replace it with a comma-separated list in the ExtensionConfig setting `kubernetesVersions` or
 * in a Cluster annotation. The target version of an upgrade does not have to be in the catalog:
 * plans always end with the target ({@link catalogStepsTo}).
 *
 * Pure module: no I/O.
 */
import { KUBERNETES_RELEASES } from './kubernetes-releases.ts';
import {
  canonicalVersion,
  compareIgnoringBuild,
  compareVersions,
  parseVersion,
  sortVersions,
  tryParseVersion,
} from './versions.ts';
import type { KubeVersion, VersionLike } from './versions.ts';

/** ExtensionConfig `spec.settings` key holding a catalog override. */
export const KUBERNETES_VERSIONS_SETTING = 'kubernetesVersions';

export interface VersionCatalog {
  /**
   * Canonical versions (leading `v`), without duplicates, ascending in Cluster API order;
   * versions whose build tags cannot be ordered keep the order they were listed in.
   */
  readonly versions: readonly string[];
  /** Where the list came from (`built-in`, or the setting / annotation name): used in messages. */
  readonly source: string;
}

export type CatalogResult =
  { readonly ok: true; readonly catalog: VersionCatalog } | { readonly ok: false; readonly message: string };

/** Builds a catalog from versions in any order; fails naming every entry that is not a version. */
export function createCatalog(versions: readonly string[], source = 'catalog'): CatalogResult {
  const bad: string[] = [];
  const canonical: string[] = [];
  const seen = new Set<string>();
  for (const entry of versions) {
    const parsed = tryParseVersion(entry);
    if (!parsed.ok) {
      bad.push(JSON.stringify(entry));
      continue;
    }
    if (!seen.has(parsed.version.canonical)) {
      seen.add(parsed.version.canonical);
      canonical.push(parsed.version.canonical);
    }
  }
  if (bad.length > 0) {
    return {
      ok: false,
      message: `invalid ${source}: ${bad.join(', ')} ${bad.length === 1 ? 'is not a Kubernetes version' : 'are not Kubernetes versions'}`,
    };
  }
  if (canonical.length === 0) {
    return { ok: false, message: `invalid ${source}: no Kubernetes versions listed` };
  }
  return { ok: true, catalog: Object.freeze({ versions: Object.freeze(sortVersions(canonical)), source }) };
}

/**
 * Memo of parsed overrides by source and text: CAPI sends the same ExtensionConfig settings with
 * every call, so each distinct list is parsed and sorted once. Cleared when full (bounded).
 */
const PARSED_CATALOG_LIMIT = 64;
const PARSED_CATALOG_MAX_TEXT = 16 * 1024;
const parsedCatalogs = new Map<string, CatalogResult>();

/** Parses a comma-separated override such as `v1.30.4, v1.31.2,v1.32.0` (blanks around entries ignored). */
export function parseCatalog(csv: string, source: string = KUBERNETES_VERSIONS_SETTING): CatalogResult {
  const key = `${source}\n${csv}`;
  const hit = parsedCatalogs.get(key);
  if (hit !== undefined) {
    return hit;
  }
  const entries = csv
    .split(',')
    .map((e) => e.trim())
    .filter((e) => e.length > 0);
  const result = createCatalog(entries, source);
  if (csv.length <= PARSED_CATALOG_MAX_TEXT) {
    if (parsedCatalogs.size >= PARSED_CATALOG_LIMIT) {
      parsedCatalogs.clear();
    }
    parsedCatalogs.set(key, result);
  }
  return result;
}

let builtIn: VersionCatalog | undefined;

/** The built-in catalog of real Kubernetes releases. */
export function defaultCatalog(): VersionCatalog {
  if (builtIn === undefined) {
    const result = createCatalog(KUBERNETES_RELEASES, 'built-in');
    if (!result.ok) {
      throw new Error(`built-in Kubernetes release list is broken: ${result.message}`);
    }
    builtIn = result.catalog;
  }
  return builtIn;
}

/** One possible override: its name for messages (`kubernetesVersions`, an annotation key) and raw value. */
export interface CatalogSource {
  readonly name: string;
  readonly value: string | undefined;
}

/**
 * Picks the first source with a non-blank value (callers list them most specific first, e.g. the
 * Cluster annotation before the ExtensionConfig setting) and parses it; the built-in catalog when
 * none is set. A set but invalid value is an error, never silently replaced by the default.
 */
export function resolveCatalog(sources: readonly CatalogSource[]): CatalogResult {
  for (const source of sources) {
    if (source.value !== undefined && source.value.trim().length > 0) {
      return parseCatalog(source.value, source.name);
    }
  }
  return { ok: true, catalog: defaultCatalog() };
}

/** True when the catalog lists exactly this version (build metadata included). */
export function catalogIncludes(catalog: VersionCatalog, version: VersionLike): boolean {
  return catalog.versions.some((v) => compareVersions(v, version) === 0);
}

interface ParsedCatalog {
  readonly entries: readonly KubeVersion[];
  /** True when major.minor.patch[-pre] never decreases along the list (always, for createCatalog's sort). */
  readonly coreAscending: boolean;
}

/** Parsed entries of each catalog object (catalogs are immutable), so a request never parses the catalog. */
const parsedCatalog = new WeakMap<VersionCatalog, ParsedCatalog>();

function parsed(catalog: VersionCatalog): ParsedCatalog {
  let p = parsedCatalog.get(catalog);
  if (p === undefined) {
    const entries = Object.freeze(catalog.versions.map((v) => parseVersion(v)));
    const coreAscending = entries.every((v, i) => i === 0 || compareIgnoringBuild(entries[i - 1] ?? v, v) <= 0);
    p = { entries, coreAscending };
    parsedCatalog.set(catalog, p);
  }
  return p;
}

/** The catalog's versions, parsed, in catalog order; throws VersionError for a hand-built catalog with a bad entry. */
export function catalogEntries(catalog: VersionCatalog): readonly KubeVersion[] {
  return parsed(catalog).entries;
}

/** First index in [0, n] whose entry is not below `v` (`strict`: is above `v`) ignoring build metadata. */
function bound(entries: readonly KubeVersion[], v: KubeVersion, strict: boolean): number {
  let lo = 0;
  let hi = entries.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    const c = compareIgnoringBuild(entries[mid] ?? v, v);
    if (c < 0 || (strict && c === 0)) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

/** Parsed catalog versions strictly above `from` and strictly below `to` (Cluster API ordering), ascending. */
export function catalogEntriesBetween(catalog: VersionCatalog, from: VersionLike, to: VersionLike): KubeVersion[] {
  const lo = typeof from === 'string' ? parseVersion(from) : from;
  const hi = typeof to === 'string' ? parseVersion(to) : to;
  const { entries, coreAscending } = parsed(catalog);
  // Binary search narrows the list to the entries whose core lies in [from, to]; the exact
  // comparison (build tags included) then decides each of them.
  const window = coreAscending ? entries.slice(bound(entries, lo, false), bound(entries, hi, true)) : entries;
  return window.filter((v) => compareVersions(v, lo) === 1 && compareVersions(v, hi) === -1);
}

/** Catalog versions strictly above `from` and strictly below `to` (Cluster API ordering), ascending. */
export function catalogVersionsBetween(catalog: VersionCatalog, from: VersionLike, to: VersionLike): string[] {
  return catalogEntriesBetween(catalog, from, to).map((v) => v.canonical);
}

/**
 * The catalog versions strictly between `from` and `to`, then `to` itself (canonical) as the
 * last step — also when `to` is missing from the catalog.
 */
export function catalogStepsTo(catalog: VersionCatalog, from: VersionLike, to: VersionLike): string[] {
  return [...catalogVersionsBetween(catalog, from, to), canonicalVersion(to)];
}
