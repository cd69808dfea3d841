// Events on the Machine a machine update works on (kube-events.ts): CAPI drops
// UpdateMachine's failure message, and operators look at the Machine.
import type { KubeConfig } from '@kubernetes/client-node';
import { createEventRecorder } from './kube-events.ts';
import type { MachineEventInput } from './machine-update-types.ts';

export function createMachineEventActivities(management: KubeConfig) {
  const record = createEventRecorder(management);
  return {
    async recordMachineEvent(input: MachineEventInput): Promise<void> {
      const { machine, ...event } = input;
      await record({ kind: 'Machine', namespace: machine.namespace, name: machine.name, ...event });
    },
  };
}
