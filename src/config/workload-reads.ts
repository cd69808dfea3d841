// WORKLOAD_READ_* and WORKLOAD_LIST_*: how much one read of a workload
// cluster's API server may cost (src/platform/kube/workload-limits.ts).
import { WORKLOAD_LIMIT_SETTING as S, type WorkloadReadLimits } from '../platform/kube/workload-limits.ts';
import type { EnvReader } from './env.ts';

export function readWorkloadReadLimits(read: EnvReader): WorkloadReadLimits {
  const limits: WorkloadReadLimits = {
    maxResponseBytes: read.get(S.maxResponseBytes),
    maxJsonItems: read.get(S.maxJsonItems),
    maxJsonDepth: read.get(S.maxJsonDepth),
    pageSize: read.get(S.pageSize),
    maxListObjects: read.get(S.maxListObjects),
    timeoutMs: read.get(S.timeoutMs) * 1000,
    perCluster: read.get(S.perCluster),
    overall: read.get(S.overall),
    budgetBytes: read.get(S.budgetBytes),
  };
  if (limits.budgetBytes < 2 * limits.maxResponseBytes)
    read.problems.push(
      `${S.budgetBytes}=${limits.budgetBytes}: at least twice ${S.maxResponseBytes} (${limits.maxResponseBytes}), since one cluster may hold half of it`,
    );
  if (limits.overall < limits.perCluster)
    read.problems.push(`${S.overall}=${limits.overall}: at least ${S.perCluster} (${limits.perCluster})`);
  return limits;
}
