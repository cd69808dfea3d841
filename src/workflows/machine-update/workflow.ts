// One in-place update of one Machine: preflight, cordon, drain, upgrade the
// node through an executor, wait for the kubelet, uncordon. Started by
// UpdateMachine, which then reads the memo on every poll.
//
// With maxConcurrentMachineUpdates, the cluster's slots workflow starts the run
// when it lets the update in (the api queues it there); runs started otherwise
// (no limit, retries, older runs) ask it for their place.
//
// The state and its signals are in state.ts, the steps of an attempt in
// steps.ts, what each way out gives back in endings.ts.
//
// What CAPI sees on a bad day (every path ends with the node given back or marked):
// - abort while queued (`abort` to the slots workflow, with the update's workflow
//   id, or BeforeClusterDelete): the run is started only to end as aborted.
// - abort (signal, BeforeClusterDelete, a newer desired spec, the Machine being
//   deleted, seen by the drain and the upgrade wait) before the executor
//   started: the step is cancelled at once, the node uncordoned if we cordoned
//   it; UpdateMachine answers Failure naming the abort and the run ends.
// - the same abort once the executor started (its Job existed or an agent took
//   the request), or while a failure after the executor holds the node: the
//   executor is stopped after its last words are kept (stopNodeUpgrade's result),
//   and the node is treated as after such a failure: it stays cordoned, marked
//   InPlaceUpdateFailed; UpdateMachine answers Failure saying so and the run ends.
// - a failure before the executor touched the node (or a node upgrade refused
//   before anything was created for it): the node is uncordoned (it is as it
//   was); after: it stays cordoned with the Node condition
//   InPlaceUpdateFailed=True, which a MachineHealthCheck can remediate. Once
//   marked, it stays so through every later attempt's failure or abort until
//   an attempt sees it Ready on the new version.
//   Either way the run stays open, answers Failure, and starts over when
//   UpdateMachine is called again after a backoff or on the `retry` signal.
// - the Machine's cluster.x-k8s.io/skip-remediation (set before the drain, so a
//   MachineHealthCheck does not replace it while the kubelet restarts) is
//   removed on every exit above, before the answer changes.
import { setHandler } from '@temporalio/workflow';
import type { MachineUpdateInput, MachineUpdateStatus } from '../../model/machine-update.ts';
import { abortSignal, forceDrainSignal, machineUpdateStatusQuery, retrySignal, skipDrainSignal } from '../messages.ts';
import { setVersioningBehavior } from '../versioning.ts';
import {
  abortedAfterFailure,
  abortedWhileQueued,
  endAborted,
  expired,
  isAbort,
  recordFailure,
  succeeded,
} from './endings.ts';
import { MachineUpdateState } from './state.ts';
import { attemptUpdate } from './steps.ts';

export async function machineUpdateWorkflow(input: MachineUpdateInput): Promise<MachineUpdateStatus> {
  const s = new MachineUpdateState(input);
  setHandler(abortSignal, (arg) => s.onAbort(arg));
  setHandler(skipDrainSignal, () => s.onSkipDrain());
  setHandler(forceDrainSignal, () => s.onForceDrain());
  setHandler(retrySignal, () => s.onRetry());
  setHandler(machineUpdateStatusQuery, () => s.status);

  if (input.abortedWhileQueued !== undefined) return await abortedWhileQueued(s, input.abortedWhileQueued);
  // Let in by the slots workflow: past the queue from the start (its Preflight step says since when).
  if (s.slot.heldFromStart) s.enter('Preflight', 'preflight checks');
  else s.publish();
  for (;;) {
    try {
      await attemptUpdate(s);
      return await succeeded(s);
    } catch (err) {
      if (isAbort(s, err)) return await endAborted(s);
      const touched = await recordFailure(s, err);
      if (!(await s.waitForRetry())) return await expired(s);
      if (s.abortReason !== undefined) return await abortedAfterFailure(s, touched);
      s.retrying();
    }
  }
}

// Worker Versioning: one node's update takes minutes; it finishes on the build it started on, so its
// code may change freely with a new build id (no patch). A failed run waiting for `retry` keeps its
// build up to FAILED_RETENTION in state.ts (docs/worker-versioning.md).
setVersioningBehavior('PINNED', machineUpdateWorkflow);
