// The preflight of a machine update: the Cluster API Machine, its Node and its Cluster's drain
// policy, read and checked before anything is touched. A Machine or node that cannot be updated
// fails for good; one that is not ready yet (no node, NotReady, under pressure, the cluster's
// unavailable budget spent) fails retryably, so the activity waits.
import { CoreV1Api, type CustomObjectsApi } from '@kubernetes/client-node';
import { ApplicationFailure } from '@temporalio/common';
import { parseSkipPodSelector } from '../domain/drain.ts';
import { parseGoDuration } from '../domain/durations.ts';
import { rejectingPressure } from '../domain/node-pressure.ts';
import { policyKeys, valueOverLimit } from '../domain/policy-keys.ts';
import { apiClient } from '../platform/kube/clients.ts';
import { isNotFound } from '../platform/kube/errors.ts';
import { CAPI_GROUP, CAPI_VERSION } from '../platform/kube/capi-api.ts';
import { MACHINE_UPDATE_FAILURES, type WorkloadKubeConfig } from './machine-update-common.ts';
import type { MachineRef, PreflightResult } from './machine-update-types.ts';
import { clusterNodePacing } from './node-pacing.ts';
import { describeReady, readMachine, readNodeOrFail, readyCondition } from './node-reads.ts';
import { unavailableBudgetExceeded } from './unavailable-budget.ts';

/** preflight: the Machine's node and cluster, when the Machine can be updated now. */
export async function preflightMachine(
  custom: CustomObjectsApi,
  workload: WorkloadKubeConfig,
  machine: MachineRef,
): Promise<PreflightResult> {
  const who = `Machine ${machine.namespace}/${machine.name}`;
  const obj = await readMachine(custom, machine);
  if (!obj) throw ApplicationFailure.nonRetryable(`${who} not found`, MACHINE_UPDATE_FAILURES.machineNotFound);
  const clusterName = obj.spec?.clusterName;
  if (!clusterName) {
    throw ApplicationFailure.nonRetryable(
      `${who} has no spec.clusterName`,
      MACHINE_UPDATE_FAILURES.machineHasNoCluster,
    );
  }
  const nodeName = obj.status?.nodeRef?.name;
  if (!nodeName) {
    throw ApplicationFailure.retryable(`${who}: machine has no nodeRef yet`, MACHINE_UPDATE_FAILURES.machineHasNoNode);
  }
  const kc = await workload({ namespace: machine.namespace, name: clusterName });
  const core = apiClient(kc, CoreV1Api);
  const node = await readNodeOrFail(core, nodeName, `of ${who}`);
  if (node.metadata?.deletionTimestamp) {
    throw ApplicationFailure.nonRetryable(
      `node ${nodeName} of ${who} is being deleted`,
      MACHINE_UPDATE_FAILURES.nodeBeingDeleted,
    );
  }
  const ready = readyCondition(node);
  if (ready?.status !== 'True') {
    throw ApplicationFailure.retryable(
      `node ${nodeName} of ${who} is not Ready (${describeReady(node)})`,
      MACHINE_UPDATE_FAILURES.nodeNotReady,
    );
  }
  const pressure = rejectingPressure(node);
  if (pressure.length > 0) {
    throw ApplicationFailure.retryable(
      `node ${nodeName} of ${who} reports ${pressure.join(' and ')}: its kubelet rejects new pods (free the node's disk or processes)`,
      MACHINE_UPDATE_FAILURES.nodeUnderPressure,
    );
  }
  const blocked = await unavailableBudgetExceeded(custom, kc, machine.namespace, clusterName, obj);
  if (blocked) {
    throw ApplicationFailure.retryable(`${who} waits: ${blocked}`, MACHINE_UPDATE_FAILURES.maxUnavailableReached);
  }
  return { nodeName, clusterName, ...(await clusterDrainPolicy(custom, machine.namespace, clusterName)) };
}

/**
 * The Cluster's `pdb-force-drain-timeout`, `drain-skip-pod-selector` and pacing annotations, which override
 * the ExtensionConfig settings for that cluster (UpdateMachine carries no Cluster, so they are read here).
 */
async function clusterDrainPolicy(
  custom: CustomObjectsApi,
  namespace: string,
  name: string,
): Promise<Omit<PreflightResult, 'nodeName' | 'clusterName'>> {
  let cluster: { metadata?: { annotations?: Record<string, string> } };
  try {
    cluster = (await custom.getNamespacedCustomObject({
      group: CAPI_GROUP,
      version: CAPI_VERSION,
      plural: 'clusters',
      namespace,
      name,
    })) as typeof cluster;
  } catch (err) {
    if (isNotFound(err)) return {}; // the settings apply
    throw err;
  }
  const annotations = cluster.metadata?.annotations ?? {};
  const policy: Omit<PreflightResult, 'nodeName' | 'clusterName'> = clusterNodePacing(annotations, namespace, name);
  const pdbKey = policyKeys.pdbForceDrainTimeout.annotation;
  const pdbTooLong = valueOverLimit(
    `Cluster ${namespace}/${name} annotation ${pdbKey}`,
    policyKeys.pdbForceDrainTimeout.setting,
    annotations[pdbKey] ?? '',
  );
  if (pdbTooLong !== undefined) throw ApplicationFailure.nonRetryable(pdbTooLong, MACHINE_UPDATE_FAILURES.invalidInput);
  const pdb = annotations[pdbKey]?.trim();
  if (pdb) {
    const ms = parseGoDuration(pdb);
    if (ms === undefined)
      throw ApplicationFailure.nonRetryable(
        `Cluster ${namespace}/${name} annotation ${pdbKey}=${JSON.stringify(pdb)}: not a duration (use e.g. 30m, 2h)`,
        MACHINE_UPDATE_FAILURES.invalidInput,
      );
    policy.pdbForceDrainTimeoutMs = ms;
  }
  const skipKey = policyKeys.drainSkipPodSelector.annotation;
  const skip = annotations[skipKey]?.trim();
  if (skip) {
    const parsed = parseSkipPodSelector(`Cluster ${namespace}/${name} annotation ${skipKey}`, skip);
    if (!parsed.ok) throw ApplicationFailure.nonRetryable(parsed.message, MACHINE_UPDATE_FAILURES.invalidInput);
    policy.drainSkipPodSelector = skip;
  }
  return policy;
}
