// `make image`: the Dockerfile's runtime image without Docker, written by the project's own
// OCI writer (scripts/oci) from what this machine reaches:
//   - Node 24's `node` binary from the npm package the bootstrap installs (scripts/env.sh's
//     tool cache, node-24/), at /usr/local/bin/node as in node:24-bookworm-slim;
//   - glibc, libgcc, libstdc++ and the CA certificates from Debian bookworm's packages
//     (`apt-get download` of the versions pinned in scripts/image-debs.json, checked against
//     their sha256, then `dpkg-deb -x`), laid out merged-/usr as Debian's images are;
//   - dist/ compiled into a scratch directory (never the checkout's dist/, which may hold stale
//     files), the prebuilt workflow bundle, upgrade-node.sh, package.json, and production
//     node_modules installed from package-lock.json into the tool cache (never the repository's);
//   - the Dockerfile's runtime stage: ENV, labels, USER 1000:1000, WORKDIR /app, EXPOSE 9443,
//     ENTRYPOINT (test/nodes/image.test.ts checks the two agree, listing both).
// Reproducible: the app layer's entries and `created` take SOURCE_DATE_EPOCH (the Makefile passes
// the commit's time), the dependency layers' entries 0; entries are sorted, owners fixed; the same
// inputs give the same manifest digest.
//   node scripts/image.ts [--version v0.2.0] [--build-id abc1234] [--revision <sha>] [--out out]
//                         [--push host:port/name[:tag]] [--ca registry-ca.pem] [--pin]
// Writes <out>/image (an OCI layout, tagged with the version or `latest`) and <out>/image.oci.tar
// (the same layout as one tar: skopeo's and containerd's `oci-archive`), prints the digest and sizes.
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { join, posix, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { buildImage, type ImageConfig, type LayerEntry, type OciImage } from './oci/image.ts';
import { writeOciLayout } from './oci/layout.ts';
import { pushImage } from './oci/push.ts';
import { sourceDateEpoch, tar, type TarEntry } from './oci/tar.ts';
import {
  candidatePins,
  DEB_PINS_FILE,
  imageCache,
  log,
  prepareInputs,
  readDebPins,
  type ImageInputs,
} from './image/inputs.ts';

/** The Dockerfile's build args. */
export interface ImageArgs {
  version: string;
  buildId: string;
  revision: string;
}

// --- the layers --------------------------------------------------------------------------------

/** Debian's merged /usr: /bin, /sbin, /lib* are links into /usr (as in node:24-bookworm-slim). */
const MERGED = ['bin', 'sbin', 'lib', 'lib64'];
/** Documentation dpkg would install but the image does not need; copyright files stay. */
function debKeeps(path: string): boolean {
  if (/^usr\/share\/(man|info|lintian|locale)(\/|$)/.test(path)) return false;
  if (path.startsWith('usr/share/doc/')) return /^usr\/share\/doc\/[^/]+\/copyright$/.test(path);
  return true;
}

interface WalkOptions {
  /** Mode as on disk (a .deb's own), or normalised to 0755/0644 (umask-independent). */
  keepModes: boolean;
}

/** Every entry under `dir` as layer entries at `prefix/…`, owned by root. */
function walk(dir: string, prefix: string, options: WalkOptions, out: LayerEntry[] = []): LayerEntry[] {
  for (const name of readdirSync(dir).sort()) {
    const from = join(dir, name);
    const path = prefix === '' ? name : `${prefix}/${name}`;
    const stat = lstatSync(from);
    const exec = (stat.mode & 0o111) !== 0;
    if (stat.isSymbolicLink()) out.push({ type: 'symlink', path, target: readlinkSync(from) });
    else if (stat.isDirectory()) {
      out.push({ type: 'dir', path, mode: options.keepModes ? stat.mode & 0o7777 : 0o755 });
      walk(from, path, options, out);
    } else if (stat.isFile())
      out.push({ type: 'file', path, from, mode: options.keepModes ? stat.mode & 0o7777 : exec ? 0o755 : 0o644 });
    else throw new Error(`${from}: neither a file, a directory nor a symlink`);
  }
  return out;
}

function merged(path: string): string {
  const [first, ...rest] = path.split('/');
  return first !== undefined && MERGED.includes(first) && rest.length > 0 ? ['usr', first, ...rest].join('/') : path;
}

/** The base: the packages' files, users, /tmp and the CA bundle update-ca-certificates would write. */
function baseLayer(debs: ImageInputs['debs']): LayerEntry[] {
  const byPath = new Map<string, LayerEntry>();
  for (const { pin, dir } of debs) {
    for (const entry of walk(dir, '', { keepModes: true })) {
      // /lib, /bin… themselves become the links into /usr below.
      if (entry.type === 'dir' && MERGED.includes(entry.path)) continue;
      const path = merged(entry.path);
      if (!debKeeps(path)) continue;
      const seen = byPath.get(path);
      if (seen) {
        if (seen.type === 'dir' && entry.type === 'dir') continue;
        throw new Error(`${pin.name} and another package both ship /${path}`);
      }
      byPath.set(path, { ...entry, path });
    }
  }
  const text = (path: string, content: string, mode = 0o644): LayerEntry => ({
    type: 'file',
    path,
    data: Buffer.from(content),
    mode,
  });
  const certs = [...byPath.values()]
    .filter((e) => e.type === 'file' && /^usr\/share\/ca-certificates\/.+\.crt$/.test(e.path))
    .map((e) => ('from' in e ? readFileSync(e.from, 'utf8') : 'data' in e ? Buffer.from(e.data).toString('utf8') : ''))
    .map((pem) => (pem.endsWith('\n') ? pem : `${pem}\n`));
  if (certs.length === 0)
    throw new Error('no certificates under /usr/share/ca-certificates: is ca-certificates pinned?');
  const extra: LayerEntry[] = [
    ...MERGED.map((d): LayerEntry => ({ type: 'symlink', path: d, target: `usr/${d}` })),
    text('etc/passwd', 'root:x:0:0:root:/root:/usr/sbin/nologin\nnode:x:1000:1000::/home/node:/usr/sbin/nologin\n'),
    text('etc/group', 'root:x:0:\nnode:x:1000:\n'),
    text('etc/nsswitch.conf', 'passwd: files\ngroup: files\nhosts: files dns\n'),
    text('etc/ssl/certs/ca-certificates.crt', certs.join('')),
    { type: 'dir', path: 'root', mode: 0o700 },
    { type: 'dir', path: 'home/node', mode: 0o755, uid: 1000, gid: 1000 },
    { type: 'dir', path: 'tmp', mode: 0o1777 },
  ];
  for (const e of extra) {
    if (byPath.has(e.path) && !(e.path === 'etc/ssl/certs' && e.type === 'dir'))
      throw new Error(`a package already ships /${e.path}`);
    byPath.set(e.path, e);
  }
  return [...byPath.values()];
}

/** The Dockerfile's runtime stage, with its build args (test/nodes/image.test.ts compares the two). */
export function runtimeConfig(args: ImageArgs, nodeVersion: string): ImageConfig {
  return {
    env: [
      // node:24-bookworm-slim's own.
      'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
      `NODE_VERSION=${nodeVersion.replace(/^v/, '')}`,
      // The Dockerfile's ENV lines, in order.
      'NODE_OPTIONS=--max-semi-space-size=4 --max-old-space-size=256',
      'MALLOC_ARENA_MAX=2',
      `TEMPORAL_WORKER_BUILD_ID=${args.buildId}`,
      `CAPI_UPGRADE_VERSION=${args.version}`,
      'NODE_ENV=production',
      'WORKFLOW_BUNDLE_PATH=/app/dist/workflow-bundle.js',
      'HOOK_SERVER_PORT=9443',
    ],
    labels: {
      'org.opencontainers.image.title': 'capi-upgrade-orchestrator',
      'org.opencontainers.image.description':
        'Cluster API Runtime Extension: cluster upgrades and in-place machine updates as Temporal workflows',
      'org.opencontainers.image.version': args.version,
      'org.opencontainers.image.revision': args.revision,
      'org.opencontainers.image.source': 'https://github.com/capi-upgrade-orchestrator/capi-upgrade-orchestrator',
      'org.opencontainers.image.licenses': 'Apache-2.0',
    },
    user: '1000:1000',
    workingDir: '/app',
    exposedPorts: ['9443/tcp'],
    entrypoint: ['node', 'dist/main.js'],
  };
}

/** Layers above this size are gzipped once per content (and zlib build), then read from the cache. */
const CACHED_LAYER_BYTES = 16 * 1024 * 1024;

function cachedGzip(tarBytes: Buffer, diffId: string, gzip: (t: Buffer) => Buffer): Buffer {
  if (tarBytes.length < CACHED_LAYER_BYTES) return gzip(tarBytes);
  const dir = join(imageCache(), 'layers');
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `${diffId.slice('sha256:'.length)}-zlib${process.versions.zlib}.gz`);
  // Written whole (a rename), named by what it holds.
  if (existsSync(file)) return readFileSync(file);
  const bytes = gzip(tarBytes);
  writeFileSync(`${file}.tmp`, bytes);
  renameSync(`${file}.tmp`, file);
  return bytes;
}

/** The image: base (Debian), node, production node_modules, the application; bottom first. */
export function assembleImage(inputs: ImageInputs, args: ImageArgs, mtime = sourceDateEpoch()): OciImage {
  const app: LayerEntry[] = [
    { type: 'dir', path: 'app', mode: 0o755 },
    { type: 'file', path: 'app/package.json', from: inputs.app.packageJson, mode: 0o644 },
    ...walk(inputs.app.dist, 'app/dist', { keepModes: false }),
  ];
  return buildImage({
    mtime,
    // The layers made of pinned inputs (the packages, node, the lock's modules) do not take the
    // commit's time: the same pins give the same layers from one commit to the next, so a
    // registry stores them once and a node pulls only the app layer of a new release.
    layerMtimes: [0, 0, 0],
    layers: [
      baseLayer(inputs.debs),
      [{ type: 'file', path: 'usr/local/bin/node', from: inputs.node.binary, mode: 0o755 }],
      walk(inputs.app.nodeModules, 'app/node_modules', { keepModes: false }),
      app,
    ],
    config: runtimeConfig(args, inputs.node.version),
    compress: cachedGzip,
  });
}

// --- output --------------------------------------------------------------------------------

/** The layout directory as one tar (an `oci-archive`). */
function layoutArchive(dir: string, mtime: number): Buffer {
  const entries: TarEntry[] = [];
  const add = (rel: string) => {
    const from = join(dir, rel);
    if (lstatSync(from).isDirectory()) {
      entries.push({ type: 'dir', path: rel });
      for (const name of readdirSync(from)) add(posix.join(rel, name));
    } else entries.push({ type: 'file', path: rel, data: readFileSync(from) });
  };
  for (const name of readdirSync(dir)) add(name);
  return tar(entries, { mtime });
}

export interface ImageSizes {
  /** Manifest, config and gzipped layers: what a registry stores and a node pulls. */
  compressed: number;
  /** The layers' tars: what the image occupies unpacked. */
  uncompressed: number;
}

export function imageSizes(image: OciImage): ImageSizes {
  return {
    compressed: image.manifest.size + image.config.size + image.layers.reduce((n, l) => n + l.size, 0),
    uncompressed: image.diffSizes.reduce((n, s) => n + s, 0),
  };
}

/** `host:port/name[:tag]` → the registry URL, repository and tag (`fallbackTag` when none). */
export function parsePushTarget(
  reference: string,
  fallbackTag: string,
): { url: string; repository: string; tag: string } {
  const slash = reference.indexOf('/');
  if (slash <= 0) throw new Error(`IMAGE=${reference}: expected host[:port]/name[:tag]`);
  const host = reference.slice(0, slash);
  const rest = reference.slice(slash + 1);
  const colon = rest.lastIndexOf(':');
  const [repository, tag] =
    colon > rest.lastIndexOf('/') ? [rest.slice(0, colon), rest.slice(colon + 1)] : [rest, fallbackTag];
  return { url: `https://${host}`, repository, tag };
}

const MiB = (n: number) => `${(n / 1024 / 1024).toFixed(1)} MiB`;

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      version: { type: 'string', default: '' },
      'build-id': { type: 'string', default: '' },
      revision: { type: 'string', default: '' },
      out: { type: 'string', default: 'out' },
      push: { type: 'string', default: '' },
      ca: { type: 'string', default: '' },
      pin: { type: 'boolean', default: false },
    },
  });
  if (values.pin) {
    const pins = candidatePins(readDebPins().map((p) => p.name));
    writeFileSync(DEB_PINS_FILE, `${JSON.stringify({ suite: 'bookworm', packages: pins }, null, 2)}\n`);
    for (const p of pins) log(`pinned ${p.name} ${p.version} sha256:${p.sha256}`);
    return;
  }
  const args: ImageArgs = { version: values.version, buildId: values['build-id'], revision: values.revision };
  const began = performance.now();
  const out = resolve(values.out);
  mkdirSync(out, { recursive: true });
  const work = mkdtempSync(join(out, '.image-build-'));
  try {
    const inputs = prepareInputs(work);
    const prepared = performance.now();
    const mtime = sourceDateEpoch();
    const image = assembleImage(inputs, args, mtime);
    const layoutDir = join(out, 'image');
    rmSync(layoutDir, { recursive: true, force: true });
    const tag = args.version || 'latest';
    writeOciLayout(layoutDir, [{ image, tag }]);
    writeFileSync(join(out, 'image.oci.tar'), layoutArchive(layoutDir, mtime));
    const sizes = imageSizes(image);
    const seconds = (performance.now() - began) / 1000;
    console.log(`image ${image.manifest.digest}`);
    console.log(`  layout      ${layoutDir} (tag ${tag}); archive ${join(out, 'image.oci.tar')}`);
    console.log(`  size        ${MiB(sizes.compressed)} compressed, ${MiB(sizes.uncompressed)} uncompressed`);
    console.log(
      `  node        ${inputs.node.version}; debs ${inputs.debs.map((d) => `${d.pin.name}=${d.pin.version}`).join(' ')}`,
    );
    console.log(
      `  built in    ${seconds.toFixed(1)} s (inputs ${((prepared - began) / 1000).toFixed(1)} s, layers ${((performance.now() - prepared) / 1000).toFixed(1)} s)`,
    );
    if (values.push) {
      const target = parsePushTarget(values.push, tag);
      const pushed = await pushImage({
        ...target,
        ...(values.ca ? { caPem: readFileSync(values.ca, 'utf8') } : {}),
        image,
      });
      console.log(
        `  pushed      ${target.url.slice('https://'.length)}/${target.repository}:${target.tag} = ${pushed.reference}`,
      );
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

if (process.argv[1] && resolve(process.argv[1]) === new URL(import.meta.url).pathname) {
  main().catch((err: unknown) => {
    console.error(`make image: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  });
}
