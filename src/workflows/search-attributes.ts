// Typed search attribute keys shared by the workflows (upsert), the api (start)
// and the dev-server launcher (registration). Keyword type: exact-match filters
// in the Web UI, e.g. `ClusterName = "prod-1" AND UpgradePhase = "Failed"`.
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

export const ClusterNamespace = defineSearchAttributeKey('CapiClusterNamespace', SearchAttributeType.KEYWORD);
export const ClusterName = defineSearchAttributeKey('CapiClusterName', SearchAttributeType.KEYWORD);
export const TargetVersion = defineSearchAttributeKey('CapiTargetVersion', SearchAttributeType.KEYWORD);
export const UpgradePhase = defineSearchAttributeKey('CapiUpgradePhase', SearchAttributeType.KEYWORD);
export const MachineName = defineSearchAttributeKey('CapiMachineName', SearchAttributeType.KEYWORD);
export const NodeName = defineSearchAttributeKey('CapiNodeName', SearchAttributeType.KEYWORD);
/** The fleet rollout: on the rollout and on the cluster upgrades it started. */
export const FleetRollout = defineSearchAttributeKey('CapiFleetRollout', SearchAttributeType.KEYWORD);

/** Every key the project registers on the Temporal namespace at start. */
export const allSearchAttributeKeys = [
  ClusterNamespace,
  ClusterName,
  TargetVersion,
  UpgradePhase,
  MachineName,
  NodeName,
  FleetRollout,
] as const;
