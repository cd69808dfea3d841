// Process configuration from environment variables, parsed once at start into
// a typed object. Every problem is reported at once, naming the variable. The
// hook server's part is server.ts; reading variables is env.ts.
import {
  DEFAULT_JOB_IMAGE,
  binarySourceProblem,
  isPinnedImage,
  parseBinaryVolume,
  type BinaryVolume,
} from '../domain/node-binaries.ts';
import { DEFAULT_NODE_UPGRADER_NAMESPACE } from '../model/machine-update.ts';
import type { TemporalConnectionSettings, TemporalTlsSettings } from '../platform/temporal/connection.ts';
import { parseWorkerVersioning, type WorkerVersioning } from '../platform/temporal/worker-versioning.ts';
import { DNS1123_LABEL } from '../model/cluster-upgrade.ts';
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
   * against the management cluster first (src/api/request-checks.ts). Off only for a stack without one.
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
    maxConcurrentActivityTaskExecutions: read.optionalInt('WORKER_MAX_CONCURRENT_ACTIVITIES', 1, 10_000),
    maxConcurrentWorkflowTaskExecutions: read.optionalInt('WORKER_MAX_CONCURRENT_WORKFLOW_TASKS', 2, 10_000),
    maxCachedWorkflows: read.optionalInt('WORKER_MAX_CACHED_WORKFLOWS', 0, 100_000),
  };
  return {
    ...(Object.fromEntries(Object.entries(tuning).filter(([, v]) => v !== undefined)) as Omit<
      WorkerTuning,
      'nodeUpgradePollMs'
    >),
    // One GET per waiting upgrade per interval; the watch heartbeats every 3 s whatever the interval.
    nodeUpgradePollMs: read.duration('NODE_UPGRADE_POLL_INTERVAL', 500, 100, 5_000),
  };
}

/** NODE_UPGRADE_*: the Job's image by digest, an https or file:/// binary source, the checksums file. */
function nodeUpgradeJob(read: EnvReader): NodeUpgradeJobSettings {
  const allowUnpinned = read.bool('NODE_UPGRADE_JOB_ALLOW_UNPINNED_IMAGE', false);
  const image = read.str('NODE_UPGRADE_JOB_IMAGE', DEFAULT_JOB_IMAGE);
  if (!isPinnedImage(image) && !allowUnpinned)
    read.problems.push(
      `NODE_UPGRADE_JOB_IMAGE=${JSON.stringify(image)}: not pinned by digest (<image>@sha256:<64 hex>); ` +
        'a tag can be moved to other content (set NODE_UPGRADE_JOB_ALLOW_UNPINNED_IMAGE=true to accept it)',
    );
  const allowHttpBinarySource = read.bool('NODE_UPGRADE_BINARY_SOURCE_ALLOW_HTTP', false);
  const binarySource = read.env.NODE_UPGRADE_BINARY_SOURCE || undefined;
  const sourceProblem = binarySource && binarySourceProblem(binarySource, allowHttpBinarySource);
  if (sourceProblem) read.problems.push(`NODE_UPGRADE_BINARY_SOURCE=${JSON.stringify(binarySource)}: ${sourceProblem}`);
  const checksumsFile = read.env.NODE_UPGRADE_CHECKSUMS_FILE || undefined;
  if (checksumsFile && !checksumsFile.startsWith('/'))
    read.problems.push(`NODE_UPGRADE_CHECKSUMS_FILE=${JSON.stringify(checksumsFile)}: expected an absolute path`);
  const volumeText = read.env.NODE_UPGRADE_BINARY_VOLUME || undefined;
  const volume = volumeText ? parseBinaryVolume(volumeText, allowUnpinned) : undefined;
  if (volume && !volume.ok)
    read.problems.push(`NODE_UPGRADE_BINARY_VOLUME=${JSON.stringify(volumeText)}: ${volume.problem}`);
  const ignoreText = read.env.NODE_UPGRADE_KUBEADM_IGNORE_PREFLIGHT_ERRORS || undefined;
  const ignorePreflightErrors = ignoreText?.split(',').map((c) => c.trim());
  if (ignorePreflightErrors?.some((c) => !/^[A-Za-z0-9][A-Za-z0-9.-]*$/.test(c)))
    read.problems.push(
      `NODE_UPGRADE_KUBEADM_IGNORE_PREFLIGHT_ERRORS=${JSON.stringify(ignoreText)}: expected comma-separated kubeadm preflight check names (e.g. SystemVerification)`,
    );
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
  const raw = read.env.NOTIFICATION_WEBHOOK_URL;
  if (!raw) return {};
  let url: URL | undefined;
  try {
    url = new URL(raw);
  } catch {
    url = undefined;
  }
  if (!url || (url.protocol !== 'https:' && url.protocol !== 'http:')) {
    read.problems.push('NOTIFICATION_WEBHOOK_URL: expected an http:// or https:// URL');
    return {};
  }
  return { notificationWebhookUrl: raw };
}

function nodeUpgraderNamespace(read: EnvReader): string {
  const raw = read.str('NODE_UPGRADER_NAMESPACE', DEFAULT_NODE_UPGRADER_NAMESPACE);
  if (!DNS1123_LABEL.test(raw))
    read.problems.push(`NODE_UPGRADER_NAMESPACE=${JSON.stringify(raw)}: not a namespace name`);
  return raw;
}

function requestChecks(read: EnvReader): boolean {
  const raw = read.str('HOOK_REQUEST_CHECKS', 'on');
  if (raw === 'on' || raw === 'off') return raw === 'on';
  read.problems.push(`HOOK_REQUEST_CHECKS=${JSON.stringify(raw)}: expected on or off`);
  return true;
}

/** TLS, mTLS and API key settings, each problem named. */
function temporalSecurity(read: EnvReader): Pick<TemporalConfig, 'tls' | 'apiKeyFile' | 'apiKey'> {
  const file = (name: string) => read.env[name] || undefined;
  const tlsFiles: TemporalTlsSettings = {
    ...(file('TEMPORAL_TLS_CA_FILE') ? { caFile: file('TEMPORAL_TLS_CA_FILE') } : {}),
    ...(file('TEMPORAL_TLS_SERVER_NAME') ? { serverName: file('TEMPORAL_TLS_SERVER_NAME') } : {}),
    ...(file('TEMPORAL_TLS_CERT_FILE') ? { certFile: file('TEMPORAL_TLS_CERT_FILE') } : {}),
    ...(file('TEMPORAL_TLS_KEY_FILE') ? { keyFile: file('TEMPORAL_TLS_KEY_FILE') } : {}),
  };
  if (Boolean(tlsFiles.certFile) !== Boolean(tlsFiles.keyFile))
    read.problems.push('TEMPORAL_TLS_CERT_FILE and TEMPORAL_TLS_KEY_FILE: set both (mTLS) or neither');
  const apiKeyFile = file('TEMPORAL_API_KEY_FILE');
  const apiKey = file('TEMPORAL_API_KEY');
  if (apiKeyFile && apiKey) read.problems.push('TEMPORAL_API_KEY and TEMPORAL_API_KEY_FILE: set one, not both');
  const anyTls = Object.keys(tlsFiles).length > 0;
  // On when asked, or when anything needs it; an API key never travels in clear text.
  const tls = read.bool('TEMPORAL_TLS', anyTls || Boolean(apiKeyFile || apiKey));
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

export function parseConfig(env: Record<string, string | undefined> = process.env): AppConfig {
  const read = new EnvReader(env);
  const role = read.str('ROLE', 'all');
  if (role !== 'all' && role !== 'api' && role !== 'worker')
    read.problems.push(`ROLE=${JSON.stringify(role)}: expected all, api or worker`);

  const server = readServerConfig(read);
  const handlers = readHandlers(read);

  const worker = workerTuning(read);

  const versioning = parseWorkerVersioning(env);
  read.problems.push(...versioning.problems);
  const config: AppConfig = {
    role: role as Role,
    logLevel: read.str('LOG_LEVEL', 'info'),
    server,
    handlers,
    temporal: {
      address: read.str('TEMPORAL_ADDRESS', '127.0.0.1:7233'),
      namespace: read.str('TEMPORAL_NAMESPACE', 'default'),
      taskQueue: read.str('TEMPORAL_TASK_QUEUE', 'capi-upgrade-orchestrator'),
      visibilityListsPerSecond: read.int('TEMPORAL_VISIBILITY_LISTS_PER_SECOND', 50, 1, 10_000),
      ...temporalSecurity(read),
      reloadIntervalMs: read.duration('TEMPORAL_CREDENTIALS_RELOAD_INTERVAL', 30_000, 1_000, 3_600_000),
    },
    ops: { host: read.str('OPS_SERVER_HOST', '0.0.0.0'), port: read.int('OPS_SERVER_PORT', 8080, 0, 65535) },
    ...(read.env.TEMPORAL_SDK_METRICS_ADDRESS
      ? { temporalSdkMetricsAddress: read.env.TEMPORAL_SDK_METRICS_ADDRESS }
      : {}),
    ...(read.env.WORKFLOW_BUNDLE_PATH ? { workflowBundlePath: read.env.WORKFLOW_BUNDLE_PATH } : {}),
    nodeUpgradeJob: nodeUpgradeJob(read),
    ...notificationWebhook(read),
    worker,
    ...(versioning.versioning ? { workerVersioning: versioning.versioning } : {}),
    workerDrainTimeoutMs: versioning.drainTimeoutMs,
    requestChecks: requestChecks(read),
    nodeUpgraderNamespace: nodeUpgraderNamespace(read),
    workloadReads: readWorkloadReadLimits(read),
  };
  if (read.problems.length > 0) throw new ConfigError(read.problems);
  return config;
}
