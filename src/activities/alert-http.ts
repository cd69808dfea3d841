// One bounded HTTP(S) request to Prometheus or Alertmanager: a timeout over the whole exchange,
// the answer read as a stream and dropped past a cap, no redirects followed, and every failure
// named by a short stable cause (it reaches CAPI's conditions): no addresses, ports or timings.
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';

export interface AlertHttpOptions {
  timeoutMs: number;
  maxBytes: number;
  /** Bearer token (never logged, never part of a cause). */
  token?: string;
  /** PEM CA bundle to trust instead of the system's. */
  ca?: string;
}

export type AlertHttpResult = { ok: true; status: number; body: string } | { ok: false; cause: string };

const CAUSES: Record<string, string> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset',
  ENOTFOUND: 'host not found',
  EAI_AGAIN: 'host not found',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  ETIMEDOUT: 'connection timed out',
  DEPTH_ZERO_SELF_SIGNED_CERT: 'TLS certificate not trusted (set alertCa)',
  SELF_SIGNED_CERT_IN_CHAIN: 'TLS certificate not trusted (set alertCa)',
  UNABLE_TO_VERIFY_LEAF_SIGNATURE: 'TLS certificate not trusted (set alertCa)',
  UNABLE_TO_GET_ISSUER_CERT_LOCALLY: 'TLS certificate not trusted (set alertCa)',
  ERR_TLS_CERT_ALTNAME_INVALID: 'TLS certificate does not name the host',
  CERT_HAS_EXPIRED: 'TLS certificate expired',
};

export async function boundedRequest(
  url: string,
  opts: AlertHttpOptions & { method: 'GET' | 'POST' | 'DELETE'; body?: string },
): Promise<AlertHttpResult> {
  const target = new URL(url);
  const request = target.protocol === 'https:' ? httpsRequest : httpRequest;
  const headers: Record<string, string> = { accept: 'application/json' };
  if (opts.token) headers.authorization = `Bearer ${opts.token}`;
  if (opts.body !== undefined) {
    headers['content-type'] = 'application/json';
    headers['content-length'] = String(Buffer.byteLength(opts.body));
  }
  return await new Promise<AlertHttpResult>((resolve) => {
    let settled = false;
    const done = (result: AlertHttpResult) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      req.destroy();
      resolve(result);
    };
    const req = request(
      target,
      { method: opts.method, headers, ...(opts.ca ? { ca: opts.ca } : {}), agent: false },
      (res: IncomingMessage) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > opts.maxBytes) done({ ok: false, cause: `answer larger than ${opts.maxBytes >> 20} MiB` });
          else chunks.push(chunk);
        });
        res.on('end', () =>
          done({ ok: true, status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }),
        );
        res.on('error', () => done({ ok: false, cause: 'connection reset' }));
      },
    );
    const timer = setTimeout(
      () => done({ ok: false, cause: `no answer within ${opts.timeoutMs / 1000}s` }),
      opts.timeoutMs,
    );
    req.on('error', (err: NodeJS.ErrnoException) =>
      done({ ok: false, cause: CAUSES[err.code ?? ''] ?? 'request failed' }),
    );
    req.end(opts.body);
  });
}
