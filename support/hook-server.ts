// The real hook server as the benchmarks start it in-process, and the
// serving certificate it (and controller-runtime's webhook server) reads.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { HookRegistry } from '../src/api/hooks/registry.ts';
import type { LifecycleHandlers } from '../src/api/handlers/lifecycle/routes.ts';
import { upgradePlanHandlers } from '../src/api/handlers/upgrade-plan/generate-upgrade-plan.ts';
import { noInPlaceHandlers, nonBlockingLifecycleHandlers } from './stub-handlers.ts';
import { startHookServer, type HookServer } from '../src/api/http/server.ts';
import { parseConfig } from '../src/config/index.ts';
import { createCertificateAuthority, issueCertificate } from '../src/local/certs.ts';

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
export function startBenchHookServer(
  certDir: string | undefined,
  logLevel: string,
  /** The lifecycle handlers instead of the non-blocking ones (a bench that drives the upgrade handlers). */
  lifecycle: LifecycleHandlers = nonBlockingLifecycleHandlers,
): Promise<HookServer> {
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
      lifecycle,
      upgradePlan: upgradePlanHandlers,
      inPlace: noInPlaceHandlers,
    },
  });
}
