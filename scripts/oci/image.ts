// An OCI image (manifest, config, layers) from files, without Docker: each layer is a
// deterministic tar (tar.ts), gzipped with a fixed header (gzip.ts) unless asked not to be.
// The same inputs give the same manifest digest; `created` and every file time come from
// `mtime` (default SOURCE_DATE_EPOCH, else 0), never from the clock.
import { readFileSync, statSync } from 'node:fs';
import { blob, descriptor, jsonBlob, sha256Digest, type Blob } from './blob.ts';
import { deterministicGzip } from './gzip.ts';
import { sourceDateEpoch, tar, type TarEntry, type TarOwner } from './tar.ts';

export const MEDIA_TYPE = {
  manifest: 'application/vnd.oci.image.manifest.v1+json',
  index: 'application/vnd.oci.image.index.v1+json',
  config: 'application/vnd.oci.image.config.v1+json',
  layerGzip: 'application/vnd.oci.image.layer.v1.tar+gzip',
  layer: 'application/vnd.oci.image.layer.v1.tar',
} as const;

/** A file whose bytes are read from disk; its mode defaults to 0755 if the source is executable, else 0644. */
export type FileFromDisk = { type: 'file'; path: string; from: string } & TarOwner;
export type LayerEntry = TarEntry | FileFromDisk;

export interface ImageConfig {
  entrypoint?: string[];
  cmd?: string[];
  env?: string[];
  user?: string;
  workingDir?: string;
  labels?: Record<string, string>;
  /** e.g. `9443/tcp` (the image spec's ExposedPorts, a set). */
  exposedPorts?: string[];
}

export interface ImageSpec {
  /** One list of entries per layer, bottom first. */
  layers: readonly (readonly LayerEntry[])[];
  config?: ImageConfig;
  architecture?: string;
  os?: string;
  /** Seconds since the epoch for `created` and every entry; default SOURCE_DATE_EPOCH, else 0. */
  mtime?: number;
  /** Per layer, an entry time other than `mtime` (e.g. 0 for layers of pinned dependencies, shared across builds). */
  layerMtimes?: readonly (number | undefined)[];
  /** Default gzip. Uncompressed layers' digests do not depend on the zlib build. */
  compression?: 'gzip' | 'none';
  annotations?: Record<string, string>;
  /** Gzips a layer's tar (default deterministicGzip); a caller may cache the result by diff_id. */
  compress?: (tar: Buffer, diffId: string, gzip: (tar: Buffer) => Buffer) => Buffer;
}

export interface OciImage {
  manifest: Blob;
  config: Blob;
  layers: Blob[];
  /** sha256 of each layer's uncompressed tar (the config's rootfs.diff_ids). */
  diffIds: string[];
  /** Bytes of each layer's uncompressed tar. */
  diffSizes: number[];
}

export function buildImage(spec: ImageSpec): OciImage {
  const mtime = spec.mtime ?? sourceDateEpoch();
  const gzip = (spec.compression ?? 'gzip') === 'gzip';
  const tars = spec.layers.map((entries, i) => tar(entries.map(readEntry), { mtime: spec.layerMtimes?.[i] ?? mtime }));
  const diffIds = tars.map((t) => sha256Digest(t));
  const compress = spec.compress ?? ((t: Buffer) => deterministicGzip(t));
  const layers = tars.map((t, i) =>
    gzip ? blob(MEDIA_TYPE.layerGzip, compress(t, diffIds[i]!, deterministicGzip)) : blob(MEDIA_TYPE.layer, t),
  );
  const config = jsonBlob(MEDIA_TYPE.config, {
    created: new Date(mtime * 1000).toISOString(),
    architecture: spec.architecture ?? 'amd64',
    os: spec.os ?? 'linux',
    config: runtimeConfig(spec.config ?? {}),
    rootfs: { type: 'layers', diff_ids: diffIds },
    history: tars.map(() => ({ created: new Date(mtime * 1000).toISOString(), created_by: 'scripts/oci' })),
  });
  const manifest = jsonBlob(MEDIA_TYPE.manifest, {
    schemaVersion: 2,
    mediaType: MEDIA_TYPE.manifest,
    config: descriptor(config),
    layers: layers.map((l) => descriptor(l)),
    ...(spec.annotations ? { annotations: sortedKeys(spec.annotations) } : {}),
  });
  return { manifest, config, layers, diffIds, diffSizes: tars.map((t) => t.length) };
}

function readEntry(entry: LayerEntry): TarEntry {
  if (!('from' in entry)) return entry;
  const { from, ...rest } = entry;
  const mode = entry.mode ?? (statSync(from).mode & 0o100 ? 0o755 : 0o644);
  return { ...rest, mode, data: readFileSync(from) };
}

/** The image spec's capitalised fields, only those given, labels sorted. */
function runtimeConfig(c: ImageConfig): Record<string, unknown> {
  return {
    ...(c.user !== undefined ? { User: c.user } : {}),
    ...(c.exposedPorts ? { ExposedPorts: Object.fromEntries([...c.exposedPorts].sort().map((p) => [p, {}])) } : {}),
    ...(c.env ? { Env: c.env } : {}),
    ...(c.entrypoint ? { Entrypoint: c.entrypoint } : {}),
    ...(c.cmd ? { Cmd: c.cmd } : {}),
    ...(c.workingDir !== undefined ? { WorkingDir: c.workingDir } : {}),
    ...(c.labels ? { Labels: sortedKeys(c.labels) } : {}),
  };
}

function sortedKeys(record: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(record).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}
