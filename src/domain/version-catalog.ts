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
import { canonicalVersion, compareVersions, sortVersions, tryParseVersion } from './versions.ts';
import type { VersionLike } from './versions.ts';

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

/** Parses a comma-separated override such as `v1.30.4, v1.31.2,v1.32.0` (blanks around entries ignored). */
export function parseCatalog(csv: string, source: string = KUBERNETES_VERSIONS_SETTING): CatalogResult {
  const entries = csv
    .split(',')
    .map((e) => e.trim())
    .filter((e) => e.length > 0);
  return createCatalog(entries, source);
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

/** Catalog versions strictly above `from` and strictly below `to` (Cluster API ordering), ascending. */
export function catalogVersionsBetween(catalog: VersionCatalog, from: VersionLike, to: VersionLike): string[] {
  return catalog.versions.filter((v) => compareVersions(v, from) === 1 && compareVersions(v, to) === -1);
}

/**
 * The catalog versions strictly between `from` and `to`, then `to` itself (canonical) as the
 * last step — also when `to` is missing from the catalog.
 */
export function catalogStepsTo(catalog: VersionCatalog, from: VersionLike, to: VersionLike): string[] {
  return [...catalogVersionsBetween(catalog, from, to), canonicalVersion(to)];
}
