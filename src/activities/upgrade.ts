// Activities of the cluster upgrade workflow: Events and notifications on the
// Cluster, health checks (cluster-health.ts) and capacity reservation
// (capacity.ts). Every activity is idempotent, and heartbeats so that the
// workflow's abort reaches it even while a Kubernetes call hangs.
import type { KubeConfig } from '@kubernetes/client-node';
import { createCapacityActivities } from './capacity.ts';
import { createClusterEventActivities } from './cluster-events.ts';
import { createClusterHealthActivities } from './cluster-health.ts';
import { createDeprecatedApiActivities } from './deprecated-apis.ts';
import type { NotifierOptions } from './notifications.ts';
import type { UpgradeActivities } from './upgrade-types.ts';

export interface UpgradeActivityDeps {
  /** The management cluster (Cluster API objects, `<cluster>-kubeconfig` Secrets). */
  management: KubeConfig;
  /** Where phase changes are POSTed as CloudEvents; unset = no notifications. */
  notifications?: NotifierOptions;
}

export function createUpgradeActivities(deps: UpgradeActivityDeps): UpgradeActivities {
  return {
    ...createClusterEventActivities(deps.management, deps.notifications),
    ...createClusterHealthActivities(deps.management),
    ...createDeprecatedApiActivities(deps.management),
    ...createCapacityActivities(deps.management),
  };
}
