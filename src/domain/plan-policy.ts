// Resolves the upgrade-plan policy for one cluster from ExtensionConfig
// settings and Cluster annotations. A set but invalid value is an error that
// names where it came from; it never falls back silently to a default.
import { lookupPolicy, PolicyError, policyKeys, type PolicySources } from './policy-keys.ts';
import { parseControlPlaneStrategy, parseWorkersStrategy, type PlanPolicy } from './upgrade-plan.ts';
import { defaultCatalog, parseCatalog } from './version-catalog.ts';

export type PlanPolicyResult = { ok: true; policy: PlanPolicy } | { ok: false; message: string };

export function resolvePlanPolicy(sources: PolicySources): PlanPolicyResult {
  try {
    return resolve(sources);
  } catch (err) {
    if (err instanceof PolicyError) return { ok: false, message: err.message };
    throw err;
  }
}

function resolve(sources: PolicySources): PlanPolicyResult {
  const versions = lookupPolicy(sources, policyKeys.kubernetesVersions);
  let catalog = defaultCatalog();
  if (versions) {
    const parsed = parseCatalog(versions.value, versions.name);
    if (!parsed.ok) return { ok: false, message: parsed.message };
    catalog = parsed.catalog;
  }
  const cpRaw = lookupPolicy(sources, policyKeys.controlPlaneStrategy);
  const controlPlane = parseControlPlaneStrategy(cpRaw?.value);
  if (!controlPlane.ok) return { ok: false, message: `${cpRaw?.name}: ${controlPlane.message}` };
  const workersRaw = lookupPolicy(sources, policyKeys.workersStrategy);
  const workers = parseWorkersStrategy(workersRaw?.value);
  if (!workers.ok) return { ok: false, message: `${workersRaw?.name}: ${workers.message}` };
  return { ok: true, policy: { controlPlane: controlPlane.strategy, workers: workers.strategy, catalog } };
}
