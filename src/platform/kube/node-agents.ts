// Whether a node agent serves a workload cluster's nodes, for CanUpdate* under
// the `delegate` executor: without one, a NodeUpgradeRequest would wait for
// nobody, so CAPI must roll out instead. An agent proves it is alive with a
// Lease per node (docs/node-upgrade-request.md): `node-upgrade-agent-<node>` in
// the requests' namespace, renewed within its leaseDurationSeconds.
//
// Answers are cached per cluster and node for a few seconds: CanUpdate* is
// called for every Machine of a rollout. A known node is one GET of its Lease;
// only CanUpdateMachineSet, which names no node, pages through the Leases.
import { CoordinationV1Api, type KubeConfig, type V1Lease } from '@kubernetes/client-node';
import { stableError } from './stable-error.ts';
import { apiClient } from './clients.ts';
import { isNotFound } from './errors.ts';
import { workloadKubeConfig } from './workload-clusters.ts';
import { listPaged } from './paged-list.ts';
import { withReadScope } from './read-scope.ts';

export const NODE_AGENT_LEASE_PREFIX = 'node-upgrade-agent-';
/** Leases without leaseDurationSeconds count as fresh this long after their last renewal. */
const DEFAULT_LEASE_DURATION_S = 40;
/** How long an answer about node agents or upgraders is reused. */
export const LEASE_CACHE_MS = 10_000;
/** Answers kept before expired ones are swept. */
const MAX_CACHED_ANSWERS = 10_000;

export interface NodeAgentCheck {
  /**
   * Undefined when an agent serves `nodeName` (or, without a node, any node of the cluster);
   * else why not, for CAPI's message.
   */
  missing(cluster: { namespace: string; name: string }, nodeName: string | undefined): Promise<string | undefined>;
}

export function nodeAgentLeaseName(nodeName: string): string {
  return `${NODE_AGENT_LEASE_PREFIX}${nodeName}`;
}

/** Renewed within its leaseDurationSeconds (40 when unset). */
export function leaseIsFresh(lease: V1Lease, nowMs: number): boolean {
  const renewed = lease.spec?.renewTime ?? lease.spec?.acquireTime;
  if (!renewed) return false;
  const durationMs = (lease.spec?.leaseDurationSeconds ?? DEFAULT_LEASE_DURATION_S) * 1000;
  return new Date(renewed).getTime() + durationMs >= nowMs;
}

/** How long the api waits for a workload cluster's Leases: well inside CanUpdate*'s 10 s budget. */
export const NODE_AGENT_READ_TIMEOUT_MS = 4_000;

export function createNodeAgentCheck(opts: {
  management: KubeConfig;
  namespace: string;
  /** How long a cluster's answer is reused; default 10 s. */
  cacheMs?: number;
  /** How long one read of a workload cluster may take; default 4 s. */
  readTimeoutMs?: number;
}): NodeAgentCheck {
  const cacheMs = opts.cacheMs ?? LEASE_CACHE_MS;
  const readTimeoutMs = opts.readTimeoutMs ?? NODE_AGENT_READ_TIMEOUT_MS;
  const cache = new Map<string, { atMs: number; fresh: Promise<boolean> }>();

  /** The node's own Lease: one GET, however many Leases the namespace holds. */
  const nodeServed = async (leases: CoordinationV1Api, nodeName: string): Promise<boolean> => {
    try {
      const lease = await leases.readNamespacedLease({ name: nodeAgentLeaseName(nodeName), namespace: opts.namespace });
      return leaseIsFresh(lease, Date.now());
    } catch (err) {
      if (isNotFound(err)) return false;
      throw err;
    }
  };

  /** Any fresh agent Lease: pages of the namespace's Leases, until the first fresh one. */
  const anyServed = async (kc: KubeConfig, leases: CoordinationV1Api): Promise<boolean> => {
    const now = Date.now();
    const found = await listPaged(
      kc,
      `Leases in namespace ${opts.namespace}`,
      (page) => leases.listNamespacedLease({ namespace: opts.namespace, ...page }),
      {
        keep: (l: V1Lease) =>
          l.metadata?.name?.startsWith(NODE_AGENT_LEASE_PREFIX) && leaseIsFresh(l, now) ? true : undefined,
        enough: (kept) => kept.length > 0,
      },
    );
    return found.length > 0;
  };

  /** Whether an agent serves the node (or any node); one read per cluster and node per cacheMs, shared while it runs. */
  const served = (cluster: { namespace: string; name: string }, nodeName: string | undefined): Promise<boolean> => {
    const key = `${cluster.namespace}/${cluster.name}/${nodeName ?? ''}`;
    const hit = cache.get(key);
    if (hit && Date.now() - hit.atMs < cacheMs) return hit.fresh;
    const read = withReadScope({ timeoutMs: readTimeoutMs }, async () => {
      const kc = await workloadKubeConfig(opts.management, cluster);
      const leases = apiClient(kc, CoordinationV1Api);
      return nodeName === undefined ? await anyServed(kc, leases) : await nodeServed(leases, nodeName);
    });
    cache.set(key, { atMs: Date.now(), fresh: read });
    read.catch(() => cache.get(key)?.fresh === read && cache.delete(key));
    // Answers older than the cache are never read again: drop them, so hostile names cannot grow the map.
    if (cache.size > MAX_CACHED_ANSWERS)
      for (const [k, v] of cache) if (Date.now() - v.atMs >= cacheMs) cache.delete(k);
    return read;
  };

  return {
    async missing(cluster, nodeName) {
      let ok: boolean;
      try {
        ok = await served(cluster, nodeName);
      } catch (err) {
        // Stable: CAPI copies the message into a condition (no headers, dates or bodies).
        const why = stableError(err).message;
        return `cannot check for a node agent in cluster ${cluster.namespace}/${cluster.name} (${why})`;
      }
      if (ok) return undefined;
      return nodeName === undefined
        ? `no node agent runs in cluster ${cluster.namespace}/${cluster.name} (no fresh Lease ${opts.namespace}/${NODE_AGENT_LEASE_PREFIX}<node>)`
        : `no node agent serves node ${nodeName} (no fresh Lease ${opts.namespace}/${nodeAgentLeaseName(nodeName)})`;
    },
  };
}
