// CanUpdateMachine / CanUpdateMachineSet: pure patches for what we can apply in place, claimed
// only when someone is there to apply them (a node agent, or the infrastructure's node upgrader).
import {
  computeMachinePatches,
  computeMachineSetPatches,
  decodeJsonPatch,
  type Declined,
  type JsonPatch,
} from '../../../domain/in-place.ts';
import { allowedForExecutor, resolveInPlacePolicy, type InPlacePolicy } from '../../../domain/in-place-policy.ts';
import { resolveMachineUpdatePolicy } from '../../../domain/machine-update-policy.ts';
import { HookFailure } from '../../hooks/errors.ts';
import type { NodeAgentCheck } from '../../../platform/kube/node-agents.ts';
import {
  machineKindOfTemplate,
  type NodeUpgraderCheck,
  type UpgraderAnswer,
} from '../../../platform/kube/node-upgraders.ts';
import { CLUSTER_NAME_LABEL } from '../../../platform/kube/capi-api.ts';
import type { InPlaceHandlers } from './routes.ts';

const NOT_IN_PLACE = 'not in place (rolled out instead)';

function declinedMessage(declined: readonly Declined[]): { message?: string } {
  if (declined.length === 0) return {};
  return {
    message: `${NOT_IN_PLACE}: ${declined.map((d) => `${d.object} ${d.path}: ${d.reason}`).join('; ')}`,
  };
}

/** The in-place allow-list from the settings, cut to what the configured executor applies (management: later, by its upgrader). */
function inPlacePolicyFor(settings: Readonly<Record<string, string>>) {
  const policy = resolveInPlacePolicy(settings);
  if (!policy.ok) throw new HookFailure(policy.message);
  const updates = resolveMachineUpdatePolicy(settings);
  if (!updates.ok) throw new HookFailure(updates.message);
  const executor = updates.policy.executor;
  return { policy: executor === 'management' ? policy.policy : allowedForExecutor(policy.policy, executor), executor };
}

/** What one CanUpdate* call computes, for any allow-list. */
type Compute<P extends Record<string, JsonPatch | undefined>> = (policy: InPlacePolicy) => {
  patches: P;
  declined: readonly Declined[];
};

/** Ops of `full` that `cut` leaves out, as declined differences (`machinePatch` → object `machine`). */
function undeclared(full: object, cut: object, reason: string): Declined[] {
  const declined: Declined[] = [];
  const paths = (patch: unknown) => (patch ? decodeJsonPatch(patch as JsonPatch).map((op) => op.path) : []);
  for (const [field, patch] of Object.entries(full)) {
    const kept = new Set(paths((cut as Record<string, unknown>)[field]));
    for (const path of paths(patch))
      if (!kept.has(path)) declined.push({ object: field.replace(/Patch$/, ''), path, reason });
  }
  return declined;
}

/**
 * CanUpdateMachine / CanUpdateMachineSet: pure patches for what the executor applies in place.
 * Under `delegate` nothing is claimed unless a node agent is alive to apply it (`nodeAgents`;
 * without one the api cannot tell, and says so): a request nobody serves would stall the rollout.
 * Under `management` the same holds for the infrastructure kind's node upgrader (`nodeUpgraders`),
 * and only what it declares it applies is claimed.
 */
export function createCanUpdateHandlers(
  nodeAgents: NodeAgentCheck | undefined,
  nodeUpgraders?: NodeUpgraderCheck,
): Pick<InPlaceHandlers, 'CanUpdateMachine' | 'CanUpdateMachineSet'> {
  const agentMissing = async (
    cluster: { namespace: string; name: string | undefined },
    nodeName: string | undefined,
  ): Promise<string | undefined> => {
    if (!nodeAgents)
      return 'nodeUpgradeExecutor=delegate, and this api has no management cluster access to check for node agents (MANAGEMENT_KUBECONFIG)';
    if (!cluster.name) return 'nodeUpgradeExecutor=delegate, and the request names no cluster to check for node agents';
    return await nodeAgents.missing({ namespace: cluster.namespace, name: cluster.name }, nodeName);
  };
  const upgraderOf = async (kind: string | undefined): Promise<UpgraderAnswer & { kind?: string }> => {
    if (!nodeUpgraders)
      return {
        ok: false,
        reason:
          'nodeUpgradeExecutor=management, and this api has no management cluster access to check for node upgraders (MANAGEMENT_KUBECONFIG)',
      };
    if (!kind)
      return { ok: false, reason: 'nodeUpgradeExecutor=management, and the request names no infrastructure kind' };
    return { ...(await nodeUpgraders.declared(kind)), kind };
  };
  /** The patches, unless the executor has nobody to apply them (then a message saying why). */
  const answer = async <P extends Record<string, JsonPatch | undefined>>(
    settings: Readonly<Record<string, string>>,
    compute: Compute<P>,
    cluster: { namespace: string; name: string | undefined },
    nodeName: string | undefined,
    infrastructureKind: string | undefined,
  ) => {
    const { policy, executor } = inPlacePolicyFor(settings);
    const computed = compute(policy);
    const claims = Object.keys(computed.patches).length > 0;
    if (claims && executor === 'delegate') {
      const missing = await agentMissing(cluster, nodeName);
      if (missing) return { status: 'Success' as const, message: `${NOT_IN_PLACE}: ${missing}` };
    }
    if (claims && executor === 'management') {
      const upgrader = await upgraderOf(infrastructureKind);
      if (!upgrader.ok) return { status: 'Success' as const, message: `${NOT_IN_PLACE}: ${upgrader.reason}` };
      const cut = compute(allowedForExecutor(policy, 'management', upgrader.paths));
      const reason = `not among the paths the node upgrader for ${upgrader.kind} applies (Lease ${upgrader.lease})`;
      const declined = [...cut.declined, ...undeclared(computed.patches, cut.patches, reason)];
      return { status: 'Success' as const, ...cut.patches, ...declinedMessage(declined) };
    }
    return { status: 'Success' as const, ...computed.patches, ...declinedMessage(computed.declined) };
  };
  return {
    CanUpdateMachine: async (request, ctx) => {
      const { metadata, spec, status } = request.current.machine;
      return await answer(
        ctx.settings,
        (policy) => computeMachinePatches(request.current, request.desired, policy),
        { namespace: metadata.namespace, name: spec.clusterName ?? metadata.labels?.[CLUSTER_NAME_LABEL] },
        status?.nodeRef?.name,
        request.current.infrastructureMachine.kind,
      );
    },
    CanUpdateMachineSet: async (request, ctx) => {
      const { metadata, spec } = request.current.machineSet;
      const template = request.current.infrastructureMachineTemplate.kind;
      return await answer(
        ctx.settings,
        (policy) => computeMachineSetPatches(request.current, request.desired, policy),
        {
          namespace: metadata.namespace,
          name: spec.clusterName ?? spec.template.spec.clusterName ?? metadata.labels?.[CLUSTER_NAME_LABEL],
        },
        undefined,
        template === undefined ? undefined : machineKindOfTemplate(template),
      );
    },
  };
}
