// Prometheus metrics the activities observe. They are registered on the
// process's registry by ops/metrics.ts (served at /metrics), so that no
// activity imports the operations layer.
import { Counter, Histogram } from 'prom-client';

export const nodeDrainDuration = new Histogram({
  name: 'capi_upgrade_node_drain_duration_seconds',
  help: 'Wall time from the start of a node drain (kept across retried attempts and workers) to the end of each attempt, by result (drained, failed, cancelled).',
  labelNames: ['result'] as const,
  buckets: [0.1, 0.5, 1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600],
  registers: [],
});

export const notificationsSent = new Counter({
  name: 'capi_upgrade_notifications_total',
  help: 'Phase-change notifications to NOTIFICATION_WEBHOOK_URL, by result (delivered, failed: every try refused or unreachable).',
  labelNames: ['result'] as const,
  registers: [],
});
