// The readiness check of an upgrade before it runs: its input, and the id of
// its run (one per cluster and target; a finished one may be run again).
import type { ClusterRef } from './cluster-upgrade.ts';

export interface ReadinessInput {
  cluster: ClusterRef;
  /** The version the upgrade would go to. */
  targetVersion: string;
  /**
   * ExtensionConfig settings to read the policy with (the worker does not read the ExtensionConfig);
   * unset = built-in defaults. The Cluster's annotations apply over them as for an upgrade.
   */
  settings?: Record<string, string>;
}

export function readinessWorkflowId(cluster: ClusterRef, targetVersion: string): string {
  return `readiness/${cluster.namespace}/${cluster.name}/${targetVersion}`;
}
