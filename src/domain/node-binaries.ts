// The supply chain of the `job` node-upgrade executor, as pure rules: the
// privileged Job's image is pinned by digest, the Kubernetes binaries come
// from a configured https (or file://, air-gapped) source, and each binary is
// checked against a sha256 pinned per version in the worker's configuration,
// never one fetched from the server that serves the binary.

/**
 * The Job's default image: alpine 3.22.4 by its multi-arch index digest (sh, chroot, sha256sum,
 * mktemp and busybox wget). The digest is the one renovate-pinned public Dockerfiles carry for
 * `alpine:3.22.4`; check it with `crane digest docker.io/library/alpine:3.22.4` before a release.
 */
export const DEFAULT_JOB_IMAGE =
  'docker.io/library/alpine:3.22.4@sha256:310c62b5e7ca5b08167e4384c68db0fd2905dd9c7493756d356e893909057601';

export const DEFAULT_BINARY_SOURCE = 'https://dl.k8s.io/release';

/** The binaries the script installs, in the order it needs them. */
export const NODE_BINARIES = ['kubeadm', 'kubelet', 'kubectl'] as const;
export type NodeBinary = (typeof NODE_BINARIES)[number];

export const NODE_ARCHES = ['amd64', 'arm64', 'ppc64le', 's390x'] as const;

const DIGEST = /@sha256:[0-9a-f]{64}$/;

/** True when `image` names its content by digest (`…@sha256:<64 hex>`), so a moved tag cannot change it. */
export function isPinnedImage(image: string): boolean {
  return DIGEST.test(image);
}

/** Why `source` cannot be the binary source (undefined: it can). https and file:/// only; http on opt-in. */
export function binarySourceProblem(source: string, allowHttp: boolean): string | undefined {
  let url: URL;
  try {
    url = new URL(source);
  } catch {
    return 'is not a URL';
  }
  if (url.username || url.password) return 'must not carry credentials';
  if (url.search || url.hash) return 'must not carry a query or fragment';
  switch (url.protocol) {
    case 'https:':
      return undefined;
    case 'file:':
      return url.host === '' && url.pathname.length > 1 ? undefined : 'must be file:///<absolute directory>';
    case 'http:':
      return allowHttp
        ? undefined
        : 'is plain http: set NODE_UPGRADE_BINARY_SOURCE_ALLOW_HTTP=true to accept it (the pinned checksums still apply)';
    default:
      return 'must be an https:// or file:/// URL';
  }
}

/** Pinned digests: version → `<arch>/<binary>` → sha256 (lowercase hex). */
export type ChecksumTable = ReadonlyMap<string, ReadonlyMap<string, string>>;

/** Largest checksums file read (bytes): a line is ~90 bytes, 12 per version. */
export const MAX_CHECKSUMS_FILE_BYTES = 1024 * 1024;

const CHECKSUM_LINE = /^(v\d+\.\d+\.\d+)\/([a-z0-9]+)\/([a-z]+):\s*["']?([0-9a-fA-F]{64})["']?$/;

/**
 * Parses the checksums file: one `<version>/<arch>/<binary>: <sha256>` per line (a flat YAML map,
 * e.g. `v1.34.2/amd64/kubelet: 0f1e…`); blank and `#` lines ignored. Every bad line is reported,
 * by number (the file holds no secrets, but the messages stay short).
 */
export function parseChecksums(text: string): { table: ChecksumTable; problems: string[] } {
  const table = new Map<string, Map<string, string>>();
  const problems: string[] = [];
  text.split('\n').forEach((raw, i) => {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) return;
    const m = CHECKSUM_LINE.exec(line);
    const [, version, arch, binary, digest] = m ?? [];
    if (!version || !arch || !binary || !digest) {
      problems.push(
        `line ${i + 1}: expected <version>/<arch>/<binary>: <sha256> (e.g. v1.34.2/amd64/kubelet: <64 hex>)`,
      );
      return;
    }
    if (!(NODE_ARCHES as readonly string[]).includes(arch)) {
      problems.push(`line ${i + 1}: arch ${arch} is not one of ${NODE_ARCHES.join(' ')}`);
      return;
    }
    if (!(NODE_BINARIES as readonly string[]).includes(binary)) {
      problems.push(`line ${i + 1}: binary ${binary} is not one of ${NODE_BINARIES.join(' ')}`);
      return;
    }
    let perVersion = table.get(version);
    if (!perVersion) table.set(version, (perVersion = new Map()));
    const key = `${arch}/${binary}`;
    const sha = digest.toLowerCase();
    if (perVersion.has(key) && perVersion.get(key) !== sha) {
      problems.push(`line ${i + 1}: ${version}/${key} is pinned twice, to different digests`);
      return;
    }
    perVersion.set(key, sha);
  });
  return { table, problems };
}

/**
 * The pinned digest of each binary of `version` for `arch`, or what is missing (naming the
 * version, the arch and the binaries): an upgrade to a version nobody pinned never starts.
 */
export function pinnedDigests(
  table: ChecksumTable,
  version: string,
  arch: string,
): { ok: true; digests: Record<NodeBinary, string> } | { ok: false; missing: string } {
  const perVersion = table.get(version);
  if (!perVersion) return { ok: false, missing: `no pinned checksums for ${version}` };
  const absent = NODE_BINARIES.filter((b) => !perVersion.has(`${arch}/${b}`));
  if (absent.length > 0)
    return { ok: false, missing: `no pinned checksum for ${absent.join(', ')} ${version} linux/${arch}` };
  const digests = Object.fromEntries(NODE_BINARIES.map((b) => [b, perVersion.get(`${arch}/${b}`)!]));
  return { ok: true, digests: digests as Record<NodeBinary, string> };
}

/** A volume holding pre-staged binaries for air-gapped sites, mounted read-only into the Job. */
export type BinaryVolume =
  { kind: 'pvc'; claimName: string } | { kind: 'hostPath'; path: string } | { kind: 'image'; reference: string };

/** Where the Job mounts {@link BinaryVolume}; the binary source then defaults to `file://` here. */
export const BINARY_VOLUME_MOUNT = '/node-binaries';

/**
 * Parses NODE_UPGRADE_BINARY_VOLUME: `pvc:<claim>`, `hostPath:<absolute dir>` or
 * `image:<reference@sha256:…>` (an image volume, Kubernetes ≥ 1.33 with ImageVolume).
 */
export function parseBinaryVolume(
  text: string,
  allowUnpinnedImage: boolean,
): { ok: true; volume: BinaryVolume } | { ok: false; problem: string } {
  const colon = text.indexOf(':');
  const kind = colon < 0 ? '' : text.slice(0, colon);
  const value = colon < 0 ? '' : text.slice(colon + 1);
  switch (kind) {
    case 'pvc':
      return /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(value) && value.length <= 253
        ? { ok: true, volume: { kind: 'pvc', claimName: value } }
        : { ok: false, problem: 'pvc:<claim> needs a valid PersistentVolumeClaim name' };
    case 'hostPath':
      return value.startsWith('/') && !value.split('/').includes('..')
        ? { ok: true, volume: { kind: 'hostPath', path: value } }
        : { ok: false, problem: "hostPath:<dir> needs an absolute path without '..'" };
    case 'image':
      if (!value) return { ok: false, problem: 'image:<reference> needs an image reference' };
      return isPinnedImage(value) || allowUnpinnedImage
        ? { ok: true, volume: { kind: 'image', reference: value } }
        : { ok: false, problem: 'image:<reference> must be pinned by digest (…@sha256:<64 hex>)' };
    default:
      return { ok: false, problem: 'expected pvc:<claim>, hostPath:<dir> or image:<reference@sha256:…>' };
  }
}
