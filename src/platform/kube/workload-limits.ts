// What one read of a workload cluster's API server may cost this process. A
// workload cluster is the tenant's: whoever holds admin there (or writes the
// `<cluster>-kubeconfig` Secret) decides what its API server answers, so every
// answer is bounded in bytes, JSON items, time and concurrency before anything
// parses it (docs/limits.md, "Workload API servers").

export interface WorkloadReadLimits {
  /** Bytes one answer may hold (WORKLOAD_READ_MAX_BYTES); counted as it streams, the read stops past it. */
  maxResponseBytes: number;
  /** JSON items (objects, arrays, members, elements) one answer may hold (WORKLOAD_READ_MAX_JSON_ITEMS). */
  maxJsonItems: number;
  /** Deepest nesting of objects and arrays one answer may hold. */
  maxJsonDepth: number;
  /** Objects asked for per page of a list (WORKLOAD_LIST_PAGE_SIZE). */
  pageSize: number;
  /** Objects one list may hold over all its pages (WORKLOAD_LIST_MAX_OBJECTS). */
  maxListObjects: number;
  /** A request's deadline, waiting for a slot included (WORKLOAD_READ_TIMEOUT_SECONDS). */
  timeoutMs: number;
  /** Requests in flight per workload cluster (WORKLOAD_READS_PER_CLUSTER). */
  perCluster: number;
  /** Requests in flight to all workload clusters (WORKLOAD_READS_MAX). */
  overall: number;
  /** Bytes of answers held at once, all clusters (WORKLOAD_READ_BUDGET_BYTES); one cluster may hold half. */
  budgetBytes: number;
}

const MiB = 1024 * 1024;

/**
 * Sized for the worker's 256 MiB old space (docs/limits.md): a page of 250 pods is ~1–2 MiB and
 * ~75,000 items, of 250 nodes ~4–7 MiB; a cluster of 5,000 nodes (Kubernetes' own limit) lists in
 * 20 pages. 32 MiB of answers in flight parse to at most ~100 MiB of heap.
 */
export const DEFAULT_WORKLOAD_READ_LIMITS: WorkloadReadLimits = {
  maxResponseBytes: 8 * MiB,
  maxJsonItems: 256 * 1024,
  maxJsonDepth: 100,
  pageSize: 250,
  maxListObjects: 10_000,
  timeoutMs: 30_000,
  perCluster: 4,
  overall: 32,
  budgetBytes: 32 * MiB,
};

/** The setting (environment variable) that raises each limit, for messages. */
export const WORKLOAD_LIMIT_SETTING = {
  maxResponseBytes: 'WORKLOAD_READ_MAX_BYTES',
  maxJsonItems: 'WORKLOAD_READ_MAX_JSON_ITEMS',
  maxJsonDepth: 'WORKLOAD_READ_MAX_JSON_DEPTH',
  pageSize: 'WORKLOAD_LIST_PAGE_SIZE',
  maxListObjects: 'WORKLOAD_LIST_MAX_OBJECTS',
  timeoutMs: 'WORKLOAD_READ_TIMEOUT_SECONDS',
  perCluster: 'WORKLOAD_READS_PER_CLUSTER',
  overall: 'WORKLOAD_READS_MAX',
  budgetBytes: 'WORKLOAD_READ_BUDGET_BYTES',
} as const satisfies Record<keyof WorkloadReadLimits, string>;

/** Why a read of a workload cluster was refused. */
export type WorkloadReadReason =
  | 'timeout'
  | 'too-large'
  | 'too-many-items'
  | 'too-many-objects'
  | 'redirect'
  | 'encoding'
  | 'content-type'
  | 'malformed'
  | 'busy';

/** Worth trying again later: the server may answer in time, or the budget free up. */
const RETRYABLE: ReadonlySet<WorkloadReadReason> = new Set(['timeout', 'busy']);

/**
 * A workload cluster's answer this process would not take. Its message names the cluster, the
 * request (method and path, never the query or the body) and the limit with its setting: it is
 * stable for a cause, so CAPI may show it in a condition.
 */
export class WorkloadReadError extends Error {
  override readonly name = 'WorkloadReadRefused';
  readonly reason: WorkloadReadReason;
  readonly retryable: boolean;
  constructor(reason: WorkloadReadReason, message: string) {
    super(message);
    this.reason = reason;
    this.retryable = RETRYABLE.has(reason);
  }
}
