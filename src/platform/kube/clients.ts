// The management cluster's KubeConfig (a file, or in-cluster; or one that says there is none),
// and API clients made once per KubeConfig.
import { type ApiConstructor, type ApiType, type KubeConfig } from '@kubernetes/client-node';
import { KubeError } from './errors.ts';
import { PooledKubeConfig } from './pooled-kube-config.ts';

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
    throw KubeError.nonRetryable(MANAGEMENT_CLUSTER_NOT_CONFIGURED_MESSAGE, MANAGEMENT_CLUSTER_NOT_CONFIGURED);
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

const apiClients = new WeakMap<KubeConfig, Map<ApiConstructor<ApiType>, ApiType>>();

/** `kc.makeApiClient(api)`, made once per KubeConfig: the calls through it share its connections. */
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
