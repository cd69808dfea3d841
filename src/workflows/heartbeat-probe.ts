// A tiny workflow that proves the whole path (client → server → worker →
// activity → query → signal) without touching a cluster. `make dev` runs it
// at start as a self-check; the harness test drives it the same way.
import { condition, defineQuery, proxyActivities, setHandler } from '@temporalio/workflow';
import { setVersioningBehavior } from './versioning.ts';
import type { ProbeActivities } from '../activities/probe.ts';
import { abortSignal } from './messages.ts';

export interface ProbeInput {
  /** Name echoed by the activity, so the result proves the activity ran. */
  name: string;
  /** How long to wait for an abort signal before finishing on its own. */
  waitSeconds: number;
}

export interface ProbeState {
  phase: 'Waiting' | 'Aborted' | 'Completed';
  greeting?: string;
  abortReason?: string;
}

export const probeStateQuery = defineQuery<ProbeState>('status');

const { greet } = proxyActivities<ProbeActivities>({ startToCloseTimeout: '10 seconds' });

export async function heartbeatProbeWorkflow(input: ProbeInput): Promise<ProbeState> {
  const state: ProbeState = { phase: 'Waiting' };
  setHandler(probeStateQuery, () => state);
  setHandler(abortSignal, (arg) => {
    state.abortReason = arg?.reason ?? 'aborted by operator';
  });
  state.greeting = await greet(input.name);
  const aborted = await condition(() => state.abortReason !== undefined, `${input.waitSeconds} seconds`);
  state.phase = aborted ? 'Aborted' : 'Completed';
  return state;
}

// Worker Versioning: a short self-check; it finishes on the build it started on.
setVersioningBehavior('PINNED', heartbeatProbeWorkflow);
