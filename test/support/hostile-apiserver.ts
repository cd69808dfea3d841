// A workload cluster's API server as a hostile tenant would run it: HTTPS on
// 127.0.0.1 with the test CA, answering every request the way `answer` says —
// too much, too slowly, never ending, malformed or deeply nested JSON, the wrong
// content type, gzip nobody asked for, a redirect — or honestly. It counts the
// sockets still open, so a test can check that the reader closed its own.
import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { gzipSync } from 'node:zlib';
import { testPki } from './pki.ts';

export type HostileAnswer =
  | 'honest'
  | 'huge'
  | 'slow'
  | 'trickle'
  | 'malformed'
  | 'deep'
  | 'dense'
  | 'wrong-type'
  | 'gzip'
  | 'redirect'
  | 'endless-pages';

export const HOSTILE_ANSWERS: readonly HostileAnswer[] = [
  'huge',
  'slow',
  'trickle',
  'malformed',
  'deep',
  'dense',
  'wrong-type',
  'gzip',
  'redirect',
  'endless-pages',
];

export interface HostileApiServer {
  url: string;
  /** How every request is answered from now on. */
  answer: HostileAnswer;
  /** Bytes `huge` streams (default 400 MiB, stopped early when the reader hangs up). */
  hugeBytes: number;
  /** How long `slow` waits before an honest answer (default 3 s). */
  slowMs: number;
  /** Requests received, by path. */
  requests: string[];
  /** Builds what the answers need ahead (the gzip bomb): building it holds the event loop for a moment. */
  prepare(): void;
  /** Sockets open now (idle keep-alive ones included). */
  openSockets(): number;
  /** Answers started and not yet finished or cut off. */
  openAnswers(): number;
  /**
   * No answer open and none started or ended for `ms`: reads a caller left behind (a failed check
   * does not wait for its other lists) have settled, and none still queued will be answered the
   * next test's way and shared with it.
   */
  quietFor(ms: number): boolean;
  /** The most answers open at once so far. */
  mostOpenAnswers(): number;
  /** Bytes written to sockets that have closed, and to open ones. */
  bytesSent(): number;
  /** A kubeconfig (YAML) for this server with the test CA and a bearer token. */
  kubeconfig(): string;
  close(): Promise<void>;
}

const JSON_TYPE = { 'content-type': 'application/json' };
// 32 MiB of zeros in ~32 KiB: inflated, four times the answer limit.
let bomb: Buffer | undefined;
const makeBomb = (): Buffer => gzipSync(Buffer.alloc(32 * 1024 * 1024), { level: 9 });

/** A list of `kind` with honest, small objects, for the honest answer and the `slow` one. */
function honestList(path: string, items: number): string {
  const kind = path.split('/').pop() ?? 'objects';
  const list = Array.from({ length: items }, (_, i) => ({
    metadata: { name: `${kind}-${i}`, namespace: 'default', uid: `uid-${i}`, resourceVersion: '1' },
  }));
  return JSON.stringify({ kind: 'List', apiVersion: 'v1', metadata: { resourceVersion: '1' }, items: list });
}

function streamHuge(res: ServerResponse, total: number): void {
  res.writeHead(200, JSON_TYPE);
  const item = Buffer.from('{"metadata":{"name":"lease-0000000000","namespace":"default"}},');
  const chunk = Buffer.concat(Array.from({ length: 1024 }, () => item));
  let sent = 0;
  res.write('{"kind":"LeaseList","apiVersion":"coordination.k8s.io/v1","metadata":{},"items":[');
  const pump = (): void => {
    while (sent < total && !res.destroyed) {
      sent += chunk.length;
      if (!res.write(chunk)) {
        res.once('drain', pump);
        return;
      }
    }
    if (!res.destroyed) res.end('{}]}');
  };
  pump();
}

function trickle(res: ServerResponse): void {
  res.writeHead(200, JSON_TYPE);
  res.write('{"kind":"List","items":[');
  const timer = setInterval(() => res.write(' '), 5_000);
  res.on('close', () => clearInterval(timer));
}

export async function startHostileApiServer(): Promise<HostileApiServer> {
  const pki = testPki();
  const sockets = new Set<Socket>();
  let closedBytes = 0;
  let pageToken = 0;
  const state = {
    answer: 'honest' as HostileAnswer,
    hugeBytes: 400 * 1024 * 1024,
    slowMs: 3_000,
    requests: [] as string[],
  };
  let open = 0;
  let most = 0;
  let lastActivity = Date.now();
  const handle = (req: IncomingMessage, res: ServerResponse): void => {
    const path = new URL(req.url ?? '/', 'https://x').pathname;
    state.requests.push(path);
    most = Math.max(most, ++open);
    lastActivity = Date.now();
    res.on('close', () => {
      open--;
      lastActivity = Date.now();
    });
    switch (state.answer) {
      case 'honest':
        res.writeHead(200, JSON_TYPE).end(honestList(path, 3));
        return;
      case 'slow': {
        const timer = setTimeout(() => res.writeHead(200, JSON_TYPE).end(honestList(path, 3)), state.slowMs);
        res.on('close', () => clearTimeout(timer));
        return;
      }
      case 'huge':
        streamHuge(res, state.hugeBytes);
        return;
      case 'trickle':
        trickle(res);
        return;
      case 'malformed':
        res.writeHead(200, JSON_TYPE).end('{"kind":"List","items":[{"metadata":{"name":"a"}},{"metadata":');
        return;
      case 'deep':
        res.writeHead(200, JSON_TYPE).end(`{"kind":"List","items":[${'['.repeat(50_000)}${']'.repeat(50_000)}]}`);
        return;
      case 'dense':
        // 6 MiB of `{}`: under the byte limit, three million objects to build.
        res.writeHead(200, JSON_TYPE).end(`{"kind":"List","items":[${'{},'.repeat(2 * 1024 * 1024)}{}]}`);
        return;
      case 'wrong-type':
        res.writeHead(200, { 'content-type': 'text/html' }).end('<html><body>{"items":[]}</body></html>');
        return;
      case 'gzip':
        bomb ??= makeBomb();
        res.writeHead(200, { ...JSON_TYPE, 'content-encoding': 'gzip' }).end(bomb);
        return;
      case 'redirect':
        res.writeHead(302, { location: `https://127.0.0.1:1${path}` }).end();
        return;
      case 'endless-pages':
        // Empty pages, each with a new continue token, for ever.
        res
          .writeHead(200, JSON_TYPE)
          .end(JSON.stringify({ kind: 'List', metadata: { continue: `t${++pageToken}` }, items: [] }));
        return;
    }
  };
  const server: Server = createServer({ key: pki.serving.keyPem, cert: pki.serving.certPem }, handle);
  server.on('secureConnection', (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => {
      closedBytes += socket.bytesWritten;
      sockets.delete(socket);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  const url = `https://127.0.0.1:${port}`;
  return Object.assign(state, {
    url,
    prepare: () => {
      bomb ??= makeBomb();
    },
    openSockets: () => sockets.size,
    openAnswers: () => open,
    quietFor: (ms: number) => open === 0 && Date.now() - lastActivity >= ms,
    mostOpenAnswers: () => most,
    bytesSent: () => closedBytes + [...sockets].reduce((n, s) => n + s.bytesWritten, 0),
    kubeconfig: () =>
      [
        'apiVersion: v1',
        'kind: Config',
        'clusters:',
        `- name: hostile`,
        '  cluster:',
        `    server: ${url}`,
        `    certificate-authority-data: ${Buffer.from(pki.ca.certPem).toString('base64')}`,
        'users:',
        '- name: admin',
        '  user:',
        '    token: hostile-test-token',
        'contexts:',
        '- name: hostile',
        '  context: {cluster: hostile, user: admin}',
        'current-context: hostile',
        '',
      ].join('\n'),
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  });
}
