// Helpers shared by the hook-server benchmarks (bench/hooks.ts,
// bench/upgrade-plan-vs-go.ts): one POST as CAPI sends it, a closed-loop
// driver, a serving certificate, percentiles and a plain-text table. Kept
// here so that both scripts measure with exactly the same client.
import { writeFileSync } from 'node:fs';
import { type Agent, request as httpsRequest } from 'node:https';
import { availableParallelism, cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { HookRegistry } from '../src/api/registry.ts';
import { noInPlaceHandlers } from '../src/api/routes/in-place.ts';
import { nonBlockingLifecycleHandlers } from '../src/api/routes/lifecycle.ts';
import { upgradePlanHandlers } from '../src/api/routes/upgrade-plan.ts';
import { startHookServer, type HookServer } from '../src/api/server.ts';
import { parseConfig } from '../src/config/index.ts';
import { createCertificateAuthority, issueCertificate } from '../src/local/certs.ts';
import { sampleRequest } from '../test/support/capi-fixtures.ts';

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

export interface Phase {
  requests: number;
  errors: number;
  /** Error message → count, to print a few samples. */
  errorSamples: Map<string, number>;
  /** Milliseconds, successful requests only, in completion order. */
  latencies: number[];
  seconds: number;
}

/**
 * A closed loop: `concurrency` workers, each sending its next request as soon
 * as the last one is answered, until `seconds` have passed or `maxRequests`
 * were sent (whichever comes first), so a run is bounded in time and count.
 */
export async function closedLoop(
  concurrency: number,
  seconds: number,
  maxRequests: number,
  send: () => Promise<unknown>,
): Promise<Phase> {
  const phase: Phase = { requests: 0, errors: 0, errorSamples: new Map(), latencies: [], seconds: 0 };
  const start = process.hrtime.bigint();
  const deadline = start + BigInt(Math.round(seconds * 1e9));
  let issued = 0;
  const worker = async () => {
    while (issued < maxRequests && process.hrtime.bigint() < deadline) {
      issued++;
      const t0 = process.hrtime.bigint();
      try {
        await send();
        phase.latencies.push(Number(process.hrtime.bigint() - t0) / 1e6);
      } catch (err) {
        phase.errors++;
        const message = err instanceof Error ? err.message : String(err);
        phase.errorSamples.set(message, (phase.errorSamples.get(message) ?? 0) + 1);
      }
      phase.requests++;
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  phase.seconds = Number(process.hrtime.bigint() - start) / 1e9;
  return phase;
}

/**
 * Writes `tls.crt`/`tls.key` for 127.0.0.1 and localhost into `dir` (the
 * names both our server and controller-runtime's webhook server read) and
 * returns the CA PEM the client must trust.
 */
export function writeServingCertificate(dir: string): string {
  const ca = createCertificateAuthority('bench CA');
  const serving = issueCertificate(ca, {
    commonName: 'localhost',
    dnsNames: ['localhost'],
    ipAddresses: ['127.0.0.1'],
    usage: 'server',
  });
  writeFileSync(join(dir, 'tls.key'), serving.keyPem, { mode: 0o600 });
  writeFileSync(join(dir, 'tls.crt'), serving.certPem);
  return ca.certPem;
}

/**
 * The real hook server (TLS, fastify, validation, routes, logging) with the
 * handlers `make dev` wires that need no Temporal, on a free 127.0.0.1 port,
 * serving the `tls.crt`/`tls.key` in `certDir`.
 */
export function startBenchHookServer(certDir: string | undefined, logLevel: string): Promise<HookServer> {
  const config = parseConfig({
    HOOK_SERVER_HOST: '127.0.0.1',
    HOOK_SERVER_PORT: '0',
    TLS_CERT_DIR: certDir,
    LOG_LEVEL: logLevel,
  });
  return startHookServer({
    server: config.server,
    logLevel: config.logLevel,
    app: {
      registry: new HookRegistry(config.handlers),
      lifecycle: nonBlockingLifecycleHandlers,
      upgradePlan: upgradePlanHandlers,
      inPlace: noInPlaceHandlers,
    },
  });
}

/** Runs a benchmark's main: its result is the exit code; a negative one leaves the process running (a forked server). */
export function runMain(main: () => Promise<number>): void {
  main().then(
    (code) => {
      if (code >= 0) process.exitCode = code;
    },
    (err: unknown) => {
      console.error(err instanceof Error ? (err.stack ?? err.message) : String(err));
      process.exitCode = 1;
    },
  );
}

/** The machine a figure was measured on, and how busy it was. */
export function machineLine(loadBefore: number): string {
  return (
    `node ${process.version}, ${availableParallelism()} CPUs (${cpus()[0]?.model.trim() ?? 'unknown'}),` +
    ` ${process.platform}/${process.arch}; 1-min load average ${loadBefore.toFixed(2)} before,` +
    ` ${(loadavg()[0] ?? 0).toFixed(2)} after`
  );
}

/** A numeric command-line option's value, checked against its range. */
export function numberOption(name: string, raw: string, min: number, max: number, integer: boolean): number {
  const n = Number(raw);
  if (!Number.isFinite(n) || n < min || n > max || (integer && !Number.isInteger(n)))
    throw new Error(`--${name} ${JSON.stringify(raw)}: expected ${integer ? 'an integer' : 'a number'} ${min}..${max}`);
  return n;
}

/** Nearest-rank percentile of an ascending array; NaN when empty. */
export function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return NaN;
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[index] ?? NaN;
}

/** Milliseconds with two decimals below 10 ms, one above. */
export const formatMs = (v: number): string => (Number.isNaN(v) ? '-' : v < 10 ? v.toFixed(2) : v.toFixed(1));

/** Aligned columns; the first row is the header. */
export function table(rows: string[][], rightAligned: (column: number) => boolean): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
  const line = (r: string[]) =>
    r.map((cell, i) => (rightAligned(i) ? cell.padStart(widths[i]!) : cell.padEnd(widths[i]!))).join('  ');
  return [line(rows[0]!), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.slice(1).map(line)]
    .map((l) => l.trimEnd())
    .join('\n');
}
