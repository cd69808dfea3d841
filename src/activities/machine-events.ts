// Kubernetes Events on the Cluster API Machine a machine update works on, so
// `kubectl describe machine` and `kubectl get events` tell its story: CAPI
// drops UpdateMachine's failure message, and operators look at the Machine.
// One Event per (run, attempt, reason), named after them: a retried activity
// finds it (409) instead of adding a second one.
import { createHash } from 'node:crypto';
import { CoreV1Api, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { apiClient, isConflict } from './kube.ts';
import { truncate } from './machine-update-common.ts';
import type { MachineEventInput } from './machine-update-types.ts';
import { readMachine } from './node.ts';

const COMPONENT = 'capi-upgrade-orchestrator';
/** Event messages are cut at 1,024 characters (kubectl shows them whole up to there). */
const MAX_EVENT_MESSAGE = 1_024;

export function createMachineEventActivities(management: KubeConfig) {
  const core = apiClient(management, CoreV1Api);
  const custom = apiClient(management, CustomObjectsApi);
  return {
    async recordMachineEvent(input: MachineEventInput): Promise<void> {
      const machine = await readMachine(custom, input.machine);
      // Gone (scale-down, remediation): nothing to attach it to.
      if (!machine?.metadata?.uid) return;
      const digest = createHash('sha256').update(input.key).digest('hex').slice(0, 16);
      const now = new Date();
      try {
        await core.createNamespacedEvent({
          namespace: input.machine.namespace,
          body: {
            metadata: { name: `${input.machine.name}.${digest}`, namespace: input.machine.namespace },
            involvedObject: {
              apiVersion: machine.apiVersion ?? 'cluster.x-k8s.io/v1beta2',
              kind: 'Machine',
              name: input.machine.name,
              namespace: input.machine.namespace,
              uid: machine.metadata.uid,
            },
            type: input.type,
            reason: input.reason,
            message: truncate(input.message, MAX_EVENT_MESSAGE),
            source: { component: COMPONENT },
            reportingComponent: COMPONENT,
            reportingInstance: COMPONENT,
            firstTimestamp: now,
            lastTimestamp: now,
            count: 1,
          },
        });
      } catch (err) {
        if (!isConflict(err)) throw err;
      }
    },
  };
}
