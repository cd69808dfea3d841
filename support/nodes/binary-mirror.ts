// An HTTPS (or, with `plain`, HTTP) mirror of dl.k8s.io's layout for the node-upgrade script's BINARY_SOURCE:
// `<url>/<version>/bin/linux/<arch>/<name>` is the file `<name>` in the directory given for
// that version and arch; anything else is 404 (no listing, no other path). Its certificate
// is from the run's test CA; checksumsText() gives the pinned checksums file
// (docs/node-upgrade-job.md) for what it serves, computed here, not fetched from it.
import { createHash } from 'node:crypto';
import { createReadStream, readFileSync, statSync } from 'node:fs';
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { NODE_BINARIES } from '../../src/domain/node-binaries.ts';
import type { PemPair } from '../../src/local/certs.ts';
import { siteServingCertificate } from './site-tls.ts';

export interface MirroredRelease {
  version: string;
  /** Default amd64. */
  arch?: string;
  /** Holds the release's binaries by name (kubeadm, kubelet, kubectl). */
  dir: string;
}

export interface BinaryMirrorOptions {
  /** The CA that issues its serving certificate (unless plain). */
  ca: PemPair;
  releases: readonly MirroredRelease[];
  /** Default 127.0.0.1. */
  host?: string;
  /** Default a free port. */
  port?: number;
  /** Names in the certificate besides 127.0.0.1 and localhost. */
  ipAddresses?: string[];
  dnsNames?: string[];
  /**
   * Plain HTTP: what a Job image whose wget cannot verify a private CA is given (Debian's
   * busybox verifies only through an `openssl` binary); the pinned checksums still apply.
   */
  plain?: boolean;
}

export interface BinaryMirror {
  /** `https://<host>:<port>`: the BINARY_SOURCE. */
  url: string;
  caPem: string;
  stop(): Promise<void>;
}

const PATH = /^\/(v\d+\.\d+\.\d+)\/bin\/linux\/([a-z0-9]+)\/([A-Za-z0-9][\w.-]*)$/;

export async function startBinaryMirror(options: BinaryMirrorOptions): Promise<BinaryMirror> {
  const host = options.host ?? '127.0.0.1';
  const dirs = new Map(options.releases.map((r) => [`${r.version}/${r.arch ?? 'amd64'}`, r.dir]));
  const ip = /^[\d.]+$/.test(host);
  const tls = siteServingCertificate(options.ca, {
    ipAddresses: [...(options.ipAddresses ?? []), ...(ip ? [host] : [])],
    dnsNames: [...(options.dnsNames ?? []), ...(ip ? [] : [host])],
  });
  const serve = (req: IncomingMessage, res: ServerResponse) => {
    const [, version, arch, name] = PATH.exec(new URL(req.url ?? '/', 'https://mirror').pathname) ?? [];
    const dir = dirs.get(`${version}/${arch}`);
    const file = dir && name ? join(dir, name) : undefined;
    const size = file && (req.method === 'GET' || req.method === 'HEAD') ? fileSize(file) : undefined;
    if (!file || size === undefined) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
      return;
    }
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': size });
    if (req.method === 'HEAD') res.end();
    else createReadStream(file).pipe(res);
  };
  const server = options.plain ? createHttpServer(serve) : createServer({ cert: tls.certPem, key: tls.keyPem }, serve);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `${options.plain ? 'http' : 'https'}://${host}:${port}`,
    caPem: options.ca.certPem,
    stop: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A regular file's size; undefined for a directory, a missing file or anything else. */
function fileSize(file: string): number | undefined {
  try {
    const s = statSync(file);
    return s.isFile() ? s.size : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The checksums file (`<version>/<arch>/<binary>: <sha256>` a line) for kubeadm, kubelet and
 * kubectl of each release: what NODE_UPGRADE_CHECKSUMS_FILE holds.
 */
export function checksumsText(releases: readonly MirroredRelease[]): string {
  const lines = releases.flatMap((r) =>
    NODE_BINARIES.map((name) => {
      const sha = createHash('sha256')
        .update(readFileSync(join(r.dir, name)))
        .digest('hex');
      return `${r.version}/${r.arch ?? 'amd64'}/${name}: ${sha}`;
    }),
  );
  return `# <version>/<arch>/<binary>: <sha256>\n${lines.join('\n')}\n`;
}
