// UpdateMachine's request mapped to its call: the machine, its version and cluster, the workflow
// id from the desired spec's hash, the workflow input from the settings, and the request check
// to pass before anything is written. Pure: nothing is read here.
import { specHash } from '../../../domain/in-place.ts';
import { resolveInPlacePolicy } from '../../../domain/in-place-policy.ts';
import { resolveMachineUpdatePolicy, type MachineUpdatePolicy } from '../../../domain/machine-update-policy.ts';
import { tryParseVersion } from '../../../domain/versions.ts';
import {
  machineUpdateWorkflowId,
  type MachineObjectRefs,
  type MachineUpdateInput,
  type TypedObjectRef,
} from '../../../model/machine-update.ts';
import { CLUSTER_NAME_LABEL } from '../../../platform/kube/capi-api.ts';
import type { HookRequest, RawObject } from '../../hooks/contract.ts';
import { HookFailure } from '../../hooks/errors.ts';
import { updateMachineRule, type Rule } from '../request-checks.ts';

/** `{apiVersion, kind, name}` of an object CAPI sent, when it names all three. */
function typedRef(obj: RawObject | undefined): TypedObjectRef | undefined {
  const name = obj?.metadata?.name;
  return obj?.apiVersion && obj.kind && name ? { apiVersion: obj.apiVersion, kind: obj.kind, name } : undefined;
}

/** What the management executor's request names besides the Machine (desired: CAPI applied it before the call). */
function objectRefsOf(desired: { infrastructureMachine?: RawObject; bootstrapConfig?: RawObject }): MachineObjectRefs {
  const infrastructureMachine = typedRef(desired.infrastructureMachine);
  const bootstrapConfig = typedRef(desired.bootstrapConfig);
  return {
    ...(infrastructureMachine ? { infrastructureMachine } : {}),
    ...(bootstrapConfig ? { bootstrapConfig } : {}),
  };
}

/** What one UpdateMachine call is about and would start. */
export interface MachineUpdateCall {
  machine: { namespace: string; name: string };
  version: string;
  clusterName: string;
  /** The desired spec's hash: one workflow per machine and desired spec. */
  hash: string;
  workflowId: string;
  input: MachineUpdateInput;
  /** maxConcurrentMachineUpdates: above 0 the cluster's slots workflow starts the run. */
  limit: number;
  /** The request check to pass before anything is started, queued or signalled. */
  rule: Rule;
}

/** The call an UpdateMachine request asks for; a HookFailure when the settings or the request cannot be served. */
export function machineUpdateCall(
  request: HookRequest<'UpdateMachine'>,
  settings: Readonly<Record<string, string>>,
): MachineUpdateCall {
  const inPlace = resolveInPlacePolicy(settings);
  if (inPlace.ok && !inPlace.policy.enabled) {
    throw new HookFailure('in-place updates are disabled by the setting inPlaceUpdates; no machine update was started');
  }
  const resolved = resolveMachineUpdatePolicy(settings);
  if (!resolved.ok) throw new HookFailure(resolved.message);
  const policy = resolved.policy;
  const desired = request.desired;
  const machine = { namespace: desired.machine.metadata.namespace, name: desired.machine.metadata.name };
  const version = desired.machine.spec.version;
  if (!version || !tryParseVersion(version).ok)
    throw new HookFailure(`desired.machine.spec.version ${JSON.stringify(version ?? '')} is not a Kubernetes version`);
  const clusterName = desired.machine.spec.clusterName ?? desired.machine.metadata.labels?.[CLUSTER_NAME_LABEL];
  if (!clusterName) throw new HookFailure('desired.machine.spec.clusterName is missing');
  const hash = specHash(desired);
  // Files are read from the KubeadmConfig by the activities: their contents (often
  // secrets) never enter workflow history. CAPI applied the desired one before this call.
  const configRef = desired.machine.spec.bootstrap?.configRef;
  const bootstrapConfigName = configRef?.name ?? desired.bootstrapConfig?.metadata?.name;
  const rule = updateMachineRule({
    ...machine,
    clusterName,
    version,
    ...(configRef ? { bootstrapConfigRef: configRef as { apiGroup?: string; kind?: string; name?: string } } : {}),
  });
  const input = machineUpdateInput(policy, {
    machine,
    clusterName,
    version,
    ...(bootstrapConfigName ? { bootstrapConfig: { namespace: machine.namespace, name: bootstrapConfigName } } : {}),
    specHash: hash,
    ...(policy.executor === 'management' ? { objectRefs: objectRefsOf(desired) } : {}),
  });
  const workflowId = machineUpdateWorkflowId(machine, hash);
  return { machine, version, clusterName, hash, workflowId, input, limit: policy.maxConcurrentMachineUpdates, rule };
}

type MachineFields = Pick<
  MachineUpdateInput,
  'machine' | 'clusterName' | 'version' | 'bootstrapConfig' | 'specHash' | 'objectRefs'
>;

/** The workflow input: the machine's fields and the settings' policy, each field as the run has always had it. */
function machineUpdateInput(policy: MachineUpdatePolicy, fields: MachineFields): MachineUpdateInput {
  const { objectRefs, ...machineFields } = fields;
  return {
    ...machineFields,
    executor: policy.executor,
    ...(objectRefs ? { objectRefs } : {}),
    deleteEmptyDirData: policy.deleteEmptyDirData,
    forceDrainUnmanagedPods: policy.forceDrainUnmanagedPods,
    drainTimeoutMs: policy.drainTimeoutMs,
    nodeUpgradeTimeoutMs: policy.nodeUpgradeTimeoutMs,
    retryBackoffMs: policy.retryBackoffMs,
    preflightTimeoutMs: policy.preflightTimeoutMs,
    // Held by the cluster's slots workflow: a hard limit across api replicas (a count here would race).
    maxConcurrentMachineUpdates: policy.maxConcurrentMachineUpdates,
    ...(policy.pdbForceDrainTimeoutMs !== undefined ? { pdbForceDrainTimeoutMs: policy.pdbForceDrainTimeoutMs } : {}),
    ...(policy.drainSkipPodSelector !== undefined ? { drainSkipPodSelector: policy.drainSkipPodSelector } : {}),
    // Only the keys set: runs without pacing keep their input (and their commands) as before.
    ...policy.pacing,
  };
}
