// Events on the Cluster an upgrade works on (kube-events.ts): started, each step
// gated and opened, failed, aborted, completed.
import type { KubeConfig } from '@kubernetes/client-node';
import { createEventRecorder } from './kube-events.ts';
import type { ClusterEventInput } from './upgrade-types.ts';

export function createClusterEventActivities(management: KubeConfig) {
  const record = createEventRecorder(management);
  return {
    async recordClusterEvent(input: ClusterEventInput): Promise<void> {
      const { cluster, ...event } = input;
      await record({ kind: 'Cluster', namespace: cluster.namespace, name: cluster.name, ...event });
    },
  };
}
