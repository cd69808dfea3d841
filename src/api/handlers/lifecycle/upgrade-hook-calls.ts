// What an upgrade hook's request says and how a gate is answered: the request read into the call
// the workflow records (versions checked, the policy resolved), and a gate (or a refusal) into the
// answer CAPI is given. No Temporal calls: cluster-upgrades.ts makes those.
import { PolicyError } from '../../../domain/policy-keys.ts';
import { policyHash, resolveUpgradePolicy } from '../../../domain/upgrade-policy.ts';
import { firstGate, waitingRetryAfterSeconds, waitRetryAfterMaxSeconds } from '../../../domain/upgrade-schedule.ts';
import { tryParseVersion } from '../../../domain/versions.ts';
import {
  queuedGate,
  type ClusterRef,
  type ClusterUpgradeMemo,
  type Gate,
  type HookCall,
  type UpgradeHook,
  type UpgradePolicy,
} from '../../../model/cluster-upgrade.ts';
import { FLEET_ROLLOUT_ANNOTATION } from '../../../model/fleet-rollout.ts';
import { clusterRef } from './cluster-lifecycle.ts';
import type { Cluster } from '../../hooks/contract.ts';
import { HookFailure } from '../../hooks/errors.ts';
import type { HookContext } from '../../hooks/hook-route.ts';

/** The cluster an upgrade hook is about, and the fleet rollout that changed its version (if one did). */
export type UpgradeTarget = Required<ClusterRef> & { rollout?: string };

export type RetryResult = { status: 'Success' | 'Failure'; message?: string; retryAfterSeconds: number };

/**
 * A gate's answer. A Waiting gate answers retryAfterSeconds = the time left, at most `capSeconds`,
 * when it waits for a time it knows and `policy` is the one the run holds (the memo's hash is the
 * call's, or the run was just started with it); else the gate's own (10 s). The message is the
 * gate's: deterministic for a state, only the number changes from call to call.
 */
export function answer(gate: Gate, wait?: { call: HookCall; capSeconds: number }): RetryResult {
  if (gate.state === 'Open') return { status: 'Success', message: gate.message, retryAfterSeconds: 0 };
  if (gate.state === 'Failed') return { status: 'Failure', message: gate.message, retryAfterSeconds: 0 };
  const retryAfterSeconds = wait
    ? waitingRetryAfterSeconds(
        wait.call.policy,
        { ...gate, hook: wait.call.hook, version: wait.call.version },
        Date.now(),
        wait.capSeconds,
      )
    : Math.max(1, gate.retryAfterSeconds);
  return { status: 'Success', message: gate.message, retryAfterSeconds };
}

/**
 * The gate as CAPI is told it. BeforeClusterUpgrade is the first step, so it is never queued behind
 * another: until the workflow's first task replaced the gate it recorded, it says what the upgrade
 * will wait for first ("queued behind the steps before it" would be wrong: there are none).
 */
export function shown(gate: Gate, call: HookCall): Gate {
  return call.hook === 'BeforeClusterUpgrade' && gate.state === 'Waiting' && gate.message === queuedGate(call).message
    ? firstGate(call, Date.now())
    : gate;
}

export const gateCount = (memo: ClusterUpgradeMemo): number => Object.keys(memo.gates).length;

export const failure = (message: string): RetryResult => ({ status: 'Failure', message, retryAfterSeconds: 0 });

function requireVersion(field: string, value: string): string {
  if (!tryParseVersion(value).ok)
    throw new HookFailure(`${field} ${JSON.stringify(value)} is not a Kubernetes version`);
  return value;
}

function policyFor(request: { cluster: Cluster }, ctx: HookContext): UpgradePolicy {
  const resolved = resolveUpgradePolicy({
    settings: ctx.settings,
    annotations: request.cluster.metadata.annotations,
    namespace: request.cluster.metadata.namespace,
  });
  if (!resolved.ok) throw new HookFailure(resolved.message);
  return resolved.policy;
}

const targetOf = (cluster: Cluster, fallback: string): string =>
  requireVersion('cluster.spec.topology.version', cluster.spec?.topology?.version ?? fallback);
const steps = (list?: { version: string }[]) => (list ?? []).map((s) => s.version);

/** The fields of the upgrade hooks' requests (schema-validated: Before* carry from/to, After* a version). */
export interface UpgradeHookRequest {
  cluster: Cluster;
  fromKubernetesVersion?: string;
  toKubernetesVersion?: string;
  kubernetesVersion?: string;
  controlPlaneUpgrades?: { version: string }[];
  workersUpgrades?: { version: string }[];
}

/** The call an upgrade hook's request records, and the cluster it is about (400 or Failure when unreadable). */
export function hookCallOf(
  hook: UpgradeHook,
  r: UpgradeHookRequest,
  ctx: HookContext,
): { target: UpgradeTarget; call: HookCall } {
  const ref = clusterRef(r.cluster);
  const before = hook.startsWith('Before');
  const version = before
    ? requireVersion('toKubernetesVersion', r.toKubernetesVersion ?? '')
    : requireVersion('kubernetesVersion', r.kubernetesVersion ?? '');
  if (before) requireVersion('fromKubernetesVersion', r.fromKubernetesVersion ?? '');
  // The cluster-wide hooks name the whole upgrade's target; step hooks take it from the Cluster.
  const target =
    hook === 'BeforeClusterUpgrade' || hook === 'AfterClusterUpgrade' ? version : targetOf(r.cluster, version);
  const policy = policyFor(r, ctx);
  const call: HookCall = {
    hook,
    version,
    targetVersion: target,
    ...(before && r.fromKubernetesVersion ? { fromVersion: r.fromKubernetesVersion } : {}),
    controlPlaneUpgrades: steps(r.controlPlaneUpgrades),
    workersUpgrades: steps(r.workersUpgrades),
    policy,
    policyHash: policyHash(policy),
  };
  const rollout = r.cluster.metadata.annotations?.[FLEET_ROLLOUT_ANNOTATION];
  return { target: { ...ref, ...(rollout ? { rollout } : {}) }, call };
}

/** The cap of a known wait's retryAfterSeconds for this call (Failure naming a bad setting). */
export function waitCapOf(ctx: HookContext, fallback: number): number {
  try {
    return waitRetryAfterMaxSeconds(ctx.settings, fallback);
  } catch (err) {
    if (err instanceof PolicyError) throw new HookFailure(err.message);
    throw err;
  }
}
