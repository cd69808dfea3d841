// Prometheus metrics of this process, served at /metrics on the ops port
// (src/ops/ops-server.ts). Names follow Prometheus conventions: a
// `capi_upgrade_` prefix, base units (seconds), `_total` on counters. The
// Temporal SDK's own runtime metrics (worker slots, task latencies) are served
// by its core on a port of their own (TEMPORAL_SDK_METRICS_ADDRESS).
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { nodeDrainDuration, notificationsSent } from '../activities/metrics.ts';

export const registry = new Registry();
// process_* and nodejs_* as every Node exporter names them (dashboards expect those names).
collectDefaultMetrics({ register: registry });

/** Hook calls answer in milliseconds; CAPI's own deadline is 1–30 s. */
const HOOK_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

export type HookAnswer = 'success' | 'failure' | 'retry';

export const hookRequestDuration = new Histogram({
  name: 'capi_upgrade_hook_request_duration_seconds',
  help: 'Time to answer a Runtime Extension hook call, by hook and answer (success, failure, retry: a blocking hook answering Success with retryAfterSeconds > 0).',
  labelNames: ['hook', 'answer'] as const,
  buckets: HOOK_BUCKETS,
  registers: [registry],
});

export const hookRequestBodyBytes = new Histogram({
  name: 'capi_upgrade_hook_request_body_bytes',
  help: 'Size of each hook request body read (Discovery included), by hook: what HOOK_SERVER_BODY_LIMIT_BYTES is sized from (docs/limits.md).',
  labelNames: ['hook'] as const,
  // 1 KiB to 16 MiB by 4×: real CAPI calls sit in the first few buckets.
  buckets: [1024, 4096, 16_384, 65_536, 262_144, 1_048_576, 4_194_304, 16_777_216],
  registers: [registry],
});

export const hookBodiesRefused = new Counter({
  name: 'capi_upgrade_hook_bodies_refused_total',
  help: 'Hook requests refused for their body, by hook and reason (too_large: 413 over the limit; busy: 503, no room among the body bytes in flight).',
  labelNames: ['hook', 'reason'] as const,
  registers: [registry],
});

export type TemporalCallResult = 'ok' | 'not_found' | 'refused' | 'unavailable' | 'error';

export const temporalRequestDuration = new Histogram({
  name: 'capi_upgrade_temporal_request_duration_seconds',
  help: 'Time of a call to the Temporal frontend made while answering a hook, by result (ok, not_found, refused: a permanent gRPC error, unavailable: no answer within the deadline, error).',
  labelNames: ['result'] as const,
  buckets: HOOK_BUCKETS,
  registers: [registry],
});

/** Always 1: the labels say which build runs (src/version.ts), as Prometheus' own `*_build_info` do. */
export const buildInfoGauge = new Gauge({
  name: 'capi_upgrade_build_info',
  help: "Always 1, labelled with the running build: version (the image's CAPI_UPGRADE_VERSION, or package.json's with -dev), role, build_id (Worker Versioning), node (Node.js).",
  labelNames: ['version', 'role', 'build_id', 'node'] as const,
  registers: [registry],
});

export const temporalReachable = new Gauge({
  name: 'capi_upgrade_temporal_reachable',
  help: '1 when the last probe of the Temporal frontend (GetSystemInfo, every 10 s) answered, else 0.',
  registers: [registry],
});

export const upgradesByPhase = new Gauge({
  name: 'capi_upgrade_cluster_upgrades',
  help: 'Running cluster upgrade workflows by phase (from Temporal visibility, refreshed every 30 s).',
  labelNames: ['phase'] as const,
  registers: [registry],
});

export const upgradesDelayed = new Gauge({
  name: 'capi_upgrade_cluster_upgrades_delayed',
  help: 'Running cluster upgrades not started `delayedAfter` past their upgradeAt and not failed yet (the memo says delayed; from Temporal visibility, refreshed every 30 s).',
  registers: [registry],
});

export const upgradeReadinessChecks = new Gauge({
  name: 'capi_upgrade_cluster_upgrade_readiness_checks',
  help: "Cluster upgrades waiting to start, by readiness check (plan, removed-apis, drain, capacity, version-skew, health, alerts, calendar) and that check's verdict in their last re-check (Ready, Blocked, Unknown; from the memos in Temporal visibility, refreshed every 30 s).",
  labelNames: ['check', 'verdict'] as const,
  registers: [registry],
});

export const machineUpdatesInFlight = new Gauge({
  name: 'capi_upgrade_machine_updates_in_flight',
  help: 'Running in-place machine update workflows by phase (from Temporal visibility, refreshed every 30 s).',
  labelNames: ['phase'] as const,
  registers: [registry],
});

export const rolloutClusters = new Gauge({
  name: 'capi_upgrade_rollout_clusters',
  help: "Clusters of each running fleet rollout by state: pending, upgrading, done, failed, skipped (from the rollouts' memos in Temporal visibility, refreshed every 30 s).",
  labelNames: ['rollout', 'state'] as const,
  registers: [registry],
});

// Defined beside the activities that observe them (activities import nothing above themselves).
registry.registerMetric(nodeDrainDuration);
registry.registerMetric(notificationsSent);

export type ClientRefusal = 'no_certificate' | 'untrusted_certificate' | 'subject_not_allowed' | 'handshake_failed';

export const hookClientsRefused = new Counter({
  name: 'capi_upgrade_hook_clients_refused_total',
  help: 'Connections to the hook server refused before any request was read, by reason (no_certificate, untrusted_certificate: mutual TLS; subject_not_allowed: a valid certificate not on HOOK_CLIENT_ALLOWED_SUBJECTS, answered 403; handshake_failed: any other TLS handshake error, e.g. plain HTTP or a client that does not trust our certificate).',
  labelNames: ['reason'] as const,
  registers: [registry],
});

export type RequestCheckResult = 'passed' | 'refused' | 'unavailable';

export const hookRequestChecks = new Counter({
  name: 'capi_upgrade_hook_request_checks_total',
  help: 'Hook requests checked against the management cluster before a write (docs/request-checks.md), by hook and result (passed; refused: the request does not describe what CAPI is doing, answered Failure; unavailable: the management cluster could not be read, answered retry).',
  labelNames: ['hook', 'result'] as const,
  registers: [registry],
});
