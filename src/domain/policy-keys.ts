// Where users set policy: ExtensionConfig `spec.settings` keys (for every
// cluster) and Cluster annotations under one prefix (per cluster, winning
// over settings). The names are part of the public interface;
// docs/configuration.md documents each (test/unit/docs-configuration.test.ts checks).

export const ANNOTATION_PREFIX = 'upgrades.capi-orchestrator.io/';

export interface PolicyKey {
  /** ExtensionConfig spec.settings key. */
  setting: string;
  /** Cluster annotation (prefix included). */
  annotation: string;
}

export function key(setting: string, annotationSuffix: string): PolicyKey {
  return { setting, annotation: `${ANNOTATION_PREFIX}${annotationSuffix}` };
}

export const policyKeys = {
  kubernetesVersions: key('kubernetesVersions', 'kubernetes-versions'),
  controlPlaneStrategy: key('controlPlaneUpgradeStrategy', 'control-plane-upgrade-strategy'),
  workersStrategy: key('workersUpgradeStrategy', 'workers-upgrade-strategy'),
  upgradeAt: key('upgradeAt', 'upgrade-at'),
  maintenanceWindow: key('maintenanceWindow', 'maintenance-window'),
  maintenanceTimeZone: key('maintenanceTimeZone', 'maintenance-time-zone'),
  maintenanceFreezes: key('maintenanceFreezes', 'maintenance-freezes'),
  delayedAfter: key('delayedAfter', 'delayed-after'),
  commenceWithin: key('commenceWithin', 'commence-within'),
  capacityReservation: key('capacityReservation', 'capacity-reservation'),
  capacityReadyTimeout: key('capacityReadyTimeout', 'capacity-ready-timeout'),
  pdbForceDrainTimeout: key('pdbForceDrainTimeout', 'pdb-force-drain-timeout'),
  drainSkipPodSelector: key('drainSkipPodSelector', 'drain-skip-pod-selector'),
  criticalNamespaces: key('criticalNamespaces', 'critical-namespaces'),
  blockingPdbPolicy: key('blockingPdbPolicy', 'blocking-pdb-policy'),
  healthCheckTimeout: key('healthCheckTimeout', 'health-check-timeout'),
  removedApiPolicy: key('removedApiPolicy', 'removed-api-policy'),
} as const;

export interface PolicySources {
  settings?: Readonly<Record<string, string>> | undefined;
  annotations?: Readonly<Record<string, string>> | undefined;
}

/** The winning raw value for a key and the name to quote in messages: annotation, then setting. */
export function lookupPolicy(sources: PolicySources, k: PolicyKey): { name: string; value: string } | undefined {
  const fromAnnotation = sources.annotations?.[k.annotation];
  if (fromAnnotation !== undefined && fromAnnotation.trim() !== '')
    return { name: `annotation ${k.annotation}`, value: fromAnnotation };
  const fromSetting = sources.settings?.[k.setting];
  if (fromSetting !== undefined && fromSetting.trim() !== '')
    return { name: `setting ${k.setting}`, value: fromSetting };
  return undefined;
}
