// Typed search attribute keys shared by the workflows (upsert), the api (start),
// the CLIs and gauges (queries) and the Temporal launchers (registration).
// Keyword type: exact-match filters in the Web UI, e.g.
// `ClusterName = "prod-1" AND UpgradePhase = "Failed"`. Only @temporalio/common
// (deterministic), so workflow code imports it too.
import { defineSearchAttributeKey, SearchAttributeType, type SearchAttributePair } from '@temporalio/common';
import type { MachineUpdateInput } from './machine-update.ts';

export const ClusterNamespace = defineSearchAttributeKey('CapiClusterNamespace', SearchAttributeType.KEYWORD);
export const ClusterName = defineSearchAttributeKey('CapiClusterName', SearchAttributeType.KEYWORD);
export const TargetVersion = defineSearchAttributeKey('CapiTargetVersion', SearchAttributeType.KEYWORD);
export const UpgradePhase = defineSearchAttributeKey('CapiUpgradePhase', SearchAttributeType.KEYWORD);
export const MachineName = defineSearchAttributeKey('CapiMachineName', SearchAttributeType.KEYWORD);
export const NodeName = defineSearchAttributeKey('CapiNodeName', SearchAttributeType.KEYWORD);
/** The fleet rollout: on the rollout and on the cluster upgrades it started. */
export const FleetRollout = defineSearchAttributeKey('CapiFleetRollout', SearchAttributeType.KEYWORD);

/** The last readiness verdict of an upgrade waiting to start: Ready, Blocked or Unknown. */
export const UpgradeReadiness = defineSearchAttributeKey('CapiUpgradeReadiness', SearchAttributeType.KEYWORD);

/** Every key the project registers on the Temporal namespace at start. */
export const allSearchAttributeKeys = [
  ClusterNamespace,
  ClusterName,
  TargetVersion,
  UpgradePhase,
  MachineName,
  NodeName,
  FleetRollout,
  UpgradeReadiness,
] as const;

/** What a machine update run carries from its start: the api and the slots workflow start runs alike. */
export function machineUpdateSearchAttributes(input: MachineUpdateInput): SearchAttributePair[] {
  return [
    { key: ClusterNamespace, value: input.machine.namespace },
    { key: ClusterName, value: input.clusterName },
    { key: MachineName, value: input.machine.name },
    { key: TargetVersion, value: input.version },
    { key: UpgradePhase, value: 'Updating' },
  ];
}
