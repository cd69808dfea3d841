// The gates that look at the workload cluster before the control plane
// moves, and per-cluster overrides: the removed-API gate reads the
// workload kube-apiserver's apiserver_requested_deprecated_apis and holds
// (policy fail), warns or is off; an override (annotation override-gates with a
// reason) lets a gate through and records it. Newer than running upgrades
// (AUTO_UPGRADE): the gate's activity is behind patched(REMOVED_API_PATCH), an
// override's Event behind patched(GATE_OVERRIDE_PATCH), so histories recorded
// before them replay the old way.
import { patched, proxyActivities } from '@temporalio/workflow';
import { removedApiFindings, removedApisMessage, type DeprecatedApiScan } from '../../domain/deprecated-apis.ts';
import { overriddenText, overrideFor, type GateId } from '../../domain/gate-overrides.ts';
import {
  DEFAULT_REMOVED_API_POLICY,
  type HookCall,
  type RemovedApiVerdict,
  type UpgradeCondition,
} from '../../model/cluster-upgrade.ts';
import type { UpgradeActivities } from '../../activities/upgrade-types.ts';
import { expectedFailure, failureCause } from '../failures.ts';
import type { UpgradeState } from './state.ts';

export const REMOVED_API_PATCH = 'removed-api-gate';
export const GATE_OVERRIDE_PATCH = 'gate-overrides';

// One read of /metrics: a few quick tries (an unreachable API server also fails the health check).
const metrics = proxyActivities<UpgradeActivities>({
  startToCloseTimeout: '1 minute',
  heartbeatTimeout: '15 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '10 seconds', maximumAttempts: 3 },
});

/** The override reason for `gate` when the policy has one and this build records it; records it. */
export function overridden(
  s: UpgradeState,
  gate: GateId,
  call: Pick<HookCall, 'hook' | 'version'>,
): string | undefined {
  const override = s.status.policy.gateOverride;
  const reason = overrideFor(override, gate);
  if (reason === undefined || !patched(GATE_OVERRIDE_PATCH)) return undefined;
  const grantedBy = override?.grantedBy;
  s.recordOverride(gate, reason, `${call.hook} ${call.version}`, overriddenText(gate, reason, grantedBy), grantedBy);
  return reason;
}

/** Every version the upgrade passes through: each control-plane and workers hop, and the target. */
export function upgradeChain(call: HookCall): string[] {
  return [...new Set([...(call.controlPlaneUpgrades ?? []), ...(call.workersUpgrades ?? []), call.targetVersion])];
}

/**
 * The removed-API gate of BeforeClusterUpgrade. True when the upgrade may go on; false when it
 * failed (policy fail: the hooks answer Failure naming the APIs, or naming why /metrics could not
 * be read) or was interrupted.
 */
export async function removedApiGate(
  s: UpgradeState,
  call: HookCall,
  conditions: UpgradeCondition[],
): Promise<boolean> {
  const policy = s.status.policy.removedApiPolicy ?? DEFAULT_REMOVED_API_POLICY;
  if (policy === 'off' || !patched(REMOVED_API_PATCH)) return true;
  const set = (v: RemovedApiVerdict, status: 'True' | 'False', reason: string) => {
    s.status.removedApis = v;
    s.setCondition(conditions, 'RemovedApis', status, reason, v.message);
    s.publish();
  };
  // No gate message of its own: one read of /metrics, under a second; the gate still says it runs the pre-checks.
  let scan: DeprecatedApiScan;
  try {
    scan = await metrics.checkDeprecatedApis({ cluster: s.status.cluster });
  } catch (err) {
    if (!expectedFailure(err)) throw err;
    if (s.interrupted()) return false;
    const message = `removed-apis: could not read the workload API server's /metrics: ${failureCause(err)}`;
    return verdict(s, call, policy, message, 'unreadable', set);
  }
  const findings = removedApiFindings(scan.uses, upgradeChain(call));
  const notes = [
    scan.malformed > 0 ? `${scan.malformed} malformed samples ignored` : '',
    scan.dropped > 0 ? `${scan.dropped} more samples not read` : '',
  ].filter(Boolean);
  if (findings.length === 0) {
    const message = `removed-apis: no requested API is removed by ${upgradeChain(call).join(', ')}${notes.length ? ` (${notes.join('; ')})` : ''}`;
    set({ policy, result: 'passed', message }, 'True', 'Passed');
    return true;
  }
  return verdict(s, call, policy, removedApisMessage(s.status.targetVersion, findings), 'held', set);
}

function verdict(
  s: UpgradeState,
  call: HookCall,
  policy: 'fail' | 'warn',
  message: string,
  result: 'held' | 'unreadable',
  set: (v: RemovedApiVerdict, status: 'True' | 'False', reason: string) => void,
): boolean {
  const reason = overridden(s, 'removed-apis', call);
  if (reason !== undefined) {
    set(
      {
        policy,
        result: 'overridden',
        message: `${message}; ${overriddenText('removed-apis', reason, s.status.policy.gateOverride?.grantedBy)}`,
      },
      'True',
      'Overridden',
    );
    return true;
  }
  if (policy === 'warn') {
    set({ policy, result: result === 'held' ? 'warned' : 'unreadable', message }, 'True', 'Warned');
    s.gateWarning(`${call.hook} ${call.version}: ${message}`);
    return true;
  }
  set({ policy, result, message }, 'False', result === 'held' ? 'RemovedApisRequested' : 'MetricsUnreadable');
  s.fail(call, message);
  return false;
}
