// Thin Kubernetes client helpers for the activities: the management cluster's
// KubeConfig (a file, or in-cluster), and a workload cluster's KubeConfig read
// from the `<cluster>-kubeconfig` Secret Cluster API writes (key `value`).
import {
  ApiException,
  CoreV1Api,
  type KubeConfig,
  loadYaml,
  type ApiConstructor,
  type ApiType,
} from '@kubernetes/client-node';
import { ApplicationFailure } from '@temporalio/common';
import { PooledKubeConfig } from '../platform/kube/pooled-kube-config.ts';
import { WorkloadKubeConfig } from '../platform/kube/workload-kube-config.ts';
import {
  checkWorkloadKubeconfig,
  MAX_WORKLOAD_KUBECONFIG_BYTES,
  refusedKubeconfigMessage,
  type AcceptedKubeconfig,
} from '../domain/workload-kubeconfig.ts';
import type { ClusterRef } from '../model/cluster-upgrade.ts';

/** Failure types of the non-retryable errors raised here. */
export const WORKLOAD_KUBECONFIG_MISSING = 'WorkloadKubeconfigMissing';
export const WORKLOAD_KUBECONFIG_INVALID = 'WorkloadKubeconfigInvalid';
/** The kubeconfig holds something other than data (an `exec` plugin, a file path, a proxy...). */
export const WORKLOAD_KUBECONFIG_REFUSED = 'WorkloadKubeconfigRefused';

/** Failure of every management cluster call when none is configured (see {@link managementKubeConfig}). */
export const MANAGEMENT_CLUSTER_NOT_CONFIGURED = 'ManagementClusterNotConfigured';
export const MANAGEMENT_CLUSTER_NOT_CONFIGURED_MESSAGE =
  'no management cluster: MANAGEMENT_KUBECONFIG is not set and this process is not running in a pod (no KUBERNETES_SERVICE_HOST)';

/**
 * Stands in for the management cluster when there is none: the process still starts (the hooks
 * answer, `docker compose up` works without a cluster), and every call through it fails with
 * {@link MANAGEMENT_CLUSTER_NOT_CONFIGURED_MESSAGE} instead of client-node's "Invalid URL".
 */
class UnconfiguredKubeConfig extends PooledKubeConfig {
  constructor() {
    super();
    // A valid URL, never dialled: the request fails in authentication, before any connection.
    this.loadFromOptions({
      clusters: [{ name: 'unconfigured', server: 'https://management-cluster.invalid', skipTLSVerify: false }],
      users: [{ name: 'unconfigured' }],
      contexts: [{ name: 'unconfigured', cluster: 'unconfigured', user: 'unconfigured' }],
      currentContext: 'unconfigured',
    });
  }

  override async applySecurityAuthentication(): Promise<void> {
    throw ApplicationFailure.nonRetryable(MANAGEMENT_CLUSTER_NOT_CONFIGURED_MESSAGE, MANAGEMENT_CLUSTER_NOT_CONFIGURED);
  }
}

/**
 * The management cluster's KubeConfig: from `path`, else the file named by
 * MANAGEMENT_KUBECONFIG, else the in-cluster service account; neither: one whose every call fails
 * saying so (check with {@link isManagementClusterConfigured}). A file that cannot be read throws,
 * naming the setting.
 */
export function managementKubeConfig(
  path: string | undefined = process.env.MANAGEMENT_KUBECONFIG,
  env: NodeJS.ProcessEnv = process.env,
): KubeConfig {
  if (!path && !env.KUBERNETES_SERVICE_HOST) return new UnconfiguredKubeConfig();
  const kc = new PooledKubeConfig();
  if (!path) {
    kc.loadFromCluster();
    return kc;
  }
  try {
    kc.loadFromFile(path);
  } catch (err) {
    // (fs errors may come from another realm: read the message, don't test the class.)
    const message = typeof err === 'object' && err !== null && 'message' in err ? String(err.message) : String(err);
    throw new Error(`MANAGEMENT_KUBECONFIG=${path}: ${message}`);
  }
  return kc;
}

export function isManagementClusterConfigured(kc: KubeConfig): boolean {
  return !(kc instanceof UnconfiguredKubeConfig);
}

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
const apiClients = new WeakMap<KubeConfig, Map<ApiConstructor<ApiType>, ApiType>>();

/** `kc.makeApiClient(api)`, made once per KubeConfig: the activities' calls share its connections. */
export function apiClient<T extends ApiType>(kc: KubeConfig, api: ApiConstructor<T>): T {
  let clients = apiClients.get(kc);
  if (!clients) {
    clients = new Map();
    apiClients.set(kc, clients);
  }
  let client = clients.get(api as ApiConstructor<ApiType>);
  if (!client) {
    client = kc.makeApiClient(api);
    clients.set(api as ApiConstructor<ApiType>, client);
  }
  return client as T;
}

/** Name of the Secret Cluster API writes for a cluster's admin kubeconfig. */
export function kubeconfigSecretName(cluster: ClusterRef): string {
  return `${cluster.name}-kubeconfig`;
}

/**
 * The workload cluster's KubeConfig, from Secret `<name>-kubeconfig` (key `value`) in the
 * cluster's namespace. A missing Secret or key, or an unusable kubeconfig, is a non-retryable
 * ApplicationFailure; API errors (unreachable, 5xx) propagate and are retried.
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
      throw ApplicationFailure.nonRetryable(
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
    throw ApplicationFailure.nonRetryable(`${where} has no key "value"`, WORKLOAD_KUBECONFIG_MISSING);
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
    throw ApplicationFailure.nonRetryable(
      `${where} holds a kubeconfig of ${bytes.length} bytes, over the ${MAX_WORKLOAD_KUBECONFIG_BYTES}-byte limit`,
      WORKLOAD_KUBECONFIG_INVALID,
    );
  }
  let doc: unknown;
  try {
    doc = loadYaml<unknown>(bytes.toString('utf8'));
  } catch (err) {
    const line = yamlErrorLine(err);
    throw ApplicationFailure.nonRetryable(
      `${where} holds no valid kubeconfig: not YAML${line === undefined ? '' : ` (line ${line})`}`,
      WORKLOAD_KUBECONFIG_INVALID,
    );
  }
  const check = checkWorkloadKubeconfig(doc);
  if (!check.ok)
    throw ApplicationFailure.nonRetryable(refusedKubeconfigMessage(where, check), WORKLOAD_KUBECONFIG_REFUSED);
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

/** HTTP status of a failed API call (client-node 2.x ApiException), undefined otherwise. */
export function statusCode(err: unknown): number | undefined {
  if (err instanceof ApiException) return err.code;
  if (typeof err === 'object' && err !== null && 'code' in err && typeof err.code === 'number') return err.code;
  return undefined;
}

export function isNotFound(err: unknown): boolean {
  return statusCode(err) === 404;
}

/**
 * A 404 for the named object itself: the API server's Status names it in `details.name`. A 404
 * without it is a kind the server does not serve (a missing CRD or version): that says nothing
 * about whether the object exists.
 */
export function isObjectNotFound(err: unknown, name: string): boolean {
  if (!isNotFound(err) || !(err instanceof ApiException)) return false;
  const raw: unknown = err.body;
  let status: unknown = raw;
  if (typeof raw === 'string') {
    try {
      status = JSON.parse(raw);
    } catch {
      return false;
    }
  }
  const details = (status as { details?: { name?: unknown } } | null)?.details;
  return details?.name === name;
}

export function isConflict(err: unknown): boolean {
  return statusCode(err) === 409;
}

/**
 * A write conditioned on what was read lost a race: read again and retry, up to `attempts` tries.
 * The one rule for every read-modify-write here: 409 (a stale resourceVersion) or 422 (a JSON
 * patch's `test` operation failed).
 */
export async function retryOnConflict<T>(fn: () => Promise<T>, attempts = 5): Promise<T> {
  for (let i = 1; ; i++) {
    try {
      return await fn();
    } catch (err) {
      if (i >= attempts || !isPreconditionFailed(err)) throw err;
    }
  }
}

/** 429: e.g. an eviction refused because of a PodDisruptionBudget. */
export function isTooManyRequests(err: unknown): boolean {
  return statusCode(err) === 429;
}

/** 422 from a failed JSON patch `test` operation, or 409 from a stale resourceVersion. */
export function isPreconditionFailed(err: unknown): boolean {
  const code = statusCode(err);
  return code === 409 || code === 422;
}
