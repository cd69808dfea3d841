// The machine update's activity proxies: the quick ones shared by every run,
// and the node's long ones, whose timeouts come from the run's input.
import { ActivityCancellationType, proxyActivities, proxyLocalActivities } from '@temporalio/workflow';
import type { MachineUpdateActivities } from '../../activities/machine-update-types.ts';
import type { MachineUpdateInput } from '../../model/machine-update.ts';

/** Preflight failures that mean "not yet": waited out, then reported with what was last seen. */
export const PREFLIGHT_WAITS = ['NodeNotReady', 'NodeUnderPressure', 'MaxUnavailableReached', 'MachineHasNoNode'];

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

/**
 * Drain and upgrade: heartbeats carry cancellation to these long activities; the SDK sends them at
 * 80% of the timeout at most, so a short one keeps an abort prompt there too.
 */
export function nodeActivities(
  input: MachineUpdateInput,
): Pick<MachineUpdateActivities, 'drain' | 'upgradeNode' | 'waitForNodeVersion'> {
  const drainActivities = proxyActivities<MachineUpdateActivities>({
    startToCloseTimeout: input.drainTimeoutMs + 60_000,
    heartbeatTimeout: '10 seconds',
    // Worker restarts must not use up the drain: its deadline is wall time since it began.
    retry: { initialInterval: retry.initialInterval, backoffCoefficient: 2, maximumInterval: retry.maximumInterval },
  });
  const upgradeActivities = proxyActivities<MachineUpdateActivities>({
    startToCloseTimeout: input.nodeUpgradeTimeoutMs + 60_000,
    heartbeatTimeout: '10 seconds',
    retry,
    // Wait for the upgrade to take its cancellation before stopping the executor: an upgradeNode
    // still creating its Job must not race the stop (the SDK's default does not wait).
    cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
  });
  return {
    drain: drainActivities.drain,
    upgradeNode: upgradeActivities.upgradeNode,
    waitForNodeVersion: upgradeActivities.waitForNodeVersion,
  };
}
