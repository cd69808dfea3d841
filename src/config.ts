// Process configuration from environment variables, parsed once at start into
// a typed object. Every problem is reported at once, naming the variable.
import { parseGoDuration } from './domain/durations.ts';
import {
  binarySourceProblem,
  DEFAULT_JOB_IMAGE,
  isPinnedImage,
  parseBinaryVolume,
  type BinaryVolume,
} from './domain/node-binaries.ts';
import { DEFAULT_NODE_UPGRADER_NAMESPACE } from './api/node-upgraders.ts';
import type { TemporalConnectionSettings, TemporalTlsSettings } from './temporal-connection.ts';
import { parseWorkerVersioning, type WorkerVersioning } from './worker-versioning.ts';
import {
  defaultHandlerName,
  hookCatalog,
  hookNames,
  type FailurePolicy,
  type HookFamily,
  type HookName,
} from './api/contract.ts';

export type Role = 'all' | 'api' | 'worker';

export interface HandlerConfig {
  hook: HookName;
  /** DNS-1123 label, unique; the last URL segment. */
  name: string;
  enabled: boolean;
  timeoutSeconds: number;
  failurePolicy: FailurePolicy;
}

export interface ServerConfig {
  host: string;
  port: number;
  certFile: string;
  keyFile: string;
  /** PEM bundle of CAs whose client certificates are accepted; set = mutual TLS. */
  clientCaFile?: string;
  /** With mutual TLS: only certificates naming one of these may call (HOOK_CLIENT_ALLOWED_SUBJECTS). */
  clientAllowedSubjects?: ClientSubjectAllowList;
  /** How often the certificate files are re-read (cert-manager rotates them in place). */
  tlsReloadIntervalMs: number;
  /** Development only: serve plain HTTP. CAPI itself refuses http. */
  insecureHttp: boolean;
  /** Largest request body per hook family; larger ones get 413 before they are read (docs/limits.md). */
  bodyLimits: Record<HookFamily, number>;
  /** Body bytes being read, parsed and handled at once, all requests together (src/api/body-budget.ts). */
  bodyBytesInFlight: number;
  /** Time to receive a whole request (headers and body); a slower client gets 408 and its body slot back. */
  requestTimeoutMs: number;
  /** Open connections at once; past it new connections are closed at once. */
  maxConnections: number;
  /** retryAfterSeconds answered by blocking hooks while Temporal cannot be reached. */
  unavailableRetryAfterSeconds: number;
}

/** Client certificate names admitted: `CN=x` matches a subject common name, `DNS=x` a DNS SAN, `x` either. */
export interface ClientSubjectAllowList {
  commonNames: string[];
  dnsNames: string[];
}

/** The plain-HTTP operations endpoint: /livez, /readyz, /metrics. */
export interface OpsConfig {
  host: string;
  /** 0: any free port. */
  port: number;
}

/** Where and how to reach Temporal (src/temporal-connection.ts), and the task queue. */
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
}

export class ConfigError extends Error {
  readonly problems: string[];
  constructor(problems: string[]) {
    super(`invalid configuration:\n  - ${problems.join('\n  - ')}`);
    this.name = 'ConfigError';
    this.problems = problems;
  }
}

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/**
 * Body limits by hook family, from the largest request CAPI can send (docs/limits.md): one
 * Cluster (etcd caps an object at 1.5 MiB) for lifecycle and plan hooks; up to six objects
 * (current and desired Machine, infrastructure machine, bootstrap config) for in-place hooks.
 */
export const DEFAULT_BODY_LIMITS: Readonly<Record<HookFamily, number>> = {
  lifecycle: 2 * 1024 * 1024,
  'upgrade-plan': 2 * 1024 * 1024,
  'in-place': 6 * 1024 * 1024,
};
/** Discovery carries nothing but apiVersion and kind. */
export const DISCOVERY_BODY_LIMIT_BYTES = 64 * 1024;
/** Bodies up to this size are "small" (every hook call measured from real CAPI is well under it). */
export const SMALL_BODY_BYTES = 64 * 1024;
/** Bytes of the in-flight budget only small bodies may take: bodies at the limit never starve them. */
export const SMALL_BODY_RESERVE_BYTES = 1024 * 1024;
/** ~21 heap bytes per body byte at worst: 7 MiB in flight (~150 MiB) fits beside the api's ~70 MiB in a 256 MiB old space. */
export const DEFAULT_BODY_BYTES_IN_FLIGHT = 7 * 1024 * 1024;

/** `BeforeClusterUpgrade` → `BEFORE_CLUSTER_UPGRADE`, the per-hook variable infix. */
export function hookEnvName(hook: HookName): string {
  return defaultHandlerName(hook).replace(/-/g, '_').toUpperCase();
}

export function parseConfig(env: Record<string, string | undefined> = process.env): AppConfig {
  const problems: string[] = [];
  const str = (name: string, fallback: string): string => {
    const v = env[name];
    return v === undefined || v === '' ? fallback : v;
  };
  const int = (name: string, fallback: number, min: number, max: number): number => {
    const raw = env[name];
    if (raw === undefined || raw === '') return fallback;
    const n = Number(raw);
    if (!Number.isInteger(n) || n < min || n > max) {
      problems.push(`${name}=${JSON.stringify(raw)}: expected an integer from ${min} to ${max}`);
      return fallback;
    }
    return n;
  };
  const duration = (name: string, fallback: number, min: number, max: number): number => {
    const raw = env[name];
    if (raw === undefined || raw === '') return fallback;
    const ms = parseGoDuration(raw);
    if (ms === undefined || ms < min || ms > max) {
      problems.push(
        `${name}=${JSON.stringify(raw)}: expected a duration from ${min}ms to ${max / 1000}s (e.g. 500ms, 2s)`,
      );
      return fallback;
    }
    return ms;
  };
  const bool = (name: string, fallback: boolean): boolean => {
    const raw = env[name];
    if (raw === undefined || raw === '') return fallback;
    if (/^(true|1|yes)$/i.test(raw)) return true;
    if (/^(false|0|no)$/i.test(raw)) return false;
    problems.push(`${name}=${JSON.stringify(raw)}: expected true or false`);
    return fallback;
  };

  /** Body limits (one for every hook family when set) and the bytes in flight they need. */
  function bodyBounds(): Pick<ServerConfig, 'bodyLimits' | 'bodyBytesInFlight'> {
    const MiB = 1024 * 1024;
    const given = env.HOOK_SERVER_BODY_LIMIT_BYTES
      ? int('HOOK_SERVER_BODY_LIMIT_BYTES', DEFAULT_BODY_LIMITS['in-place'], 1024, 256 * MiB)
      : undefined;
    const bodyLimits: Record<HookFamily, number> = given
      ? { lifecycle: given, 'upgrade-plan': given, 'in-place': given }
      : { ...DEFAULT_BODY_LIMITS };
    // Room for one body at the largest limit beside the small bodies' reserve.
    const needed = Math.max(...Object.values(bodyLimits)) + SMALL_BODY_RESERVE_BYTES;
    const bodyBytesInFlight = int(
      'HOOK_SERVER_BODY_BYTES_IN_FLIGHT',
      Math.max(DEFAULT_BODY_BYTES_IN_FLIGHT, needed),
      64 * 1024,
      1024 * MiB,
    );
    if (bodyBytesInFlight < needed)
      problems.push(
        `HOOK_SERVER_BODY_BYTES_IN_FLIGHT=${bodyBytesInFlight}: must be at least the largest body limit plus ${SMALL_BODY_RESERVE_BYTES} bytes (${needed})`,
      );
    return { bodyLimits, bodyBytesInFlight };
  }

  const role = str('ROLE', 'all');
  if (role !== 'all' && role !== 'api' && role !== 'worker')
    problems.push(`ROLE=${JSON.stringify(role)}: expected all, api or worker`);

  const certDir = str('TLS_CERT_DIR', '/tmp/k8s-webhook-server/serving-certs');
  const clientCaFile = env.TLS_CLIENT_CA_FILE || undefined;
  const server: ServerConfig = {
    host: str('HOOK_SERVER_HOST', '0.0.0.0'),
    port: int('HOOK_SERVER_PORT', 9443, 0, 65535),
    certFile: str('TLS_CERT_FILE', `${certDir}/tls.crt`),
    keyFile: str('TLS_KEY_FILE', `${certDir}/tls.key`),
    ...(clientCaFile ? { clientCaFile } : {}),
    ...clientAllowList(),
    tlsReloadIntervalMs: int('TLS_RELOAD_INTERVAL_SECONDS', 10, 1, 3600) * 1000,
    insecureHttp: bool('HOOK_SERVER_INSECURE_HTTP', false),
    ...bodyBounds(),
    requestTimeoutMs: duration('HOOK_SERVER_REQUEST_TIMEOUT', 30_000, 1_000, 300_000),
    maxConnections: int('HOOK_SERVER_MAX_CONNECTIONS', 512, 1, 65_536),
    unavailableRetryAfterSeconds: int('HOOK_UNAVAILABLE_RETRY_AFTER_SECONDS', 30, 1, 3600),
  };

  if (server.insecureHttp && (clientCaFile || server.clientAllowedSubjects))
    problems.push(
      'HOOK_SERVER_INSECURE_HTTP=true serves plain HTTP: TLS_CLIENT_CA_FILE and HOOK_CLIENT_ALLOWED_SUBJECTS need TLS',
    );

  /** HOOK_CLIENT_ALLOWED_SUBJECTS: comma-separated `CN=name`, `DNS=name` or `name` (either); exact, case-sensitive. */
  function clientAllowList(): Pick<ServerConfig, 'clientAllowedSubjects'> {
    const raw = env.HOOK_CLIENT_ALLOWED_SUBJECTS;
    if (raw === undefined || raw.trim() === '') return {};
    const name = 'HOOK_CLIENT_ALLOWED_SUBJECTS';
    if (!clientCaFile) {
      problems.push(`${name}: needs TLS_CLIENT_CA_FILE (the allow-list applies to verified client certificates)`);
      return {};
    }
    const list: ClientSubjectAllowList = { commonNames: [], dnsNames: [] };
    for (const entry of raw.split(',').map((e) => e.trim())) {
      if (entry === '') {
        problems.push(`${name}: empty entry in ${JSON.stringify(raw)} (entries are separated by single commas)`);
        continue;
      }
      const m = /^(?:([A-Za-z]+)[=:])?(.*)$/s.exec(entry)!;
      const kind = m[1]?.toUpperCase();
      const value = m[2]!.trim();
      if (kind !== undefined && kind !== 'CN' && kind !== 'DNS') {
        problems.push(`${name}: ${JSON.stringify(entry)}: only CN= and DNS= entries are supported`);
        continue;
      }
      if (value === '' || value.length > 253 || [...value].some((ch) => ch === '*' || ch < ' ' || ch === '\u007f')) {
        problems.push(
          `${name}: ${JSON.stringify(entry)}: expected a name of 1 to 253 printable characters, without wildcards`,
        );
        continue;
      }
      if (kind !== 'DNS') list.commonNames.push(value);
      if (kind !== 'CN') list.dnsNames.push(value);
    }
    return { clientAllowedSubjects: list };
  }

  const disabled = new Set(
    str('HOOKS_DISABLED', '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
  );
  for (const name of disabled) {
    if (!(hookNames as string[]).includes(name)) problems.push(`HOOKS_DISABLED: unknown hook ${JSON.stringify(name)}`);
  }
  const handlers = hookNames.map((hook): HandlerConfig => {
    const infix = hookEnvName(hook);
    const name = str(`HOOK_${infix}_NAME`, defaultHandlerName(hook));
    if (!DNS1123_LABEL.test(name) || name.length > 63) {
      problems.push(`HOOK_${infix}_NAME=${JSON.stringify(name)}: must be a DNS-1123 label`);
    }
    const policy = str(`HOOK_${infix}_FAILURE_POLICY`, hookCatalog[hook].defaultFailurePolicy);
    if (policy !== 'Fail' && policy !== 'Ignore') {
      problems.push(`HOOK_${infix}_FAILURE_POLICY=${JSON.stringify(policy)}: expected Fail or Ignore`);
    }
    return {
      hook,
      name,
      enabled: !disabled.has(hook) && bool(`HOOK_${infix}_ENABLED`, true),
      timeoutSeconds: int(`HOOK_${infix}_TIMEOUT_SECONDS`, 10, 0, 30),
      failurePolicy: policy === 'Ignore' ? 'Ignore' : 'Fail',
    };
  });
  const seen = new Map<string, HookName>();
  for (const h of handlers) {
    const other = seen.get(h.name);
    if (other) problems.push(`handler name ${JSON.stringify(h.name)} is used by both ${other} and ${h.hook}`);
    seen.set(h.name, h.hook);
  }

  const optionalInt = (name: string, min: number, max: number): number | undefined =>
    env[name] === undefined || env[name] === '' ? undefined : int(name, min, min, max);
  const tuning = {
    maxConcurrentActivityTaskExecutions: optionalInt('WORKER_MAX_CONCURRENT_ACTIVITIES', 1, 10_000),
    maxConcurrentWorkflowTaskExecutions: optionalInt('WORKER_MAX_CONCURRENT_WORKFLOW_TASKS', 2, 10_000),
    maxCachedWorkflows: optionalInt('WORKER_MAX_CACHED_WORKFLOWS', 0, 100_000),
  };
  const worker: WorkerTuning = {
    ...(Object.fromEntries(Object.entries(tuning).filter(([, v]) => v !== undefined)) as Omit<
      WorkerTuning,
      'nodeUpgradePollMs'
    >),
    // One GET per waiting upgrade per interval; the watch heartbeats every 3 s whatever the interval.
    nodeUpgradePollMs: duration('NODE_UPGRADE_POLL_INTERVAL', 500, 100, 5_000),
  };

  /** NODE_UPGRADE_*: the Job's image by digest, an https or file:/// binary source, the checksums file. */
  function nodeUpgradeJob(): NodeUpgradeJobSettings {
    const allowUnpinned = bool('NODE_UPGRADE_JOB_ALLOW_UNPINNED_IMAGE', false);
    const image = str('NODE_UPGRADE_JOB_IMAGE', DEFAULT_JOB_IMAGE);
    if (!isPinnedImage(image) && !allowUnpinned)
      problems.push(
        `NODE_UPGRADE_JOB_IMAGE=${JSON.stringify(image)}: not pinned by digest (<image>@sha256:<64 hex>); ` +
          'a tag can be moved to other content (set NODE_UPGRADE_JOB_ALLOW_UNPINNED_IMAGE=true to accept it)',
      );
    const allowHttpBinarySource = bool('NODE_UPGRADE_BINARY_SOURCE_ALLOW_HTTP', false);
    const binarySource = env.NODE_UPGRADE_BINARY_SOURCE || undefined;
    const sourceProblem = binarySource && binarySourceProblem(binarySource, allowHttpBinarySource);
    if (sourceProblem) problems.push(`NODE_UPGRADE_BINARY_SOURCE=${JSON.stringify(binarySource)}: ${sourceProblem}`);
    const checksumsFile = env.NODE_UPGRADE_CHECKSUMS_FILE || undefined;
    if (checksumsFile && !checksumsFile.startsWith('/'))
      problems.push(`NODE_UPGRADE_CHECKSUMS_FILE=${JSON.stringify(checksumsFile)}: expected an absolute path`);
    const volumeText = env.NODE_UPGRADE_BINARY_VOLUME || undefined;
    const volume = volumeText ? parseBinaryVolume(volumeText, allowUnpinned) : undefined;
    if (volume && !volume.ok)
      problems.push(`NODE_UPGRADE_BINARY_VOLUME=${JSON.stringify(volumeText)}: ${volume.problem}`);
    return {
      image,
      ...(binarySource ? { binarySource } : {}),
      allowHttpBinarySource,
      ...(checksumsFile ? { checksumsFile } : {}),
      ...(volume?.ok ? { binaryVolume: volume.volume } : {}),
    };
  }

  /** NOTIFICATION_WEBHOOK_URL: an http(s) URL (it may carry a token: never logged). */
  function notificationWebhook(): Pick<AppConfig, 'notificationWebhookUrl'> {
    const raw = env.NOTIFICATION_WEBHOOK_URL;
    if (!raw) return {};
    let url: URL | undefined;
    try {
      url = new URL(raw);
    } catch {
      url = undefined;
    }
    if (!url || (url.protocol !== 'https:' && url.protocol !== 'http:')) {
      problems.push('NOTIFICATION_WEBHOOK_URL: expected an http:// or https:// URL');
      return {};
    }
    return { notificationWebhookUrl: raw };
  }

  function nodeUpgraderNamespace(): string {
    const raw = str('NODE_UPGRADER_NAMESPACE', DEFAULT_NODE_UPGRADER_NAMESPACE);
    if (!DNS1123_LABEL.test(raw) || raw.length > 63)
      problems.push(`NODE_UPGRADER_NAMESPACE=${JSON.stringify(raw)}: not a namespace name`);
    return raw;
  }

  function requestChecks(): boolean {
    const raw = str('HOOK_REQUEST_CHECKS', 'on');
    if (raw === 'on' || raw === 'off') return raw === 'on';
    problems.push(`HOOK_REQUEST_CHECKS=${JSON.stringify(raw)}: expected on or off`);
    return true;
  }

  /** TLS, mTLS and API key settings, each problem named. */
  function temporalSecurity(): Pick<TemporalConfig, 'tls' | 'apiKeyFile' | 'apiKey'> {
    const file = (name: string) => env[name] || undefined;
    const tlsFiles: TemporalTlsSettings = {
      ...(file('TEMPORAL_TLS_CA_FILE') ? { caFile: file('TEMPORAL_TLS_CA_FILE') } : {}),
      ...(file('TEMPORAL_TLS_SERVER_NAME') ? { serverName: file('TEMPORAL_TLS_SERVER_NAME') } : {}),
      ...(file('TEMPORAL_TLS_CERT_FILE') ? { certFile: file('TEMPORAL_TLS_CERT_FILE') } : {}),
      ...(file('TEMPORAL_TLS_KEY_FILE') ? { keyFile: file('TEMPORAL_TLS_KEY_FILE') } : {}),
    };
    if (Boolean(tlsFiles.certFile) !== Boolean(tlsFiles.keyFile))
      problems.push('TEMPORAL_TLS_CERT_FILE and TEMPORAL_TLS_KEY_FILE: set both (mTLS) or neither');
    const apiKeyFile = file('TEMPORAL_API_KEY_FILE');
    const apiKey = file('TEMPORAL_API_KEY');
    if (apiKeyFile && apiKey) problems.push('TEMPORAL_API_KEY and TEMPORAL_API_KEY_FILE: set one, not both');
    const anyTls = Object.keys(tlsFiles).length > 0;
    // On when asked, or when anything needs it; an API key never travels in clear text.
    const tls = bool('TEMPORAL_TLS', anyTls || Boolean(apiKeyFile || apiKey));
    if (!tls && anyTls)
      problems.push(`TEMPORAL_TLS=false contradicts ${Object.keys(tlsFiles).length} TLS setting(s) (TEMPORAL_TLS_*)`);
    if (!tls && (apiKeyFile || apiKey))
      problems.push('TEMPORAL_TLS=false: an API key (TEMPORAL_API_KEY / TEMPORAL_API_KEY_FILE) needs TLS');
    return {
      ...(tls ? { tls: tlsFiles } : {}),
      ...(apiKeyFile ? { apiKeyFile } : {}),
      ...(apiKey ? { apiKey } : {}),
    };
  }

  const versioning = parseWorkerVersioning(env);
  problems.push(...versioning.problems);
  const config: AppConfig = {
    role: role as Role,
    logLevel: str('LOG_LEVEL', 'info'),
    server,
    handlers,
    temporal: {
      address: str('TEMPORAL_ADDRESS', '127.0.0.1:7233'),
      namespace: str('TEMPORAL_NAMESPACE', 'default'),
      taskQueue: str('TEMPORAL_TASK_QUEUE', 'capi-upgrade-orchestrator'),
      visibilityListsPerSecond: int('TEMPORAL_VISIBILITY_LISTS_PER_SECOND', 50, 1, 10_000),
      ...temporalSecurity(),
      reloadIntervalMs: duration('TEMPORAL_CREDENTIALS_RELOAD_INTERVAL', 30_000, 1_000, 3_600_000),
    },
    ops: { host: str('OPS_SERVER_HOST', '0.0.0.0'), port: int('OPS_SERVER_PORT', 8080, 0, 65535) },
    ...(env.TEMPORAL_SDK_METRICS_ADDRESS ? { temporalSdkMetricsAddress: env.TEMPORAL_SDK_METRICS_ADDRESS } : {}),
    ...(env.WORKFLOW_BUNDLE_PATH ? { workflowBundlePath: env.WORKFLOW_BUNDLE_PATH } : {}),
    nodeUpgradeJob: nodeUpgradeJob(),
    ...notificationWebhook(),
    worker,
    ...(versioning.versioning ? { workerVersioning: versioning.versioning } : {}),
    workerDrainTimeoutMs: versioning.drainTimeoutMs,
    requestChecks: requestChecks(),
    nodeUpgraderNamespace: nodeUpgraderNamespace(),
  };
  if (problems.length > 0) throw new ConfigError(problems);
  return config;
}
