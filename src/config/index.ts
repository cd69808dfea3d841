// Process configuration from environment variables, parsed once at start into
// a typed object. Every problem is reported at once, naming the variable. The
// hook server's part is server.ts; reading variables is env.ts.
import { binarySourceProblem, isPinnedImage, parseBinaryVolume, type BinaryVolume } from '../domain/node-binaries.ts';
import type { TemporalConnectionSettings, TemporalTlsSettings } from '../platform/temporal/connection.ts';
import { versioningFieldProblem, type WorkerVersioning } from '../platform/temporal/worker-versioning.ts';
import { EnvReader } from './env.ts';
import { readHandlers, readServerConfig, type HandlerConfig, type ServerConfig } from './server.ts';
import { readWorkloadReadLimits } from './workload-reads.ts';
import type { WorkloadReadLimits } from '../platform/kube/workload-limits.ts';

export type Role = 'all' | 'api' | 'worker';

/** The plain-HTTP operations endpoint: /livez, /readyz, /metrics. */
export interface OpsConfig {
  host: string;
  /** 0: any free port. */
  port: number;
}

/** Where and how to reach Temporal (src/platform/temporal/connection.ts), and the task queue. */
export interface TemporalConfig extends TemporalConnectionSettings {
  taskQueue: string;
  /**
   * Visibility Lists per second the api may start for its upgrade views (TEMPORAL_VISIBILITY_LISTS_PER_SECOND,
   * default 50): keep the replicas' sum within the frontend's `frontend.namespaceRPS.visibility`.
   */
  visibilityListsPerSecond: number;
}

/** Worker concurrency (Temporal WorkerOptions); unset = the SDK's defaults. */
export interface WorkerTuning {
  maxConcurrentActivityTaskExecutions?: number;
  maxConcurrentWorkflowTaskExecutions?: number;
  maxCachedWorkflows?: number;
  /** How often node upgrades waited on (Jobs, NodeUpgradeRequests) are read. */
  nodeUpgradePollMs: number;
}

export interface AppConfig {
  role: Role;
  logLevel: string;
  server: ServerConfig;
  handlers: HandlerConfig[];
  temporal: TemporalConfig;
  ops: OpsConfig;
  /** host:port for the Temporal SDK's Prometheus exporter (worker); unset = off. */
  temporalSdkMetricsAddress?: string;
  /** Prebuilt workflow bundle for the worker (production image); unset = bundle from source. */
  workflowBundlePath?: string;
  /** The `job` node-upgrade executor's image, binary source and pinned checksums (docs/node-upgrade-job.md). */
  nodeUpgradeJob: NodeUpgradeJobSettings;
  /** Phase changes of cluster upgrades are POSTed here as CloudEvents (worker). */
  notificationWebhookUrl?: string;
  worker: WorkerTuning;
  /** TEMPORAL_WORKER_BUILD_ID (+ _DEPLOYMENT_NAME): the worker's Worker Deployment version; unset = unversioned. */
  workerVersioning?: WorkerVersioning;
  /** WORKER_DRAIN_TIMEOUT (default 0 = off): a stopping versioned worker waits up to this for its pinned runs. */
  workerDrainTimeoutMs: number;
  /**
   * HOOK_REQUEST_CHECKS (on|off, default on): check every request that starts or signals a workflow
   * against the management cluster first (src/api/handlers/request-checks.ts). Off only for a stack without one.
   */
  requestChecks: boolean;
  /** NODE_UPGRADER_NAMESPACE: where management-executor node upgraders renew their Leases (api). */
  nodeUpgraderNamespace: string;
  /** WORKLOAD_READ_* / WORKLOAD_LIST_*: what one read of a workload cluster may cost (docs/limits.md). */
  workloadReads: WorkloadReadLimits;
}

/** The `job` executor's supply chain: NODE_UPGRADE_* (docs/node-upgrade-job.md). */
export interface NodeUpgradeJobSettings {
  /** By digest unless NODE_UPGRADE_JOB_ALLOW_UNPINNED_IMAGE; must provide sh, chroot, sha256sum, curl or wget. */
  image: string;
  /** https:// or file:/// (http:// on opt-in); unset: dl.k8s.io, or the binary volume when one is set. */
  binarySource?: string;
  allowHttpBinarySource: boolean;
  /** `<version>/<arch>/<binary>: <sha256>` lines; unset: every Job upgrade fails naming it. */
  checksumsFile?: string;
  /** Pre-staged binaries (air-gapped), mounted read-only into the Job. */
  binaryVolume?: BinaryVolume;
  /** kubeadm preflight checks `kubeadm upgrade` ignores on every node (e.g. SystemVerification on cgroup v1). */
  ignorePreflightErrors?: string[];
}

export class ConfigError extends Error {
  readonly problems: string[];
  constructor(problems: string[]) {
    super(`invalid configuration:\n  - ${problems.join('\n  - ')}`);
    this.name = 'ConfigError';
    this.problems = problems;
  }
}

/** WORKER_*: the worker's slots and cache, and how often a waiting node upgrade is polled. */
function workerTuning(read: EnvReader): WorkerTuning {
  const tuning = {
    maxConcurrentActivityTaskExecutions: read.get('WORKER_MAX_CONCURRENT_ACTIVITIES'),
    maxConcurrentWorkflowTaskExecutions: read.get('WORKER_MAX_CONCURRENT_WORKFLOW_TASKS'),
    maxCachedWorkflows: read.get('WORKER_MAX_CACHED_WORKFLOWS'),
  };
  return {
    ...(Object.fromEntries(Object.entries(tuning).filter(([, v]) => v !== undefined)) as Omit<
      WorkerTuning,
      'nodeUpgradePollMs'
    >),
    nodeUpgradePollMs: read.get('NODE_UPGRADE_POLL_INTERVAL'),
  };
}

/** NODE_UPGRADE_*: the Job's image by digest, an https or file:/// binary source, the checksums file. */
function nodeUpgradeJob(read: EnvReader): NodeUpgradeJobSettings {
  const allowUnpinned = read.get('NODE_UPGRADE_JOB_ALLOW_UNPINNED_IMAGE');
  const image = read.get('NODE_UPGRADE_JOB_IMAGE');
  if (!isPinnedImage(image) && !allowUnpinned)
    read.refuse(
      'NODE_UPGRADE_JOB_IMAGE',
      'not pinned by digest (<image>@sha256:<64 hex>); ' +
        'a tag can be moved to other content (set NODE_UPGRADE_JOB_ALLOW_UNPINNED_IMAGE=true to accept it)',
    );
  const allowHttpBinarySource = read.get('NODE_UPGRADE_BINARY_SOURCE_ALLOW_HTTP');
  const binarySource = read.get('NODE_UPGRADE_BINARY_SOURCE');
  const sourceProblem = binarySource && binarySourceProblem(binarySource, allowHttpBinarySource);
  if (sourceProblem) read.refuse('NODE_UPGRADE_BINARY_SOURCE', sourceProblem);
  const checksumsFile = read.get('NODE_UPGRADE_CHECKSUMS_FILE');
  const volumeText = read.get('NODE_UPGRADE_BINARY_VOLUME');
  const volume = volumeText ? parseBinaryVolume(volumeText, allowUnpinned) : undefined;
  if (volume && !volume.ok) read.refuse('NODE_UPGRADE_BINARY_VOLUME', volume.problem);
  const ignorePreflightErrors = read
    .get('NODE_UPGRADE_KUBEADM_IGNORE_PREFLIGHT_ERRORS')
    ?.split(',')
    .map((c) => c.trim());
  return {
    image,
    ...(binarySource ? { binarySource } : {}),
    allowHttpBinarySource,
    ...(ignorePreflightErrors ? { ignorePreflightErrors } : {}),
    ...(checksumsFile ? { checksumsFile } : {}),
    ...(volume?.ok ? { binaryVolume: volume.volume } : {}),
  };
}

/** NOTIFICATION_WEBHOOK_URL: an http(s) URL (it may carry a token: never logged). */
function notificationWebhook(read: EnvReader): Pick<AppConfig, 'notificationWebhookUrl'> {
  const raw = read.get('NOTIFICATION_WEBHOOK_URL');
  if (!raw) return {};
  let url: URL | undefined;
  try {
    url = new URL(raw);
  } catch {
    url = undefined;
  }
  if (!url || (url.protocol !== 'https:' && url.protocol !== 'http:')) {
    read.refuse('NOTIFICATION_WEBHOOK_URL');
    return {};
  }
  return { notificationWebhookUrl: raw };
}

/** TLS, mTLS and API key settings, each problem named. */
function temporalSecurity(read: EnvReader): Pick<TemporalConfig, 'tls' | 'apiKeyFile' | 'apiKey'> {
  const given = {
    caFile: read.get('TEMPORAL_TLS_CA_FILE'),
    serverName: read.get('TEMPORAL_TLS_SERVER_NAME'),
    certFile: read.get('TEMPORAL_TLS_CERT_FILE'),
    keyFile: read.get('TEMPORAL_TLS_KEY_FILE'),
  };
  const tlsFiles = Object.fromEntries(Object.entries(given).filter(([, v]) => v)) as TemporalTlsSettings;
  if (Boolean(tlsFiles.certFile) !== Boolean(tlsFiles.keyFile))
    read.problems.push('TEMPORAL_TLS_CERT_FILE and TEMPORAL_TLS_KEY_FILE: set both (mTLS) or neither');
  const apiKeyFile = read.get('TEMPORAL_API_KEY_FILE');
  const apiKey = read.get('TEMPORAL_API_KEY');
  if (apiKeyFile && apiKey) read.problems.push('TEMPORAL_API_KEY and TEMPORAL_API_KEY_FILE: set one, not both');
  const anyTls = Object.keys(tlsFiles).length > 0;
  // On when asked, or when anything needs it; an API key never travels in clear text.
  const tls = read.get('TEMPORAL_TLS') ?? (anyTls || Boolean(apiKeyFile || apiKey));
  if (!tls && anyTls)
    read.problems.push(
      `TEMPORAL_TLS=false contradicts ${Object.keys(tlsFiles).length} TLS setting(s) (TEMPORAL_TLS_*)`,
    );
  if (!tls && (apiKeyFile || apiKey))
    read.problems.push('TEMPORAL_TLS=false: an API key (TEMPORAL_API_KEY / TEMPORAL_API_KEY_FILE) needs TLS');
  return {
    ...(tls ? { tls: tlsFiles } : {}),
    ...(apiKeyFile ? { apiKeyFile } : {}),
    ...(apiKey ? { apiKey } : {}),
  };
}

/** TEMPORAL_WORKER_BUILD_ID turns Worker Versioning on; the Worker Controller's TEMPORAL_DEPLOYMENT_NAME wins. */
function workerVersioning(read: EnvReader): Pick<AppConfig, 'workerVersioning' | 'workerDrainTimeoutMs'> {
  const workerDrainTimeoutMs = read.get('WORKER_DRAIN_TIMEOUT');
  const controllerName = read.get('TEMPORAL_DEPLOYMENT_NAME');
  const nameVariable = controllerName ? 'TEMPORAL_DEPLOYMENT_NAME' : 'TEMPORAL_WORKER_DEPLOYMENT_NAME';
  const deploymentName = controllerName ?? read.get('TEMPORAL_WORKER_DEPLOYMENT_NAME');
  const problems = read.problems.length;
  const nameProblem = versioningFieldProblem(deploymentName, 'deployment name');
  if (nameProblem) read.problems.push(`${nameVariable}=${JSON.stringify(deploymentName)}: ${nameProblem}`);
  const buildId = read.get('TEMPORAL_WORKER_BUILD_ID');
  if (!buildId) return { workerDrainTimeoutMs };
  const buildProblem = versioningFieldProblem(buildId, 'build id');
  if (buildProblem) read.problems.push(`TEMPORAL_WORKER_BUILD_ID=${JSON.stringify(buildId)}: ${buildProblem}`);
  return read.problems.length > problems
    ? { workerDrainTimeoutMs }
    : { workerVersioning: { deploymentName, buildId }, workerDrainTimeoutMs };
}

export function parseConfig(env: Record<string, string | undefined> = process.env): AppConfig {
  const read = new EnvReader(env);
  const role = read.get('ROLE');
  const server = readServerConfig(read);
  const handlers = readHandlers(read);
  const worker = workerTuning(read);
  const versioning = workerVersioning(read);
  const sdkMetrics = read.get('TEMPORAL_SDK_METRICS_ADDRESS');
  const bundle = read.get('WORKFLOW_BUNDLE_PATH');
  const config: AppConfig = {
    role,
    logLevel: read.get('LOG_LEVEL'),
    server,
    handlers,
    temporal: {
      address: read.get('TEMPORAL_ADDRESS'),
      namespace: read.get('TEMPORAL_NAMESPACE'),
      taskQueue: read.get('TEMPORAL_TASK_QUEUE'),
      visibilityListsPerSecond: read.get('TEMPORAL_VISIBILITY_LISTS_PER_SECOND'),
      ...temporalSecurity(read),
      reloadIntervalMs: read.get('TEMPORAL_CREDENTIALS_RELOAD_INTERVAL'),
    },
    ops: { host: read.get('OPS_SERVER_HOST'), port: read.get('OPS_SERVER_PORT') },
    ...(sdkMetrics ? { temporalSdkMetricsAddress: sdkMetrics } : {}),
    ...(bundle ? { workflowBundlePath: bundle } : {}),
    nodeUpgradeJob: nodeUpgradeJob(read),
    ...notificationWebhook(read),
    worker,
    ...versioning,
    requestChecks: read.get('HOOK_REQUEST_CHECKS') === 'on',
    nodeUpgraderNamespace: read.get('NODE_UPGRADER_NAMESPACE'),
    workloadReads: readWorkloadReadLimits(read),
  };
  if (read.problems.length > 0) throw new ConfigError(read.problems);
  return config;
}
