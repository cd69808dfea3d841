// A content-addressed blob as the OCI image spec and the distribution API name it.
import { createHash } from 'node:crypto';

export interface Blob {
  mediaType: string;
  /** `sha256:<64 hex>` of `bytes`. */
  digest: string;
  size: number;
  bytes: Buffer;
}

/** The OCI descriptor of a blob (what a manifest or an index lists). */
export interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
  annotations?: Record<string, string>;
}

export function sha256Digest(bytes: Uint8Array): string {
  return `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
}

export function blob(mediaType: string, bytes: Uint8Array): Blob {
  const buffer = Buffer.from(bytes);
  return { mediaType, digest: sha256Digest(buffer), size: buffer.length, bytes: buffer };
}

export function descriptor(b: Blob, annotations?: Record<string, string>): Descriptor {
  return { mediaType: b.mediaType, digest: b.digest, size: b.size, ...(annotations ? { annotations } : {}) };
}

/** JSON with the keys in the order the objects were built: the same value gives the same bytes. */
export function jsonBlob(mediaType: string, value: unknown): Blob {
  return blob(mediaType, Buffer.from(JSON.stringify(value)));
}
