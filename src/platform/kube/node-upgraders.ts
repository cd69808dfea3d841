// Whether a management-cluster node upgrader serves an infrastructure machine
// kind, and what it can apply, for CanUpdate* under the `management` executor
// (docs/node-upgrade-request.md): without one, a NodeUpgradeRequest would wait
// for nobody, so CAPI must roll out instead. The upgrader proves it is alive
// with a Lease per kind, `node-upgrader-<kind, lowercased>` in the upgrader
// namespace (tenants cannot write there), and declares what it applies in the
// Lease's in-place-paths annotation.
//
// Answers are cached per kind for a few seconds, as for node agents: CanUpdate*
// is called for every Machine of a rollout.
import { CoordinationV1Api, type KubeConfig, type V1Lease } from '@kubernetes/client-node';
import { stableError } from './stable-error.ts';
import { apiClient } from './clients.ts';
import { isNotFound } from './errors.ts';
import { InPlaceSettingsError, parseDeclaredPaths, type AllowedPath } from '../../domain/in-place-policy.ts';
import { LEASE_CACHE_MS, leaseIsFresh } from './node-agents.ts';

export const NODE_UPGRADER_LEASE_PREFIX = 'node-upgrader-';
/** The Lease annotation listing what the upgrader applies (`inPlaceAllowedPaths` syntax; absent = `defaults`). */
export const IN_PLACE_PATHS_ANNOTATION = 'upgrades.capi-orchestrator.io/in-place-paths';

/** A Kubernetes kind that fits a Lease name once lowercased (hook input is hostile until checked). */
const KIND = /^[A-Za-z][A-Za-z0-9]{0,48}$/;
/** Distinct kinds remembered at most (hostile input could name endless kinds). */
const MAX_CACHED_KINDS = 1_000;

export type UpgraderAnswer =
  | { readonly ok: true; readonly paths: readonly AllowedPath[]; readonly lease: string }
  | { readonly ok: false; readonly reason: string };

export interface NodeUpgraderCheck {
  /** The paths the upgrader of `kind` declares while its Lease is fresh; else why none may be claimed. */
  declared(kind: string): Promise<UpgraderAnswer>;
}

export function nodeUpgraderLeaseName(kind: string): string {
  return `${NODE_UPGRADER_LEASE_PREFIX}${kind.toLowerCase()}`;
}

/** `DevMachineTemplate` → `DevMachine`: CanUpdateMachineSet names the template, the upgrader serves the machines. */
export function machineKindOfTemplate(kind: string): string {
  return kind.endsWith('Template') ? kind.slice(0, -'Template'.length) : kind;
}

export function createNodeUpgraderCheck(opts: {
  management: KubeConfig;
  namespace: string;
  /** How long a kind's answer is reused; default 10 s. */
  cacheMs?: number;
}): NodeUpgraderCheck {
  const cacheMs = opts.cacheMs ?? LEASE_CACHE_MS;
  const leases = apiClient(opts.management, CoordinationV1Api);
  const cache = new Map<string, { atMs: number; answer: Promise<UpgraderAnswer> }>();

  const read = async (kind: string): Promise<UpgraderAnswer> => {
    const name = nodeUpgraderLeaseName(kind);
    const where = `${opts.namespace}/${name}`;
    let lease: V1Lease | undefined;
    try {
      lease = await leases.readNamespacedLease({ name, namespace: opts.namespace });
    } catch (err) {
      if (!isNotFound(err)) {
        // Stable: CAPI copies the message into a condition (no headers, dates or bodies).
        return { ok: false, reason: `cannot check for a node upgrader for ${kind} (${stableError(err).message})` };
      }
    }
    if (!lease || !leaseIsFresh(lease, Date.now()))
      return { ok: false, reason: `no node upgrader for ${kind} (no fresh Lease ${where})` };
    try {
      const paths = parseDeclaredPaths(
        lease.metadata?.annotations?.[IN_PLACE_PATHS_ANNOTATION],
        `${IN_PLACE_PATHS_ANNOTATION} of Lease ${where}`,
      );
      return { ok: true, paths, lease: where };
    } catch (err) {
      if (err instanceof InPlaceSettingsError)
        return { ok: false, reason: `the node upgrader for ${kind} declares no valid paths (${err.message})` };
      throw err;
    }
  };

  return {
    declared(kind) {
      if (!KIND.test(kind))
        return Promise.resolve({
          ok: false,
          reason: `infrastructure machine kind ${JSON.stringify(kind.slice(0, 64))} is not a Kubernetes kind`,
        });
      const hit = cache.get(kind);
      if (hit && Date.now() - hit.atMs < cacheMs) return hit.answer;
      const answer = read(kind);
      if (cache.size >= MAX_CACHED_KINDS) cache.clear();
      cache.set(kind, { atMs: Date.now(), answer });
      answer.catch(() => cache.delete(kind));
      return answer;
    },
  };
}
