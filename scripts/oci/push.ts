// Pushes an image to a registry by the OCI distribution API over HTTPS, trusting only the CA
// given (never an insecure skip): each blob the registry lacks (HEAD) is uploaded whole
// (POST an upload, PUT it with ?digest=), then the manifest is PUT under its tag, or its
// digest when there is no tag. No credentials: the registries this serves are local ones.
import { Agent, request } from 'node:https';
import type { IncomingHttpHeaders } from 'node:http';
import type { Blob } from './blob.ts';
import type { OciImage } from './image.ts';

export interface RegistryTarget {
  /** `https://<host>:<port>` */
  url: string;
  /** The CA that signed the registry's serving certificate, PEM; none: Node's own CA store. */
  caPem?: string;
}

export interface PushOptions extends RegistryTarget {
  /** e.g. `kube-apiserver` or `kubernetes/kube-apiserver`. */
  repository: string;
  tag?: string;
  image: OciImage;
}

export interface PushedImage {
  /** The manifest's digest, as the registry reported it. */
  digest: string;
  /** `<host:port>/<repository>@sha256:…` */
  reference: string;
  /** The blobs that were uploaded (the others were there already). */
  uploaded: string[];
}

// The distribution spec's repository name grammar.
const REPOSITORY = /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:\/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$/;
const TAG = /^\w[\w.-]{0,127}$/;

/** `<host:port>/<repository>@<digest>`, the pinned reference a pod spec or kubeadm takes. */
export function digestReference(registry: string, repository: string, digest: string): string {
  const host = registry.includes('://') ? new URL(registry).host : registry;
  if (!/^sha256:[0-9a-f]{64}$/.test(digest)) throw new Error(`not a sha256 digest: '${digest}'`);
  return `${host}/${repository}@${digest}`;
}

export async function pushImage(options: PushOptions): Promise<PushedImage> {
  const { repository, tag, image } = options;
  if (!REPOSITORY.test(repository)) throw new Error(`not a repository name: '${repository}'`);
  if (tag !== undefined && !TAG.test(tag)) throw new Error(`not a tag: '${tag}'`);
  // Its own agent, destroyed at the end: no keep-alive socket outlives the push.
  const agent = new Agent({
    ...(options.caPem !== undefined ? { ca: options.caPem } : {}),
    keepAlive: true,
    maxSockets: 1,
  });
  const call = (method: string, url: string, headers: Record<string, string | number> = {}, body?: Buffer) =>
    send(agent, method, url, headers, body);
  const base = new URL(`/v2/${repository}/`, options.url);
  try {
    const uploaded: string[] = [];
    for (const b of [image.config, ...image.layers]) {
      if ((await call('HEAD', new URL(`blobs/${b.digest}`, base).href)).status === 200) continue;
      await uploadBlob(call, base, b);
      uploaded.push(b.digest);
    }
    const put = await call(
      'PUT',
      new URL(`manifests/${tag ?? image.manifest.digest}`, base).href,
      { 'content-type': image.manifest.mediaType, 'content-length': image.manifest.size },
      image.manifest.bytes,
    );
    expectStatus(put, 201, `PUT manifest ${repository}:${tag ?? image.manifest.digest}`);
    const digest = String(put.headers['docker-content-digest'] ?? image.manifest.digest);
    if (digest !== image.manifest.digest)
      throw new Error(`${options.url} stored ${repository}'s manifest as ${digest}, not ${image.manifest.digest}`);
    return { digest, reference: digestReference(options.url, repository, digest), uploaded };
  } finally {
    agent.destroy();
  }
}

type Call = (method: string, url: string, headers?: Record<string, string | number>, body?: Buffer) => Promise<Reply>;

async function uploadBlob(call: Call, base: URL, b: Blob): Promise<void> {
  const started = await call('POST', new URL('blobs/uploads/', base).href, { 'content-length': 0 });
  expectStatus(started, 202, `POST blob upload for ${b.digest}`);
  const location = started.headers.location;
  if (!location) throw new Error(`the registry started an upload for ${b.digest} without a Location`);
  // The Location may be relative and may carry the registry's own query (its upload state).
  const target = new URL(location, base);
  target.searchParams.set('digest', b.digest);
  const put = await call(
    'PUT',
    target.href,
    { 'content-type': 'application/octet-stream', 'content-length': b.size },
    b.bytes,
  );
  expectStatus(put, 201, `PUT blob ${b.digest}`);
}

interface Reply {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

function send(
  agent: Agent,
  method: string,
  url: string,
  headers: Record<string, string | number>,
  body?: Buffer,
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method, agent, headers, timeout: 60_000 }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`${method} ${url}: no answer in 60 s`)));
    req.on('error', reject);
    req.end(body);
  });
}

function expectStatus(reply: Reply, status: number, what: string): void {
  if (reply.status !== status)
    throw new Error(`${what}: HTTP ${reply.status} (expected ${status}): ${reply.body.toString('utf8').slice(0, 500)}`);
}
