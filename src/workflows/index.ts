// The workflow bundle's entry point: every workflow type the worker serves.
export { heartbeatProbeWorkflow } from './heartbeat-probe.ts';
export { clusterUpgradeWorkflow } from './cluster-upgrade/workflow.ts';
export { clusterEventWorkflow } from './cluster-event.ts';
export { machineUpdateWorkflow } from './machine-update/workflow.ts';
export { machineUpdateSlotsWorkflow } from './machine-update/slots-workflow.ts';
export { fleetRolloutWorkflow } from './fleet-rollout/workflow.ts';
export { readinessWorkflow } from './readiness/workflow.ts';
