// Every environment variable src/ reads, declared once: name, type, default, bounds, meaning.
// Unset and empty are the same. A default that depends on other variables (TLS_CERT_FILE,
// TEMPORAL_TLS, HOOK_SERVER_BODY_BYTES_IN_FLIGHT) is left out here and worked out by the reader
// that uses the variable; its description says so. docs/configuration.md lists these names
// (test/unit/docs-configuration.test.ts holds the two together).
import { DEFAULT_JOB_IMAGE } from '../domain/node-binaries.ts';
import { DEFAULT_NODE_UPGRADER_NAMESPACE } from '../model/machine-update.ts';
import { DEFAULT_WORKLOAD_READ_LIMITS as W } from '../platform/kube/workload-limits.ts';
import { DEFAULT_DEPLOYMENT_NAME } from '../platform/temporal/worker-versioning.ts';
import { boolean, dns1123Label, duration, integer, oneOf, text } from './schema.ts';
import { DEFAULT_BODY_MAX_JSON_ITEMS } from './server.ts';

const MiB = 1024 * 1024;

/** A version a label, a log line and a memo can carry: vMAJOR.MINOR.PATCH with an optional suffix. */
export const RELEASE_VERSION = /^v\d+\.\d+\.\d+(?:[-+][\dA-Za-z.+-]{1,64})?$/;
const port = (d: number, description: string) => integer({ minimum: 0, maximum: 65535, default: d, description });

/** The processes' settings (src/main.ts: `ROLE` api, worker or all). */
const PROCESS = {
  ROLE: oneOf(['all', 'api', 'worker'], { default: 'all', description: 'api (hook server), worker or all' }),
  LOG_LEVEL: text({ default: 'info', description: 'pino log level' }),
  TEMPORAL_ADDRESS: text({ default: '127.0.0.1:7233', description: 'Temporal frontend' }),
  TEMPORAL_NAMESPACE: text({ default: 'default', description: 'Temporal namespace' }),
  TEMPORAL_TASK_QUEUE: text({ default: 'capi-upgrade-orchestrator', description: 'the workers’ task queue' }),
  TEMPORAL_VISIBILITY_LISTS_PER_SECOND: integer({
    minimum: 1,
    maximum: 10_000,
    default: 50,
    description: 'api: visibility Lists per second for its upgrade views',
  }),
  TEMPORAL_TLS: boolean({ description: 'TLS to the frontend; default: on when any TEMPORAL_TLS_* or API key is set' }),
  TEMPORAL_TLS_CA_FILE: text({ description: 'PEM of the CA that signed the frontend’s certificate' }),
  TEMPORAL_TLS_SERVER_NAME: text({ description: 'name to verify the frontend’s certificate against' }),
  TEMPORAL_TLS_CERT_FILE: text({ description: 'mTLS client certificate (with TEMPORAL_TLS_KEY_FILE)' }),
  TEMPORAL_TLS_KEY_FILE: text({ description: 'mTLS client key (with TEMPORAL_TLS_CERT_FILE)' }),
  TEMPORAL_API_KEY_FILE: text({ description: 'file holding a Temporal Cloud API key' }),
  TEMPORAL_API_KEY: text({ description: 'a Temporal Cloud API key', secret: true }),
  TEMPORAL_CREDENTIALS_RELOAD_INTERVAL: duration({
    minimum: 1_000,
    maximum: 3_600_000,
    default: 30_000,
    description: 'how often the TLS and API key files are re-read',
  }),
  TEMPORAL_SDK_METRICS_ADDRESS: text({ description: 'host:port of the Temporal SDK’s Prometheus exporter (worker)' }),
  WORKFLOW_BUNDLE_PATH: text({ description: 'prebuilt workflow bundle; unset: bundled from source' }),
  TEMPORAL_WORKER_BUILD_ID: text({ trim: true, description: 'the worker’s build id; unset: unversioned' }),
  TEMPORAL_WORKER_DEPLOYMENT_NAME: text({
    default: DEFAULT_DEPLOYMENT_NAME,
    trim: true,
    description: 'the worker’s Worker Deployment',
  }),
  TEMPORAL_DEPLOYMENT_NAME: text({
    trim: true,
    description: 'set by Temporal’s Worker Controller; wins over TEMPORAL_WORKER_DEPLOYMENT_NAME',
  }),
  WORKER_DRAIN_TIMEOUT: duration({
    minimum: 0,
    maximum: 24 * 3_600_000,
    default: 0,
    trim: true,
    expected: 'a duration up to 24h, such as 20m',
    description: 'how long a stopping versioned worker keeps polling for its pinned runs',
  }),
  OPS_SERVER_HOST: text({ default: '0.0.0.0', description: 'listen address of /livez, /readyz, /metrics' }),
  OPS_SERVER_PORT: port(8080, 'port of /livez, /readyz, /metrics (0: any free port)'),
  NODE_UPGRADE_JOB_IMAGE: text({ default: DEFAULT_JOB_IMAGE, description: 'image of the job executor, by digest' }),
  NODE_UPGRADE_JOB_ALLOW_UNPINNED_IMAGE: boolean({ default: false, description: 'accept an image by tag' }),
  NODE_UPGRADE_BINARY_SOURCE: text({ description: 'https:// or file:/// source of the job executor’s binaries' }),
  NODE_UPGRADE_BINARY_SOURCE_ALLOW_HTTP: boolean({ default: false, description: 'accept an http:// source' }),
  NODE_UPGRADE_CHECKSUMS_FILE: text({
    pattern: /^\//,
    expected: 'an absolute path',
    description: 'sha256 of each binary per version and architecture',
  }),
  NODE_UPGRADE_BINARY_VOLUME: text({ description: 'pre-staged binaries mounted into the Job (air-gapped)' }),
  NODE_UPGRADE_KUBEADM_IGNORE_PREFLIGHT_ERRORS: text({
    pattern: /^\s*[A-Za-z\d][A-Za-z\d.-]*\s*(?:,\s*[A-Za-z\d][A-Za-z\d.-]*\s*)*$/,
    expected: 'comma-separated kubeadm preflight check names (e.g. SystemVerification)',
    description: 'kubeadm preflight checks every node upgrade ignores',
  }),
  NOTIFICATION_WEBHOOK_URL: text({
    expected: 'an http:// or https:// URL',
    secret: true,
    description: 'phase changes of cluster upgrades are POSTed here as CloudEvents (worker)',
  }),
  WORKER_MAX_CONCURRENT_ACTIVITIES: integer({ minimum: 1, maximum: 10_000, description: 'default: the SDK’s' }),
  WORKER_MAX_CONCURRENT_WORKFLOW_TASKS: integer({ minimum: 2, maximum: 10_000, description: 'default: the SDK’s' }),
  WORKER_MAX_CACHED_WORKFLOWS: integer({ minimum: 0, maximum: 100_000, description: 'default: the SDK’s' }),
  // One GET per waiting upgrade per interval; the watch heartbeats every 3 s whatever the interval.
  NODE_UPGRADE_POLL_INTERVAL: duration({
    minimum: 100,
    maximum: 5_000,
    default: 500,
    description: 'how often a waiting node upgrade’s Job or NodeUpgradeRequest is read',
  }),
  HOOK_REQUEST_CHECKS: oneOf(['on', 'off'], {
    default: 'on',
    description: 'check requests that start or signal a workflow against the management cluster',
  }),
  NODE_UPGRADER_NAMESPACE: dns1123Label({
    default: DEFAULT_NODE_UPGRADER_NAMESPACE,
    expected: 'a namespace name (a DNS-1123 label)',
    description: 'where management-executor node upgraders renew their Leases',
  }),
  MANAGEMENT_KUBECONFIG: text({ description: 'the management cluster’s kubeconfig; unset: in-cluster' }),
  KUBERNETES_SERVICE_HOST: text({ description: 'set by Kubernetes in a pod: in-cluster configuration exists' }),
  CAPI_UPGRADE_VERSION: text({
    pattern: RELEASE_VERSION,
    expected: "vMAJOR.MINOR.PATCH (the image's VERSION build arg)",
    description: 'the release this process reports; unset: package.json’s version marked -dev',
  }),
} as const;

/** What one read of a workload cluster may cost (src/platform/kube/workload-limits.ts). */
const WORKLOAD_READS = {
  WORKLOAD_READ_MAX_BYTES: integer({
    minimum: 64 * 1024,
    maximum: 1024 * MiB,
    default: W.maxResponseBytes,
    description: 'bytes one answer may hold',
  }),
  WORKLOAD_READ_MAX_JSON_ITEMS: integer({
    minimum: 1024,
    maximum: 64 * MiB,
    default: W.maxJsonItems,
    description: 'JSON items one answer may hold',
  }),
  WORKLOAD_READ_MAX_JSON_DEPTH: integer({
    minimum: 16,
    maximum: 1000,
    default: W.maxJsonDepth,
    description: 'JSON nesting one answer may hold',
  }),
  WORKLOAD_LIST_PAGE_SIZE: integer({ minimum: 10, maximum: 5_000, default: W.pageSize, description: 'per page' }),
  WORKLOAD_LIST_MAX_OBJECTS: integer({
    minimum: 100,
    maximum: 10_000_000,
    default: W.maxListObjects,
    description: 'objects one list may hold',
  }),
  WORKLOAD_READ_TIMEOUT_SECONDS: integer({
    minimum: 1,
    maximum: 600,
    default: W.timeoutMs / 1000,
    description: 'deadline of one request',
  }),
  WORKLOAD_READS_PER_CLUSTER: integer({ minimum: 1, maximum: 64, default: W.perCluster, description: 'in flight' }),
  WORKLOAD_READS_MAX: integer({ minimum: 1, maximum: 4096, default: W.overall, description: 'in flight, in all' }),
  WORKLOAD_READ_BUDGET_BYTES: integer({
    minimum: MiB,
    maximum: 16 * 1024 * MiB,
    default: W.budgetBytes,
    description: 'bytes of answers held at once',
  }),
} as const;

/** The hook server (src/api): listen address, TLS, client certificates, request bounds. */
const HOOK_SERVER = {
  HOOK_SERVER_HOST: text({ default: '0.0.0.0', description: 'listen address' }),
  HOOK_SERVER_PORT: port(9443, 'listen port'),
  TLS_CERT_DIR: text({ default: '/tmp/k8s-webhook-server/serving-certs', description: 'holds tls.crt and tls.key' }),
  TLS_CERT_FILE: text({ description: 'serving certificate; default: $TLS_CERT_DIR/tls.crt' }),
  TLS_KEY_FILE: text({ description: 'serving key; default: $TLS_CERT_DIR/tls.key' }),
  TLS_CLIENT_CA_FILE: text({ description: 'set: mutual TLS with client certificates from this CA' }),
  HOOK_CLIENT_ALLOWED_SUBJECTS: text({ description: 'comma-separated CN=name, DNS=name or name allowed to call' }),
  TLS_RELOAD_INTERVAL_SECONDS: integer({
    minimum: 1,
    maximum: 3600,
    default: 10,
    description: 'how often certificate files are re-read',
  }),
  HOOK_SERVER_INSECURE_HTTP: boolean({ default: false, description: 'development only: plain HTTP' }),
  HOOK_SERVER_BODY_LIMIT_BYTES: integer({
    minimum: 1024,
    maximum: 256 * MiB,
    description: 'one body limit for every hook; default: 2 MiB lifecycle and plan hooks, 6 MiB in-place',
  }),
  HOOK_SERVER_BODY_BYTES_IN_FLIGHT: integer({
    minimum: 64 * 1024,
    maximum: 1024 * MiB,
    description: 'body bytes handled at once; default: 7 MiB, or the largest body limit plus 1 MiB',
  }),
  HOOK_SERVER_BODY_MAX_JSON_ITEMS: integer({
    minimum: 1024,
    maximum: 64 * MiB,
    default: DEFAULT_BODY_MAX_JSON_ITEMS,
    description: 'JSON items a body may hold',
  }),
  HOOK_SERVER_REQUEST_TIMEOUT: duration({
    minimum: 1_000,
    maximum: 300_000,
    default: 30_000,
    description: 'time to receive a whole request',
  }),
  HOOK_SERVER_MAX_CONNECTIONS: integer({ minimum: 1, maximum: 65_536, default: 512, description: 'open at once' }),
  HOOK_UNAVAILABLE_RETRY_AFTER_SECONDS: integer({
    minimum: 1,
    maximum: 3600,
    default: 30,
    description: 'retryAfterSeconds while Temporal cannot be reached',
  }),
  HOOK_WAIT_RETRY_AFTER_MAX_SECONDS: integer({
    minimum: 10,
    maximum: 3600,
    default: 60,
    description: 'most retryAfterSeconds of a gate that waits for a known time',
  }),
  HOOKS_DISABLED: text({ description: 'comma-separated hook names left out of discovery' }),
} as const;

/** The operator CLI (src/cli) and `make dev` (src/local). */
const TOOLS = {
  CAPI_UPGRADES_INVOKED_AS: text({ description: 'the name the CLI was run by (bin/capi-upgrades sets it)' }),
  USER: text({ description: 'set by the shell: who approves a wave, unless --by' }),
  CAPI_UO_DATA_DIR: text({ description: 'make dev’s data directory; default: the checkout’s .data' }),
  MANAGEMENT: oneOf(['embedded', 'none'], { default: 'embedded', description: 'make dev’s management cluster' }),
  TEMPORAL_PORT: port(7233, 'make dev: the dev server’s frontend port (0: any free port)'),
  TEMPORAL_UI_PORT: port(8233, 'make dev: the Temporal Web UI’s port (0: any free port)'),
  TEMPORAL_CLI: text({ default: 'temporal', description: 'make dev: the temporal CLI that runs the dev server' }),
} as const;

export const VARIABLES = { ...PROCESS, ...WORKLOAD_READS, ...HOOK_SERVER, ...TOOLS } as const;
export type VariableName = keyof typeof VARIABLES;

/** One set per hook: `<HOOK>` is the hook in UPPER_SNAKE_CASE (server.ts hookEnvName). */
export const HOOK_VARIABLES = {
  'HOOK_<HOOK>_NAME': dns1123Label({ description: 'handler name; default: the hook in kebab-case' }),
  'HOOK_<HOOK>_ENABLED': boolean({ default: true, description: 'announced in discovery' }),
  'HOOK_<HOOK>_TIMEOUT_SECONDS': integer({ minimum: 0, maximum: 30, default: 10, description: 'in discovery' }),
  'HOOK_<HOOK>_FAILURE_POLICY': oneOf(['Fail', 'Ignore'], {
    description: 'announced in discovery; default: the hook’s own',
  }),
} as const;
export type HookVariableName = keyof typeof HOOK_VARIABLES;
