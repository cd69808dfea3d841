// The machine update's activity proxies that take no input, and the preflight
// that waits out "not yet".
import { ApplicationFailure, proxyActivities, proxyLocalActivities, sleep } from '@temporalio/workflow';
import type { MachineRef, MachineUpdateActivities, PreflightResult } from '../../activities/machine-update-types.ts';
import { formatDuration } from '../../domain/durations.ts';
import { failureReason, failureType } from '../failures.ts';
import type { MachineUpdateState } from './state.ts';

/** Preflight failures that mean "not yet": waited out, then reported with what was last seen. */
export const PREFLIGHT_WAITS = ['NodeNotReady', 'MaxUnavailableReached', 'MachineHasNoNode'];

export const retry = {
  initialInterval: '2 seconds',
  backoffCoefficient: 2,
  maximumInterval: '1 minute',
  maximumAttempts: 10,
};
/** A regular activity for stopNodeUpgrade: its result (the Job's last log lines) shows in the Web UI. */
export const remoteQuick = proxyActivities<MachineUpdateActivities>({ startToCloseTimeout: '1 minute', retry });
export const localQuick = proxyLocalActivities<MachineUpdateActivities>({ startToCloseTimeout: '1 minute', retry });
export const localPreflight = proxyLocalActivities<MachineUpdateActivities>({
  startToCloseTimeout: '1 minute',
  retry: { ...retry, nonRetryableErrorTypes: PREFLIGHT_WAITS },
});
// Best effort: a few quick tries, then the update goes on without its Event. Regular activities,
// not local ones: a local activity holds its workflow task open, which delayed the next step's
// dispatch by the Event's API calls (Drain p50 0.28 → 0.86 s in bench/machine-updates.ts).
export const eventActivities = proxyActivities<MachineUpdateActivities>({
  startToCloseTimeout: '10 seconds',
  retry: { initialInterval: '1 second', maximumAttempts: 3 },
});

/** Preflight, waiting out "not yet" (node NotReady, maxUnavailable reached) up to `timeoutMs`; `step` makes each call abortable. */
export async function preflightWithin(
  machine: MachineRef,
  timeoutMs: number,
  step: <T>(fn: () => Promise<T>) => Promise<T>,
  state: MachineUpdateState,
): Promise<PreflightResult> {
  const deadline = Date.now() + timeoutMs;
  // About 100 rounds whatever the timeout (1–30 s apart): the history stays short.
  const pause = Math.min(30_000, Math.max(1_000, Math.ceil(timeoutMs / 100)));
  for (;;) {
    try {
      return await step(() => localPreflight.preflight({ machine }));
    } catch (err) {
      const type = failureType(err);
      if (type === undefined || !PREFLIGHT_WAITS.includes(type)) throw err;
      if (Date.now() >= deadline) {
        throw ApplicationFailure.nonRetryable(
          `${failureReason(err)} (waited ${formatDuration(timeoutMs)}, preflightTimeout)`,
          type,
        );
      }
      state.note(`preflight checks: waiting: ${failureReason(err)}`);
      await step(() => sleep(pause));
    }
  }
}
