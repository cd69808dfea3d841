// A plain HTTPS GET trusting only the CA given, for tests that read back what a local
// registry or mirror serves without going through the code under test.
import type { IncomingHttpHeaders } from 'node:http';
import { request } from 'node:https';

export interface HttpsReply {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

/** `path` is sent as it is (no URL normalisation), so a test can ask for `/a/../b`. */
export function httpsGet(
  base: string,
  path: string,
  options: { caPem?: string; headers?: Record<string, string> } = {},
): Promise<HttpsReply> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        hostname,
        port,
        path,
        method: 'GET',
        ca: options.caPem,
        headers: options.headers,
        agent: false,
        timeout: 10_000,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }),
        );
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`GET ${base}${path}: no answer in 10 s`)));
    req.on('error', reject);
    req.end();
  });
}
