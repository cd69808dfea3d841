// docs/configuration.md is the configuration reference: every environment variable the
// processes read, every ExtensionConfig setting and every `upgrades.capi-orchestrator.io/`
// annotation or label the code knows must be on it. The variables come from src/config's
// declarations (and any `env.X` read in src/), and the page lists no variable src/config does not
// declare; settings and annotations are read from the sources, not from a list kept here.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { HOOK_VARIABLES, VARIABLES } from '../../src/config/variables.ts';

const page = readFileSync('docs/configuration.md', 'utf8');
const sources = new Map(
  readdirSync('src', { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts'))
    .map((f) => [f, readFileSync(join('src', f), 'utf8')] as const),
);
const all = [...sources.values()].join('\n');

/** Variables set by Kubernetes or the shell, not settings of ours. */
const NOT_OURS = new Set(['KUBERNETES_SERVICE_HOST', 'USER']);

/** Environment variables: every one src/config declares, and any read through `env.X` anywhere. */
function environmentVariables(): string[] {
  const names = new Set<string>([...Object.keys(VARIABLES), ...Object.keys(HOOK_VARIABLES)]);
  for (const m of all.matchAll(/\benv(?:\.|\[')([A-Z][A-Z0-9_]*)\b/g)) names.add(m[1]!);
  return [...names].filter((n) => !NOT_OURS.has(n)).sort();
}

/** Variables the page's tables list (first column, in backticks) that are not read by src/: the runtime's. */
const RUNTIME_ONLY = new Set(['NODE_OPTIONS', 'MALLOC_ARENA_MAX']);

/** The variables in the first column of the tables under "## Process (environment variables)". */
function documentedVariables(): string[] {
  const start = page.indexOf('## Process (environment variables)');
  const end = page.indexOf('\n## ', start + 1);
  if (start < 0 || end < 0) throw new Error('no "## Process (environment variables)" section');
  const names = new Set<string>();
  for (const row of page.slice(start, end).matchAll(/^\| ([^|]+)\|/gm))
    for (const m of row[1]!.matchAll(/`([A-Z][A-Z0-9_<>]*)`/g)) names.add(m[1]!);
  return [...names].sort();
}

/** ExtensionConfig settings keys: policy and in-place `key('…')`s, the machine update settings, `*_SETTING`s. */
function settings(): string[] {
  const names = new Set<string>();
  for (const m of all.matchAll(/\bkey\(\s*'([A-Za-z]+)'/g)) names.add(m[1]!);
  for (const m of all.matchAll(/\b[A-Z_]+_SETTING\s*=\s*'([A-Za-z]+)'/g)) names.add(m[1]!);
  const machineUpdate = /\bmachineUpdateSettings\s*=\s*\{([^}]*)\}/.exec(all);
  if (!machineUpdate) throw new Error('machineUpdateSettings not found in src/');
  for (const m of machineUpdate[1]!.matchAll(/:\s*'([A-Za-z]+)'/g)) names.add(m[1]!);
  return [...names].sort();
}

/** Annotations and labels under our prefix: written out, or a policy key's suffix after ANNOTATION_PREFIX. */
function annotations(): string[] {
  const prefix = /ANNOTATION_PREFIX\s*=\s*'([^']+)'/.exec(all)?.[1];
  if (!prefix) throw new Error('ANNOTATION_PREFIX not found in src/');
  const names = new Set<string>();
  for (const m of all.matchAll(/'(upgrades\.capi-orchestrator\.io\/[a-z0-9.-]+)'/g)) names.add(m[1]!);
  for (const m of all.matchAll(/\bkey\(\s*'[A-Za-z]+'\s*,\s*'([a-z0-9-]+)'\s*\)/g)) names.add(`${prefix}${m[1]}`);
  return [...names].sort();
}

/** Whether the page names `name` as a whole word (`TEMPORAL_TLS` is not found in `TEMPORAL_TLS_CA_FILE`). */
function documented(name: string): boolean {
  const escaped = name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return new RegExp(`(?<![A-Za-z0-9_./-])${escaped}(?![A-Za-z0-9_-])`).test(page);
}

describe('docs/configuration.md', () => {
  it('names every environment variable the processes read', () => {
    const names = environmentVariables();
    // The readers above found the variables (a broken pattern would find none and pass).
    expect(names).toEqual(expect.arrayContaining(['ROLE', 'TEMPORAL_ADDRESS', 'MANAGEMENT_KUBECONFIG']));
    expect(names).toEqual(expect.arrayContaining(['HOOK_<HOOK>_NAME', 'TEMPORAL_DEPLOYMENT_NAME']));
    expect(names.length).toBeGreaterThanOrEqual(50);
    expect(names.filter((n) => !documented(n))).toEqual([]);
  });

  it('lists no variable src/config does not declare', () => {
    const listed = documentedVariables();
    expect(listed).toEqual(expect.arrayContaining(['ROLE', 'HOOK_<HOOK>_NAME', 'CAPI_UO_DATA_DIR', 'NODE_OPTIONS']));
    const declared = new Set<string>([...Object.keys(VARIABLES), ...Object.keys(HOOK_VARIABLES)]);
    expect(listed.filter((n) => !declared.has(n) && !RUNTIME_ONLY.has(n))).toEqual([]);
  });

  it('names every ExtensionConfig setting', () => {
    const names = settings();
    expect(names).toEqual(
      expect.arrayContaining(['upgradeAt', 'kubernetesVersions', 'inPlaceAllowedPaths', 'nodeUpgradeExecutor']),
    );
    expect(names.length).toBeGreaterThanOrEqual(20);
    expect(names.filter((n) => !documented(n))).toEqual([]);
  });

  it('names every Cluster annotation and every annotation or label the extension writes', () => {
    const names = annotations();
    expect(names).toEqual(
      expect.arrayContaining([
        'upgrades.capi-orchestrator.io/upgrade-at',
        'upgrades.capi-orchestrator.io/reserved-capacity',
        'upgrades.capi-orchestrator.io/node-name',
      ]),
    );
    expect(names.length).toBeGreaterThanOrEqual(20);
    expect(names.filter((n) => !documented(n))).toEqual([]);
  });
});
