// A workload cluster's KubeConfig, read from the `<cluster>-kubeconfig` Secret Cluster API
// writes (key `value`), checked before client-node sees it, and cached per Secret version.
import { CoreV1Api, type KubeConfig, loadYaml } from '@kubernetes/client-node';
import {
  checkWorkloadKubeconfig,
  MAX_WORKLOAD_KUBECONFIG_BYTES,
  refusedKubeconfigMessage,
  type AcceptedKubeconfig,
} from '../../domain/workload-kubeconfig.ts';
import type { ClusterRef } from '../../model/cluster-upgrade.ts';
import { apiClient } from './clients.ts';
import { isNotFound, KubeError } from './errors.ts';
import { WorkloadKubeConfig } from './workload-kube-config.ts';

/** Failure types of the non-retryable errors raised here. */
export const WORKLOAD_KUBECONFIG_MISSING = 'WorkloadKubeconfigMissing';
export const WORKLOAD_KUBECONFIG_INVALID = 'WorkloadKubeconfigInvalid';
/** The kubeconfig holds something other than data (an `exec` plugin, a file path, a proxy...). */
export const WORKLOAD_KUBECONFIG_REFUSED = 'WorkloadKubeconfigRefused';

interface CachedWorkload {
  resourceVersion: string;
  kubeConfig: KubeConfig;
  /** When the Secret was last read. */
  readAtMs: number;
}

/** How long a workload cluster's kubeconfig is used before its Secret is read again (rotation shows within this). */
export const WORKLOAD_KUBECONFIG_MAX_AGE_MS = 30_000;

// Per management KubeConfig, per cluster: one KubeConfig (and so one set of API clients and
// their keep-alive connections) per workload cluster, rebuilt when the Secret's
// resourceVersion changes.
const workloadCache = new WeakMap<KubeConfig, Map<string, CachedWorkload>>();
/** The Secret reads in flight, per management KubeConfig and cluster, as the cache above. */
const readsInFlight = new WeakMap<KubeConfig, Map<string, Promise<KubeConfig>>>();

/** Name of the Secret Cluster API writes for a cluster's admin kubeconfig. */
export function kubeconfigSecretName(cluster: ClusterRef): string {
  return `${cluster.name}-kubeconfig`;
}

/**
 * The workload cluster's KubeConfig, from Secret `<name>-kubeconfig` (key `value`) in the
 * cluster's namespace. A missing Secret or key, or an unusable kubeconfig, is a non-retryable
 * KubeError; API errors (unreachable, 5xx) propagate and are retried.
 */
export async function workloadKubeConfig(
  management: KubeConfig,
  cluster: ClusterRef,
  maxAgeMs = WORKLOAD_KUBECONFIG_MAX_AGE_MS,
): Promise<KubeConfig> {
  const key = `${cluster.namespace}/${cluster.name}`;
  let perCluster = workloadCache.get(management);
  if (!perCluster) {
    perCluster = new Map();
    workloadCache.set(management, perCluster);
  }
  const cached = perCluster.get(key);
  if (cached && Date.now() - cached.readAtMs < maxAgeMs) return cached.kubeConfig;
  // One read of the Secret however many activities ask at once: 20 machine updates
  // starting together used to build 20 KubeConfigs, each with its own connections and
  // watches (the first wave's steps ran ~5× slower in bench/machine-updates.ts).
  let reads = readsInFlight.get(management);
  if (!reads) {
    reads = new Map();
    readsInFlight.set(management, reads);
  }
  const inFlight = reads;
  let pending = inFlight.get(key);
  if (!pending) {
    pending = readWorkloadKubeConfig(management, cluster, perCluster, cached).finally(() => inFlight.delete(key));
    inFlight.set(key, pending);
  }
  return await pending;
}

async function readWorkloadKubeConfig(
  management: KubeConfig,
  cluster: ClusterRef,
  perCluster: Map<string, CachedWorkload>,
  cached: CachedWorkload | undefined,
): Promise<KubeConfig> {
  const secretName = kubeconfigSecretName(cluster);
  const where = `Secret ${cluster.namespace}/${secretName}`;
  const key = `${cluster.namespace}/${cluster.name}`;
  const core = apiClient(management, CoreV1Api);
  let secret;
  try {
    secret = await core.readNamespacedSecret({ name: secretName, namespace: cluster.namespace });
  } catch (err) {
    if (isNotFound(err)) {
      throw KubeError.nonRetryable(
        `${where} not found: cannot reach workload cluster ${cluster.namespace}/${cluster.name}`,
        WORKLOAD_KUBECONFIG_MISSING,
      );
    }
    throw err;
  }
  const resourceVersion = secret.metadata?.resourceVersion ?? '';
  const readAtMs = Date.now();
  if (cached && resourceVersion !== '' && cached.resourceVersion === resourceVersion) {
    cached.readAtMs = readAtMs;
    return cached.kubeConfig;
  }

  const value = secret.data?.value;
  if (!value) {
    throw KubeError.nonRetryable(`${where} has no key "value"`, WORKLOAD_KUBECONFIG_MISSING);
  }
  // Every call through it is bounded (src/platform/kube/bounded-transport.ts): the cluster is the tenant's.
  const kubeConfig = new WorkloadKubeConfig(key);
  kubeConfig.loadFromOptions(clientOptions(parseWorkloadKubeconfig(where, Buffer.from(value, 'base64'))));
  perCluster.set(key, { resourceVersion, kubeConfig, readAtMs });
  return kubeConfig;
}

/**
 * The accepted fields of the kubeconfig in `bytes` (see src/domain/workload-kubeconfig.ts), or a
 * non-retryable failure naming `where` and the refused field. Parsed and checked here, before
 * client-node sees anything: its loadFromString reads `token-file` while loading, and its requests
 * run `exec` plugins. No message quotes the Secret's contents (the YAML parser's own error would).
 */
export function parseWorkloadKubeconfig(where: string, bytes: Buffer): AcceptedKubeconfig {
  if (bytes.length > MAX_WORKLOAD_KUBECONFIG_BYTES) {
    throw KubeError.nonRetryable(
      `${where} holds a kubeconfig of ${bytes.length} bytes, over the ${MAX_WORKLOAD_KUBECONFIG_BYTES}-byte limit`,
      WORKLOAD_KUBECONFIG_INVALID,
    );
  }
  let doc: unknown;
  try {
    doc = loadYaml<unknown>(bytes.toString('utf8'));
  } catch (err) {
    const line = yamlErrorLine(err);
    throw KubeError.nonRetryable(
      `${where} holds no valid kubeconfig: not YAML${line === undefined ? '' : ` (line ${line})`}`,
      WORKLOAD_KUBECONFIG_INVALID,
    );
  }
  const check = checkWorkloadKubeconfig(doc);
  if (!check.ok) throw KubeError.nonRetryable(refusedKubeconfigMessage(where, check), WORKLOAD_KUBECONFIG_REFUSED);
  return check.config;
}

/** client-node's options for an accepted kubeconfig: exactly its fields, TLS verification on. */
function clientOptions(config: AcceptedKubeconfig): Parameters<KubeConfig['loadFromOptions']>[0] {
  return {
    clusters: config.clusters.map((c) => ({ ...c, skipTLSVerify: false })),
    users: config.users,
    contexts: config.contexts,
    currentContext: config.currentContext,
  };
}

/** js-yaml's 1-based line of a parse error (its message quotes the source: never shown). */
function yamlErrorLine(err: unknown): number | undefined {
  if (typeof err !== 'object' || err === null || !('mark' in err)) return undefined;
  const mark = err.mark;
  return typeof mark === 'object' && mark !== null && 'line' in mark && typeof mark.line === 'number'
    ? mark.line + 1
    : undefined;
}
