import { describe, expect, it } from '@jest/globals';
import { KUBERNETES_RELEASES } from '../../src/domain/kubernetes-releases.ts';
import { resolvePlanPolicy } from '../../src/domain/plan-policy.ts';

describe('resolvePlanPolicy', () => {
  it('defaults to newest-patch, minimal workers and the built-in catalog', () => {
    const r = resolvePlanPolicy({});
    expect(r.ok && r.policy.controlPlane).toBe('newest-patch');
    expect(r.ok && r.policy.workers).toBe('minimal');
    expect(r.ok && r.policy.catalog.versions).toEqual(KUBERNETES_RELEASES);
  });

  it('lets a Cluster annotation win over the ExtensionConfig setting', () => {
    const r = resolvePlanPolicy({
      settings: { controlPlaneUpgradeStrategy: 'newest-patch', workersUpgradeStrategy: 'minimal' },
      annotations: { 'upgrades.capi-orchestrator.io/workers-upgrade-strategy': 'every-minor' },
    });
    expect(r).toMatchObject({ ok: true, policy: { controlPlane: 'newest-patch', workers: 'every-minor' } });
  });

  it('names the setting that holds a bad catalog entry', () => {
    const r = resolvePlanPolicy({ settings: { kubernetesVersions: 'v1.30.0,banana' } });
    expect(r.ok).toBe(false);
    expect(!r.ok && r.message).toContain('kubernetesVersions');
    expect(!r.ok && r.message).toContain('banana');
  });

  it('names the annotation that holds a bad workers strategy', () => {
    const r = resolvePlanPolicy({
      annotations: { 'upgrades.capi-orchestrator.io/workers-upgrade-strategy': 'sometimes' },
    });
    expect(!r.ok && r.message).toMatch(
      /^annotation upgrades\.capi-orchestrator\.io\/workers-upgrade-strategy: .*"sometimes"/,
    );
  });
});
