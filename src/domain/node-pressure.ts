// The node conditions under which a kubelet admits no new pod but critical ones (its eviction
// manager rejects the rest under disk or PID pressure; memory pressure rejects only best-effort
// pods that do not tolerate it). The `job` executor's upgrade pod would be rejected, and an
// upgrade that downloads binaries and backs up etcd should not start on a full disk anyway.
import type { V1Node } from '@kubernetes/client-node';

const REJECTING_CONDITIONS = ['DiskPressure', 'PIDPressure'] as const;

/** The pressure conditions the node reports True that make its kubelet reject new pods, in a fixed order. */
export function rejectingPressure(node: V1Node): string[] {
  const conditions = node.status?.conditions ?? [];
  return REJECTING_CONDITIONS.filter((type) => conditions.some((c) => c.type === type && c.status === 'True'));
}
