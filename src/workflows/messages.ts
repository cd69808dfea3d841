// Signals, queries and updates: imported by the workflows, the api and the
// tests, so each name is spelled once. The data they carry lives in
// src/model (plain types that activities may import too).
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import type { ReadinessReport } from '../domain/readiness.ts';
import type { AbortInput, ClusterUpgradeStatus, Gate, HookCall, PolicyUpdate } from '../model/cluster-upgrade.ts';
import type { ApproveInput, FleetRolloutStatus, RolloutAbortInput } from '../model/fleet-rollout.ts';
import type {
  MachineUpdateSlotRequest,
  MachineUpdateSlotsAbortInput,
  MachineUpdateSlotsStatus,
  MachineUpdateStatus,
} from '../model/machine-update.ts';

export const abortSignal = defineSignal<[AbortInput?]>('abort');
/** Operator resume after an abort or a failure: `temporal workflow signal --workflow-id … --name resume`. */
export const resumeSignal = defineSignal<[]>('resume');
/** Operator retry of a failed step: `temporal workflow signal --workflow-id … --name retry`. */
export const retrySignal = defineSignal<[]>('retry');

// ---- cluster upgrades ---------------------------------------------------------

export const clusterUpgradeStatusQuery = defineQuery<ClusterUpgradeStatus>('status');
/** A hook call that brings something new; the validator rejects repeats, which leaves no history. */
export const recordHookUpdate = defineUpdate<Gate, [HookCall]>('recordHook');
/** Annotations or settings changed: sent by the api only when the policy hash differs from the memo's. */
export const updatePolicySignal = defineSignal<[PolicyUpdate]>('updatePolicy');

// ---- machine updates ----------------------------------------------------------

export const machineUpdateStatusQuery = defineQuery<MachineUpdateStatus>('status');
/** On-call: stop draining and go on with the upgrade. */
export const skipDrainSignal = defineSignal<[]>('skipDrain');
/** On-call: delete PDB-blocked pods now instead of waiting for pdbForceDrainTimeout. */
export const forceDrainSignal = defineSignal<[]>('forceDrain');

// ---- machine update slots (maxConcurrentMachineUpdates) -----------------------

/** A machine update asks for a slot; the slots workflow answers with `slotGranted` to that run. */
export const acquireSlotSignal = defineSignal<[MachineUpdateSlotRequest]>('acquireSlot');
/** A machine update gives its slot back, or leaves the queue. */
export const releaseSlotSignal = defineSignal<[Pick<MachineUpdateSlotRequest, 'workflowId' | 'runId'>]>('releaseSlot');
/** Sent by the slots workflow to the run it lets in (again on liveness checks: harmless). */
export const slotGrantedSignal = defineSignal<[]>('slotGranted');
export const machineUpdateSlotsQuery = defineQuery<MachineUpdateSlotsStatus>('slots');
/**
 * Aborts queued updates (one by `workflowId`, or all). Named `abort` like every workflow's
 * abort, so BeforeClusterDelete (with `final`) and operators use the one verb.
 */
export const slotsAbortSignal = defineSignal<[MachineUpdateSlotsAbortInput?]>('abort');

// ---- fleet rollouts -----------------------------------------------------------

export const fleetRolloutStatusQuery = defineQuery<FleetRolloutStatus>('status');
/** `temporal workflow signal --name approve --input '{"wave":2,"by":"alice"}'`. */
export const approveWaveSignal = defineSignal<[ApproveInput]>('approve');
/** Stops starting clusters (those in flight go on); `resume` starts them again. */
export const pauseRolloutSignal = defineSignal<[]>('pause');
/** Stops the rollout for good; `abortInFlight` also aborts the cluster upgrades still running. */
export const abortRolloutSignal = defineSignal<[RolloutAbortInput?]>('abort');

// ---- readiness checks ---------------------------------------------------------

/** The report so far (checks not yet run are absent); the run's result is the whole report. */
export const readinessReportQuery = defineQuery<ReadinessReport>('status');
