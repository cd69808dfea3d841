// gzip with a fixed header: Node's zlib writes mtime 0 and no file name already; the OS byte
// is set to 3 (Unix) here so a build on another platform writes the same header. The
// compressed bytes are still those of the zlib Node bundles (Chromium's fork), so a layer's
// gzip digest is stable for one Node build, while its diff_id (the tar's digest) is stable
// everywhere; `compression: 'none'` in buildImage gives digests that depend on nothing else.
import { gzipSync } from 'node:zlib';

const OS_BYTE = 9;
const UNIX = 3;

export function deterministicGzip(data: Uint8Array): Buffer {
  // zlib's default level: a 100 MB binary in seconds, not tens of seconds (level 9).
  const out = gzipSync(data, { level: 6 });
  out[OS_BYTE] = UNIX;
  return out;
}
