// Calls the hook server the way CAPI's runtime client does
// (internal/runtime/client): HTTPS verified against the ExtensionConfig's
// caBundle, POST with a JSON body and no headers, `?timeout=<duration>`.
import { request } from 'node:https';
import { request as httpRequest } from 'node:http';
import type { PeerCertificate, TLSSocket } from 'node:tls';

export interface CallOptions {
  ca?: string;
  cert?: string;
  key?: string;
  method?: string;
  timeout?: string;
  /** Raw body to send instead of JSON-encoding `body`. */
  raw?: string | Buffer;
  headers?: Record<string, string>;
  /** Fresh TLS session each call (no keep-alive), as after CAPI's client cache expires. */
  agent?: false;
}

export interface CallResult<T = Record<string, unknown>> {
  statusCode: number;
  headers: Record<string, string | string[] | undefined>;
  body: T;
  text: string;
  peerCertificate?: PeerCertificate;
}

export async function callHook<T = Record<string, unknown>>(
  baseUrl: string,
  path: string,
  body: unknown,
  opts: CallOptions = {},
): Promise<CallResult<T>> {
  const url = new URL(path, baseUrl);
  if (opts.timeout !== undefined) url.searchParams.set('timeout', opts.timeout);
  const payload = opts.raw ?? (body === undefined ? '' : JSON.stringify(body));
  const send = url.protocol === 'https:' ? request : httpRequest;
  return await new Promise((resolve, reject) => {
    const req = send(
      url,
      {
        method: opts.method ?? 'POST',
        agent: false,
        headers: { 'content-length': Buffer.byteLength(payload), ...opts.headers },
        ...(url.protocol === 'https:'
          ? {
              ca: opts.ca,
              cert: opts.cert,
              key: opts.key,
              servername: url.hostname === '127.0.0.1' ? undefined : url.hostname,
            }
          : {}),
      },
      (res) => {
        const chunks: Buffer[] = [];
        const peer = url.protocol === 'https:' ? (res.socket as TLSSocket).getPeerCertificate() : undefined;
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let parsed: unknown = undefined;
          try {
            parsed = text ? JSON.parse(text) : undefined;
          } catch {
            parsed = undefined;
          }
          resolve({
            statusCode: res.statusCode ?? 0,
            headers: res.headers,
            body: parsed as T,
            text,
            ...(peer ? { peerCertificate: peer } : {}),
          });
        });
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}
