// The Kubernetes Events a machine update records on its Machine: each
// milestone's carried by the step activity that reaches it, the rest beside
// the steps, one after another (so they keep their order on the Machine).
// Each is keyed by run, attempt and reason, so retries add none.
import { workflowInfo } from '@temporalio/workflow';
import type { MachineEventInput, MachineEventReason } from '../../activities/machine-update-types.ts';
import type { MachineUpdateInput, MachineUpdateStatus } from '../../model/machine-update.ts';
import { EventChain } from '../event-chain.ts';
import { eventActivities } from './activities.ts';

export class MachineUpdateEvents {
  private readonly chain: EventChain<MachineEventInput>;
  private readonly input: MachineUpdateInput;
  private readonly status: MachineUpdateStatus;

  constructor(input: MachineUpdateInput, status: MachineUpdateStatus) {
    this.input = input;
    this.status = status;
    this.chain = new EventChain((e: MachineEventInput) => eventActivities.recordMachineEvent(e));
  }

  private eventInput(reason: MachineEventReason, type: 'Normal' | 'Warning', message: string): MachineEventInput {
    const { workflowId, runId } = workflowInfo();
    const key = `${workflowId}/${runId}/${this.status.attempt ?? 1}/${reason}`;
    return { machine: this.input.machine, reason, type, message, key };
  }

  /** Recorded beside the steps; the run waits for it only before it ends (or sits in Failed). */
  add(reason: MachineEventReason, type: 'Normal' | 'Warning', message: string): void {
    this.chain.add(this.eventInput(reason, type, message));
  }

  /** A milestone's Event for the step that reaches it to record. */
  forStep(reason: MachineEventReason, message: string): MachineEventInput {
    return this.eventInput(reason, 'Normal', message);
  }

  async settled(): Promise<void> {
    await this.chain.settled();
  }
}
