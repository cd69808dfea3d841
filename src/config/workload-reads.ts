// WORKLOAD_READ_* and WORKLOAD_LIST_*: how much one read of a workload
// cluster's API server may cost (src/platform/kube/workload-limits.ts).
import {
  DEFAULT_WORKLOAD_READ_LIMITS as D,
  WORKLOAD_LIMIT_SETTING as S,
  type WorkloadReadLimits,
} from '../platform/kube/workload-limits.ts';
import type { EnvReader } from './env.ts';

const MiB = 1024 * 1024;

export function readWorkloadReadLimits(read: EnvReader): WorkloadReadLimits {
  const limits: WorkloadReadLimits = {
    maxResponseBytes: read.int(S.maxResponseBytes, D.maxResponseBytes, 64 * 1024, 1024 * MiB),
    maxJsonItems: read.int(S.maxJsonItems, D.maxJsonItems, 1024, 64 * MiB),
    maxJsonDepth: read.int(S.maxJsonDepth, D.maxJsonDepth, 16, 1000),
    pageSize: read.int(S.pageSize, D.pageSize, 10, 5_000),
    maxListObjects: read.int(S.maxListObjects, D.maxListObjects, 100, 10_000_000),
    timeoutMs: read.int(S.timeoutMs, D.timeoutMs / 1000, 1, 600) * 1000,
    perCluster: read.int(S.perCluster, D.perCluster, 1, 64),
    overall: read.int(S.overall, D.overall, 1, 4096),
    budgetBytes: read.int(S.budgetBytes, D.budgetBytes, MiB, 16 * 1024 * MiB),
  };
  if (limits.budgetBytes < 2 * limits.maxResponseBytes)
    read.problems.push(
      `${S.budgetBytes}=${limits.budgetBytes}: at least twice ${S.maxResponseBytes} (${limits.maxResponseBytes}), since one cluster may hold half of it`,
    );
  if (limits.overall < limits.perCluster)
    read.problems.push(`${S.overall}=${limits.overall}: at least ${S.perCluster} (${limits.perCluster})`);
  return limits;
}
