// The workflow type names the api, the CLIs, the gauges and the benches start
// and query by (`WorkflowType = "..."`). Each equals the name of a function
// src/workflows/index.ts exports (test/unit/workflow-types.test.ts checks it):
// renaming one is a new workflow type, which running histories do not know.
export const workflowTypes = {
  clusterUpgrade: 'clusterUpgradeWorkflow',
  clusterEvent: 'clusterEventWorkflow',
  machineUpdate: 'machineUpdateWorkflow',
  machineUpdateSlots: 'machineUpdateSlotsWorkflow',
  fleetRollout: 'fleetRolloutWorkflow',
  heartbeatProbe: 'heartbeatProbeWorkflow',
  readiness: 'readinessWorkflow',
} as const;

export type WorkflowTypeName = (typeof workflowTypes)[keyof typeof workflowTypes];
