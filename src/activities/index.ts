// `createActivities(deps)` returns every activity function the worker
// registers; dependencies (Kubernetes clients) come in from outside so tests
// can pass their own.
import type { KubeConfig } from '@kubernetes/client-node';
import { managementKubeConfig } from './kube.ts';
import { createProbeActivities } from './probe.ts';
import { createUpgradeActivities } from './upgrade.ts';

export interface ActivityDeps {
  /** The management cluster; default: MANAGEMENT_KUBECONFIG, else the in-cluster service account. */
  management?: KubeConfig;
}

export function createActivities(deps: ActivityDeps = {}) {
  const management = deps.management ?? managementKubeConfig();
  return {
    ...createProbeActivities(),
    ...createUpgradeActivities({ management }),
  };
}

export type Activities = ReturnType<typeof createActivities>;
