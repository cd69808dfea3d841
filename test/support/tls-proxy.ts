// A TLS front for the run's Temporal dev server (which speaks plaintext only):
// terminates TLS (optionally requiring a client certificate from a given CA)
// and pipes the bytes to the server, recording which client certificate each
// accepted connection presented. What a TLS-terminating load balancer in front
// of a self-hosted Temporal does.
import { connect } from 'node:net';
import { createServer, type Server, type TLSSocket } from 'node:tls';
import type { AddressInfo } from 'node:net';

export interface TlsProxy {
  address: string;
  /** Subject CN of the client certificate of every accepted connection, in order. */
  clients: string[];
  /** Handshakes refused (no or untrusted client certificate). */
  refused: number;
  close(): Promise<void>;
}

export async function startTlsProxy(options: {
  target: string;
  cert: string;
  key: string;
  /** PEM of the CA whose client certificates are required; unset = no client certificate asked. */
  clientCa?: string;
}): Promise<TlsProxy> {
  const [host, port] = [
    options.target.slice(0, options.target.lastIndexOf(':')),
    options.target.slice(options.target.lastIndexOf(':') + 1),
  ];
  const sockets = new Set<{ destroy(): void }>();
  const proxy: TlsProxy = { address: '', clients: [], refused: 0, close: async () => undefined };
  const server: Server = createServer(
    {
      cert: options.cert,
      key: options.key,
      ALPNProtocols: ['h2'],
      ...(options.clientCa ? { ca: options.clientCa, requestCert: true, rejectUnauthorized: true } : {}),
    },
    (tls: TLSSocket) => {
      const peer = tls.getPeerCertificate();
      proxy.clients.push(typeof peer.subject?.CN === 'string' ? peer.subject.CN : '');
      const upstream = connect(Number(port), host);
      sockets.add(tls).add(upstream);
      const drop = () => {
        tls.destroy();
        upstream.destroy();
        sockets.delete(tls);
        sockets.delete(upstream);
      };
      tls.on('error', drop).on('close', drop);
      upstream.on('error', drop).on('close', drop);
      tls.pipe(upstream).pipe(tls);
    },
  );
  server.on('tlsClientError', () => proxy.refused++);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  proxy.address = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  proxy.close = () =>
    new Promise<void>((resolve) => {
      for (const s of sockets) s.destroy();
      server.close(() => resolve());
    });
  return proxy;
}
