// Events on the Cluster an upgrade works on (kube-events.ts): started, each step
// gated and opened, failed, aborted, completed.
// With a notification webhook configured, phase changes are also POSTed there
// (notifications.ts), whether or not the Event could be written.
import type { KubeConfig } from '@kubernetes/client-node';
import { createEventRecorder } from './kube-events.ts';
import { createNotifier, type NotifierOptions } from './notifications.ts';
import type { ClusterEventInput } from './upgrade-types.ts';

export function createClusterEventActivities(management: KubeConfig, notifications?: NotifierOptions) {
  const record = createEventRecorder(management);
  const notify = notifications ? createNotifier(notifications) : undefined;
  return {
    async recordClusterEvent(input: ClusterEventInput): Promise<void> {
      const { cluster, ...event } = input;
      // Side by side: a webhook that is down never delays the Event, nor the other way round.
      // A retry (the Event failed) may notify again: the CloudEvent id lets the receiver drop it.
      await Promise.all([
        notify?.(input),
        record({ kind: 'Cluster', namespace: cluster.namespace, name: cluster.name, ...event }),
      ]);
    },
  };
}
