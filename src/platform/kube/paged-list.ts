// Lists read a page at a time (`limit` + `continue`), with a cap on the objects
// of the whole list: a workload cluster with 100,000 Leases, or an API server
// that ignores `limit`, fails that list with a message naming the cap, never
// fills the heap. A caller that needs a few fields keeps only those per page.
import { readLimitsOf } from './workload-kube-config.ts';
import { WORKLOAD_LIMIT_SETTING as SETTING, WorkloadReadError } from './workload-limits.ts';

export interface PageRequest {
  limit: number;
  _continue?: string;
}

export interface ListPage<T> {
  items: T[];
  metadata?: { _continue?: string };
}

export interface PagedListOptions<T, U> {
  /** Objects per page; default the process's WORKLOAD_LIST_PAGE_SIZE. */
  pageSize?: number;
  /** Objects the list may hold; default WORKLOAD_LIST_MAX_OBJECTS. */
  maxObjects?: number;
  /** What to keep of each object (undefined: drop it); default the object itself. */
  keep?: (item: T) => U | undefined;
  /** Stop reading pages once this holds for what was kept so far. */
  enough?: (kept: readonly U[]) => boolean;
}

/**
 * Every object of a list, read page by page through `fetchPage` (which passes `limit` and
 * `_continue` to the API call). `kc` is the KubeConfig the call uses (for the limits and the
 * cluster to name); `what` names the list in messages ("pods in namespace kube-system").
 */
export async function listPaged<T, U = T>(
  kc: unknown,
  what: string,
  fetchPage: (page: PageRequest) => Promise<ListPage<T>>,
  options: PagedListOptions<T, U> = {},
): Promise<U[]> {
  const { cluster, limits } = readLimitsOf(kc);
  const pageSize = options.pageSize ?? limits.pageSize;
  const maxObjects = options.maxObjects ?? limits.maxListObjects;
  const keep = options.keep ?? ((item: T) => item as unknown as U);
  const where = `${cluster ? `workload cluster ${cluster}: ` : ''}list of ${what}`;
  const kept: U[] = [];
  const seen = new Set<string>();
  let total = 0;
  // Pages that hold nothing still end: a server may not send continue tokens for ever.
  const maxPages = Math.ceil(maxObjects / pageSize) + 2;
  let token: string | undefined;
  do {
    if (seen.size >= maxPages)
      throw new WorkloadReadError(
        'too-many-objects',
        `${where}: more than ${maxPages} pages (${SETTING.maxListObjects})`,
      );
    const page = await fetchPage({ limit: pageSize, ...(token ? { _continue: token } : {}) });
    if (!Array.isArray(page?.items))
      throw new WorkloadReadError('malformed', `${where}: answered a page without an items list`);
    if (page.items.length > pageSize)
      throw new WorkloadReadError(
        'too-many-objects',
        `${where}: answered ${page.items.length} objects to a page of ${pageSize}`,
      );
    total += page.items.length;
    if (total > maxObjects)
      throw new WorkloadReadError(
        'too-many-objects',
        `${where}: more than ${maxObjects} objects (${SETTING.maxListObjects})`,
      );
    for (const item of page.items) {
      const k = keep(item);
      if (k !== undefined) kept.push(k);
    }
    if (options.enough?.(kept)) return kept;
    token = page.metadata?._continue || undefined;
    if (token !== undefined) {
      if (seen.has(token)) throw new WorkloadReadError('malformed', `${where}: answered the same continue token twice`);
      seen.add(token);
    }
  } while (token !== undefined);
  return kept;
}
