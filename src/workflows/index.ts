// The workflow bundle's entry point: every workflow type the worker serves.
export { heartbeatProbeWorkflow } from './heartbeat-probe.ts';
export { clusterUpgradeWorkflow } from './cluster-upgrade.ts';
export { clusterEventWorkflow } from './cluster-event.ts';
export { machineUpdateWorkflow } from './machine-update.ts';
export { machineUpdateSlotsWorkflow } from './machine-update-slots.ts';
export { fleetRolloutWorkflow } from './fleet-rollout.ts';
