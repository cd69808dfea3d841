// Owns the listening socket: HTTPS with certificates from files (reloaded on
// rotation), optional mutual TLS (TLS_CLIENT_CA_FILE, with an optional allow-list
// of client certificate subjects), or plain HTTP behind an explicit dev flag.
import { randomUUID } from 'node:crypto';
import type { Server as HttpsServer } from 'node:https';
import Fastify, { LogController, type FastifyInstance } from 'fastify';
import { DISCOVERY_BODY_LIMIT_BYTES, type ServerConfig } from '../../config/server.ts';
import hookApp, { type HookAppOptions } from './app.ts';
import { allowListHook, refusalLog, watchHandshakeFailures } from './client-refusals.ts';
import { readTlsMaterial, watchCertificates, type CertificateReloader } from './tls.ts';

export interface HookServer {
  app: FastifyInstance;
  /** e.g. https://127.0.0.1:9443 */
  url: string;
  reloader?: CertificateReloader;
  close(): Promise<void>;
}

export interface StartHookServerOptions {
  server: ServerConfig;
  logLevel?: string;
  /** Where log lines go (default stdout); tests read them. */
  logStream?: { write(line: string): void };
  app: Omit<HookAppOptions, 'server'>;
}

/**
 * Node's own bounds on a connection: headers within 10 s (a slowloris never reaches the body
 * budget), the whole request within requestTimeoutMs (checked every second, not every 30 s, so a
 * slow body gives its reservation back on time), the TLS handshake within 10 s.
 */
function connectionLimits(server: ServerConfig) {
  return {
    headersTimeout: Math.min(10_000, server.requestTimeoutMs),
    connectionsCheckingInterval: 1_000,
    handshakeTimeout: 10_000,
  };
}

export async function startHookServer(opts: StartHookServerOptions): Promise<HookServer> {
  const { server } = opts;
  const tlsFiles = {
    certFile: server.certFile,
    keyFile: server.keyFile,
    ...(server.clientCaFile ? { clientCaFile: server.clientCaFile } : {}),
  };
  const common = {
    logger: {
      level: opts.logLevel ?? 'info',
      redact: ['req.headers.authorization'],
      ...(opts.logStream ? { stream: opts.logStream } : {}),
    },
    // The hook layer logs one line per call with what matters; no per-request noise.
    logController: new LogController({ disableRequestLogging: true, requestIdLogLabel: 'requestId' }),
    // Hook routes set their own (app.ts); anything else needs no body.
    bodyLimit: DISCOVERY_BODY_LIMIT_BYTES,
    requestTimeout: server.requestTimeoutMs,
    genReqId: (req: { headers: Record<string, string | string[] | undefined> }) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && given.length <= 128 ? given : randomUUID();
    },
    // Hooks answer well within CAPI's 30 s maximum; nothing legitimate is slower.
    connectionTimeout: 60_000,
  };
  let app: FastifyInstance;
  if (server.insecureHttp) {
    app = Fastify({ ...common, http: connectionLimits(server) });
  } else {
    app = Fastify({
      ...common,
      https: {
        ...connectionLimits(server),
        ...readTlsMaterial(tlsFiles),
        // Mutual TLS when a client CA is configured: no valid client certificate, no handshake.
        ...(server.clientCaFile ? { requestCert: true, rejectUnauthorized: true } : {}),
        minVersion: 'TLSv1.2',
      },
    }) as unknown as FastifyInstance;
  }
  app.server.maxConnections = server.maxConnections;
  if (!server.insecureHttp) {
    // Refused callers are logged and counted: a scan or a misconfigured CAPI shows up.
    const refusals = refusalLog(app.log);
    watchHandshakeFailures(app.server, refusals);
    if (server.clientAllowedSubjects) app.addHook('onRequest', allowListHook(server.clientAllowedSubjects, refusals));
  }
  await app.register(hookApp, { ...opts.app, server });
  let reloader: CertificateReloader | undefined;
  if (!server.insecureHttp) {
    reloader = watchCertificates(
      tlsFiles,
      server.tlsReloadIntervalMs,
      (material) => {
        (app.server as HttpsServer).setSecureContext(material);
        app.log.info(
          { certFile: server.certFile, ...(server.clientCaFile ? { clientCaFile: server.clientCaFile } : {}) },
          'serving certificate or client CA reloaded',
        );
      },
      (err) => app.log.warn({ err: String(err) }, 'certificate files unreadable; keeping the current certificate'),
    );
  }
  app.addHook('onClose', async () => reloader?.stop());
  const address = await app.listen({ host: server.host, port: server.port });
  const scheme = server.insecureHttp ? 'http' : 'https';
  const port = new URL(address).port;
  const host = server.host === '0.0.0.0' || server.host === '::' ? 'localhost' : server.host;
  return {
    app,
    url: `${scheme}://${host.includes(':') ? `[${host}]` : host}:${port}`,
    ...(reloader ? { reloader } : {}),
    close: () => app.close(),
  };
}
