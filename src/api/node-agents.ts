// Whether a node agent serves a workload cluster's nodes, for CanUpdate* under
// the `delegate` executor: without one, a NodeUpgradeRequest would wait for
// nobody, so CAPI must roll out instead. An agent proves it is alive with a
// Lease per node (docs/node-upgrade-request.md): `node-upgrade-agent-<node>` in
// the requests' namespace, renewed within its leaseDurationSeconds.
//
// Answers are cached per cluster for a few seconds: CanUpdate* is called for
// every Machine of a rollout.
import { CoordinationV1Api, type KubeConfig, type V1Lease } from '@kubernetes/client-node';
import { stableFailure } from '../activities/failures.ts';
import { apiClient, workloadKubeConfig } from '../activities/kube.ts';

export const NODE_AGENT_LEASE_PREFIX = 'node-upgrade-agent-';
/** Leases without leaseDurationSeconds count as fresh this long after their last renewal. */
const DEFAULT_LEASE_DURATION_S = 40;
/** How long an answer about node agents or upgraders is reused. */
export const LEASE_CACHE_MS = 10_000;

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

export function createNodeAgentCheck(opts: {
  management: KubeConfig;
  namespace: string;
  /** How long a cluster's answer is reused; default 10 s. */
  cacheMs?: number;
}): NodeAgentCheck {
  const cacheMs = opts.cacheMs ?? LEASE_CACHE_MS;
  const cache = new Map<string, { atMs: number; fresh: Promise<Set<string>> }>();
  /** The nodes with a fresh agent Lease in the cluster (one list call per cluster per LEASE_CACHE_MS). */
  const agentNodes = (cluster: { namespace: string; name: string }): Promise<Set<string>> => {
    const key = `${cluster.namespace}/${cluster.name}`;
    const hit = cache.get(key);
    if (hit && Date.now() - hit.atMs < cacheMs) return hit.fresh;
    const read = (async () => {
      const kc = await workloadKubeConfig(opts.management, cluster);
      const leases = await apiClient(kc, CoordinationV1Api).listNamespacedLease({ namespace: opts.namespace });
      const now = Date.now();
      return new Set(
        leases.items
          .filter((l) => l.metadata?.name?.startsWith(NODE_AGENT_LEASE_PREFIX) && leaseIsFresh(l, now))
          .map((l) => l.metadata!.name!.slice(NODE_AGENT_LEASE_PREFIX.length)),
      );
    })();
    cache.set(key, { atMs: Date.now(), fresh: read });
    read.catch(() => cache.delete(key));
    return read;
  };

  return {
    async missing(cluster, nodeName) {
      let nodes: Set<string>;
      try {
        nodes = await agentNodes(cluster);
      } catch (err) {
        // Stable: CAPI copies the message into a condition (no headers, dates or bodies).
        const why = stableFailure(err).message;
        return `cannot check for a node agent in cluster ${cluster.namespace}/${cluster.name} (${why})`;
      }
      if (nodeName === undefined) {
        return nodes.size > 0
          ? undefined
          : `no node agent runs in cluster ${cluster.namespace}/${cluster.name} (no fresh Lease ${opts.namespace}/${NODE_AGENT_LEASE_PREFIX}<node>)`;
      }
      return nodes.has(nodeName)
        ? undefined
        : `no node agent serves node ${nodeName} (no fresh Lease ${opts.namespace}/${nodeAgentLeaseName(nodeName)})`;
    },
  };
}
