// Settings the platform binds (bindingPolicies): a Cluster annotation may only tighten them, or
// is refused naming itself and the setting. Freezes always bind (a union).
import { describe, expect, it } from '@jest/globals';
import { resolveAlertPolicy } from '../../src/domain/alert-policy.ts';
import { resolvePlanPolicy } from '../../src/domain/plan-policy.ts';
import { BINDABLE_SETTINGS, policyKeys } from '../../src/domain/policy-keys.ts';
import { resolveUpgradePolicy } from '../../src/domain/upgrade-policy.ts';

const P = 'upgrades.capi-orchestrator.io/';
const refusal = (annotation: string, setting: string, tighten: boolean) =>
  `annotation ${P}${annotation}: setting ${setting} is binding (setting bindingPolicies) and an annotation may ${tighten ? 'only tighten' : 'not change'} it`;

describe('binding settings', () => {
  it('lets an annotation win over an unbound setting, as before (freezes aside)', () => {
    const r = resolveUpgradePolicy({
      settings: { removedApiPolicy: 'fail', maintenanceWindow: 'Sat 02:00 4h' },
      annotations: { [`${P}removed-api-policy`]: 'off', [`${P}maintenance-window`]: '* 00:00 24h' },
    });
    expect(r).toMatchObject({ ok: true, policy: { removedApiPolicy: 'off', maintenanceWindow: '* 00:00 24h' } });
  });

  it.each([
    ['removedApiPolicy', 'removed-api-policy', 'fail', 'warn', 'removedApiPolicy', true],
    ['removedApiPolicy', 'removed-api-policy', 'warn', 'off', 'removedApiPolicy', true],
    ['blockingPdbPolicy', 'blocking-pdb-policy', 'fail', 'warn', 'blockingPdbPolicy', true],
    ['upgradeAt', 'upgrade-at', '2026-12-05T00:00:00Z', '2026-12-01T00:00:00Z', 'upgradeAt', true],
    ['maintenanceWindow', 'maintenance-window', 'Sat 02:00 4h', '* 00:00 24h', 'maintenanceWindow', false],
    ['maintenanceTimeZone', 'maintenance-time-zone', 'UTC', 'Pacific/Kiritimati', 'maintenanceTimeZone', false],
    ['healthCheckTimeout', 'health-check-timeout', '30m', '1m', 'healthCheckTimeout', false],
    ['capacityReservation', 'capacity-reservation', '1', '0', 'capacityReservation', false],
  ])(
    'refuses a looser %s annotation when bound (%s: %s → %s)',
    (setting, annotation, platform, tenant, named, tighten) => {
      for (const bindingPolicies of [setting, `criticalNamespaces, ${setting}`, '*']) {
        const r = resolveUpgradePolicy({
          settings: { bindingPolicies, [setting]: platform },
          annotations: { [`${P}${annotation}`]: tenant },
        });
        expect(r).toEqual({ ok: false, message: refusal(annotation, named, tighten) });
      }
    },
  );

  it('accepts a stricter annotation of a bound setting, and one equal to it', () => {
    const settings = {
      bindingPolicies: '*',
      removedApiPolicy: 'warn',
      blockingPdbPolicy: 'warn',
      upgradeAt: '2026-12-01T00:00:00Z',
      maintenanceWindow: 'Sat 02:00 4h',
    };
    const r = resolveUpgradePolicy({
      settings,
      annotations: {
        [`${P}removed-api-policy`]: 'fail',
        [`${P}blocking-pdb-policy`]: 'fail',
        [`${P}upgrade-at`]: '2026-12-05T00:00:00Z',
        [`${P}maintenance-window`]: ' Sat 02:00 4h ',
      },
    });
    expect(r).toMatchObject({
      ok: true,
      policy: {
        removedApiPolicy: 'fail',
        blockingPdbPolicy: 'fail',
        upgradeAtMs: Date.parse('2026-12-05T00:00:00Z'),
        maintenanceWindow: 'Sat 02:00 4h',
      },
    });
  });

  it('adds critical namespaces when bound, and replaces them when not', () => {
    const annotations = { [`${P}critical-namespaces`]: 'ingress, kube-system' };
    const settings = { criticalNamespaces: 'kube-system,monitoring' };
    expect(
      resolveUpgradePolicy({ settings: { ...settings, bindingPolicies: 'criticalNamespaces' }, annotations }),
    ).toMatchObject({
      ok: true,
      policy: { criticalNamespaces: ['kube-system', 'monitoring', 'ingress'] },
    });
    expect(resolveUpgradePolicy({ settings, annotations })).toMatchObject({
      ok: true,
      policy: { criticalNamespaces: ['ingress', 'kube-system'] },
    });
  });

  it('always keeps the platform freezes beside the annotation, each once', () => {
    const platform = '2026-12-20T00:00:00Z/2027-01-04T00:00:00Z year-end';
    const r = resolveUpgradePolicy({
      settings: { maintenanceFreezes: platform },
      annotations: { [`${P}maintenance-freezes`]: `${platform}; 2026-11-01T00:00:00Z/2026-11-02T00:00:00Z ours` },
    });
    expect(r.ok && r.policy.maintenanceFreezes?.map((f) => f.reason)).toEqual(['ours', 'year-end']);
  });

  it('binds the plan and alert settings too', () => {
    expect(
      resolvePlanPolicy({
        settings: { bindingPolicies: 'kubernetesVersions', kubernetesVersions: 'v1.30.0,v1.31.0' },
        annotations: { [`${P}kubernetes-versions`]: 'v1.30.0,v1.31.0,v1.32.0' },
      }),
    ).toEqual({ ok: false, message: refusal('kubernetes-versions', 'kubernetesVersions', false) });
    const alerts = { alertPrometheusUrl: 'http://prom:9090', bindingPolicies: 'alertIgnore,alertFiringOnly' };
    const ignore = (tenant: string) =>
      resolveAlertPolicy({
        settings: { ...alerts, alertIgnore: 'Watchdog,InfoInhibitor' },
        annotations: { [`${P}alert-ignore`]: tenant },
      });
    expect(ignore('Watchdog')).toMatchObject({ ok: true, policy: { ignore: ['Watchdog'] } });
    expect(ignore('Watchdog,KubeNodeNotReady')).toEqual({
      ok: false,
      message: refusal('alert-ignore', 'alertIgnore', true),
    });
    const firing = (platform: string, tenant: string) =>
      resolveAlertPolicy({
        settings: { ...alerts, alertFiringOnly: platform },
        annotations: { [`${P}alert-firing-only`]: tenant },
      });
    expect(firing('true', 'false')).toMatchObject({ ok: true, policy: { firingOnly: false } });
    expect(firing('false', 'true')).toEqual({
      ok: false,
      message: refusal('alert-firing-only', 'alertFiringOnly', true),
    });
  });

  it('refuses a name it cannot bind, naming bindingPolicies', () => {
    for (const name of ['noSuchSetting', policyKeys.drainSkipPodSelector.setting, 'blockingPodSelector']) {
      const r = resolveUpgradePolicy({ settings: { bindingPolicies: `removedApiPolicy, ${name}` } });
      expect(r.ok).toBe(false);
      expect(!r.ok && r.message).toMatch(
        new RegExp(`^setting bindingPolicies: "${name}" is not a setting that can be bound \\(one of `),
      );
    }
    expect(BINDABLE_SETTINGS).not.toContain('pdbForceDrainTimeout');
    expect(BINDABLE_SETTINGS).toContain('alertSilenceMatchers');
  });
});
