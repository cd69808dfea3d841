// The removed-API gate's activity: GET /metrics from the workload kube-apiserver
// (with the workload cluster's kubeconfig, as the health checks reach it),
// streamed through domain/deprecated-apis.ts's scanner with a byte cap; the
// read stops once the metric's family has been read. Needs `get` on the
// nonResourceURL /metrics in the workload cluster (config/workload).
import { request, type RequestOptions } from 'node:https';
import { STATUS_CODES } from 'node:http';
import type { KubeConfig } from '@kubernetes/client-node';
import { ApplicationFailure } from '@temporalio/common';
import { DeprecatedApiScanner, MAX_METRICS_BYTES, type DeprecatedApiScan } from '../domain/deprecated-apis.ts';
import { trimTrailing } from '../domain/strings.ts';
import type { ClusterRef } from '../model/cluster-upgrade.ts';
import { currentReadScope } from '../platform/kube/read-scope.ts';
import { readLimitsOf } from '../platform/kube/workload-kube-config.ts';
import { heartbeating } from './heartbeat.ts';
import { workloadKubeConfig } from '../platform/kube/workload-clusters.ts';
import type { UpgradeActivities } from './upgrade-types.ts';

/** Failure type: the API server answered /metrics with a status a retry cannot change (401, 403, 404). */
export const METRICS_REFUSED = 'WorkloadMetricsRefused';
/** Failure type: /metrics is longer than MAX_METRICS_BYTES before the metric's family ended. */
export const METRICS_TOO_LARGE = 'WorkloadMetricsTooLarge';

const REFUSED_HINT: Record<number, string> = {
  401: 'the workload credentials were not accepted',
  403: 'the workload identity may not get the nonResourceURL /metrics (config/workload grants it)',
  404: 'this API server does not serve /metrics',
};

/**
 * Streams `/metrics` of the API server `kc` points at through the scanner; resolves with the scan.
 * Bounded: at most `maxBytes` read, then a non-retryable failure; stops early once the family is read.
 */
export async function scanApiServerMetrics(
  kc: KubeConfig,
  maxBytes = MAX_METRICS_BYTES,
  signal?: AbortSignal,
): Promise<DeprecatedApiScan> {
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw ApplicationFailure.nonRetryable('the workload kubeconfig names no cluster', METRICS_REFUSED);
  const url = new URL(cluster.server);
  url.pathname = `${trimTrailing(url.pathname, '/')}/metrics`;
  const options: RequestOptions = {
    method: 'GET',
    headers: { Accept: 'text/plain;version=0.0.4', 'Accept-Encoding': 'identity' },
  };
  await kc.applyToHTTPSOptions(options);
  const agent = options.agent;
  try {
    return await new Promise<DeprecatedApiScan>((resolve, reject) => {
      const stop = signal ?? currentReadScope()?.signal;
      const req = request(url, { ...options, ...(stop ? { signal: stop } : {}) }, (res) => {
        const code = res.statusCode ?? 0;
        if (code !== 200) {
          res.resume();
          const text = `GET /metrics: ${code} ${STATUS_CODES[code] ?? ''}`.trim();
          const hint = REFUSED_HINT[code];
          reject(
            hint
              ? ApplicationFailure.nonRetryable(`${text} (${hint})`, METRICS_REFUSED)
              : ApplicationFailure.retryable(text, 'WorkloadMetricsUnavailable'),
          );
          return;
        }
        const scanner = new DeprecatedApiScanner();
        let read = 0;
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          read += Buffer.byteLength(chunk);
          scanner.push(chunk);
          if (scanner.done) {
            res.destroy();
            resolve(scanner.end());
          } else if (read > maxBytes) {
            res.destroy();
            reject(
              ApplicationFailure.nonRetryable(
                `GET /metrics: more than ${maxBytes} bytes before apiserver_requested_deprecated_apis ended`,
                METRICS_TOO_LARGE,
              ),
            );
          }
        });
        res.on('end', () => resolve(scanner.end()));
        res.on('error', reject);
      });
      // An API server that stops sending: the activity's heartbeat would notice, but free the socket too.
      req.setTimeout(30_000, () =>
        req.destroy(ApplicationFailure.retryable('GET /metrics: no data for 30s', 'WorkloadMetricsUnavailable')),
      );
      // One that sends a byte now and then: the whole read has the workload reads' deadline.
      const deadline = readLimitsOf(kc).limits.timeoutMs;
      const whole = setTimeout(
        () =>
          req.destroy(
            ApplicationFailure.retryable(
              `GET /metrics: no whole answer within ${deadline / 1000}s (WORKLOAD_READ_TIMEOUT_SECONDS)`,
              'WorkloadMetricsUnavailable',
            ),
          ),
        deadline,
      );
      req.on('close', () => clearTimeout(whole));
      req.on('error', reject);
      req.end();
    });
  } finally {
    (agent as { destroy?: () => void } | undefined)?.destroy?.();
  }
}

export function createDeprecatedApiActivities(management: KubeConfig): Pick<UpgradeActivities, 'checkDeprecatedApis'> {
  return {
    async checkDeprecatedApis(input: { cluster: ClusterRef }): Promise<DeprecatedApiScan> {
      return await heartbeating(async () => {
        const kc = await workloadKubeConfig(management, input.cluster);
        return await scanApiServerMetrics(kc);
      });
    },
  };
}
