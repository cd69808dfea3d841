// The operations endpoint: plain HTTP on its own port (OPS_SERVER_PORT), for
// the kubelet's probes and Prometheus. Kept off the hook port so probes and
// scrapes need no client certificate and never queue behind hook calls.
//   /livez   200 while the process serves at all; 503 once a liveness check fails
//            (a worker that stopped), so the kubelet restarts the container.
//   /readyz  200 when every readiness check passes; the body lists each check,
//            including informational ones (Temporal reachability) that never
//            fail readiness: the api must keep answering "retry later" while
//            Temporal is down, and a Service without endpoints would not.
//   /metrics Prometheus text format.
//   /version the build (src/version.ts) and role of this process, as JSON.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { BuildInfo } from '../version.ts';
import { registry } from './metrics.ts';

export interface HealthCheck {
  name: string;
  /** undefined when healthy, else why not (a short, stable phrase). */
  check(): string | undefined;
  /** Shown in the /readyz body, never fails it. */
  informational?: boolean;
}

export interface OpsServerOptions {
  host: string;
  port: number;
  live: HealthCheck[];
  ready: HealthCheck[];
  /** What /version answers (404 without). */
  build?: BuildInfo & { role: string };
}

export interface OpsServer {
  url: string;
  close(): Promise<void>;
}

function evaluate(checks: HealthCheck[]): { ok: boolean; checks: Record<string, string> } {
  let ok = true;
  const out: Record<string, string> = {};
  for (const c of checks) {
    let problem: string | undefined;
    try {
      problem = c.check();
    } catch (err) {
      problem = `check failed: ${err instanceof Error ? err.message : String(err)}`;
    }
    out[c.name] = problem ?? 'ok';
    if (problem !== undefined && !c.informational) ok = false;
  }
  return { ok, checks: out };
}

export async function startOpsServer(opts: OpsServerOptions): Promise<OpsServer> {
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD' }).end();
      return;
    }
    if (path === '/livez' || path === '/readyz') {
      const { ok, checks } = evaluate(path === '/livez' ? opts.live : opts.ready);
      const body = JSON.stringify({ status: ok ? 'ok' : 'failing', checks });
      res.writeHead(ok ? 200 : 503, { 'content-type': 'application/json' }).end(body);
      return;
    }
    if (path === '/version' && opts.build) {
      const { version, role, buildId, node } = opts.build;
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ version, role, buildId, node }));
      return;
    }
    if (path === '/metrics') {
      registry.metrics().then(
        (text) => res.writeHead(200, { 'content-type': registry.contentType }).end(text),
        (err: unknown) =>
          res.writeHead(500, { 'content-type': 'text/plain' }).end(`metrics unavailable: ${String(err)}`),
      );
      return;
    }
    res
      .writeHead(404, { 'content-type': 'text/plain' })
      .end(`no such path: ${path}; try /livez, /readyz, /metrics, /version\n`);
  });
  // Probes are tiny and frequent: don't let idle keep-alive sockets pile up.
  server.keepAliveTimeout = 5_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  const host = opts.host === '0.0.0.0' || opts.host === '::' ? 'localhost' : opts.host;
  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
