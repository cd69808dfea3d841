// One hook call as CAPI sends it, for every benchmark that drives the hook
// server: the same client, so their figures compare.
import { type Agent, request as httpsRequest } from 'node:https';
import { sampleRequest } from '../../support/capi-fixtures.ts';

export const REQUEST_TIMEOUT_MS = 15_000;

/**
 * The GenerateUpgradePlan body both benchmarks send: a four-minor chain, the
 * control plane and its workers still on v1.29.0, the target v1.33.0.
 */
export function chainedPlanRequestBody(): Buffer {
  return Buffer.from(
    JSON.stringify({
      ...sampleRequest('GenerateUpgradePlan'),
      fromControlPlaneKubernetesVersion: 'v1.29.0',
      fromWorkersKubernetesVersion: 'v1.29.0',
      toKubernetesVersion: 'v1.33.0',
    }),
  );
}

export interface Target {
  port: number;
  /** PEM of the CA that signed the server's certificate. */
  ca: string;
  /** A keep-alive pool, or false for a new TLS connection per request. */
  agent: Agent | false;
}

/**
 * One POST as CAPI's Go client sends it: a JSON body and no Content-Type
 * header. Resolves with the parsed body of a 200 answer whose status is
 * Success; anything else rejects, so a benchmark never counts a failure as
 * throughput.
 */
export function postHook(target: Target, path: string, body: Buffer): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      {
        host: '127.0.0.1',
        port: target.port,
        path,
        method: 'POST',
        ca: target.ca,
        agent: target.agent,
        headers: { 'Content-Length': body.length },
        timeout: REQUEST_TIMEOUT_MS,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('error', reject);
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          if (res.statusCode !== 200) return reject(new Error(`HTTP ${res.statusCode}: ${text.slice(0, 160)}`));
          let parsed: Record<string, unknown>;
          try {
            parsed = JSON.parse(text) as Record<string, unknown>;
          } catch {
            return reject(new Error(`response is not JSON: ${text.slice(0, 160)}`));
          }
          if (parsed.status !== 'Success')
            return reject(new Error(`status ${JSON.stringify(parsed.status)}: ${String(parsed.message)}`));
          resolve(parsed);
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no response within ${REQUEST_TIMEOUT_MS} ms`)));
    req.on('error', reject);
    req.end(body);
  });
}
