// A deterministic tar writer for image layers: the same entries give the same bytes, whatever
// order they come in and whenever they are written. Entries are sorted by path, every missing
// parent directory is added (0755, root), times are one fixed mtime, owner names are empty
// (runtimes go by uid/gid), and a name or link target too long for ustar gets a pax header.
import { posix } from 'node:path';

export interface TarOwner {
  /** Default 0644 for files, 0755 for directories, 0777 for symlinks. */
  mode?: number;
  uid?: number;
  gid?: number;
}

export type TarEntry =
  | ({ type: 'file'; path: string; data: Uint8Array } & TarOwner)
  | ({ type: 'dir'; path: string } & TarOwner)
  | ({ type: 'symlink'; path: string; target: string } & TarOwner);

export interface TarOptions {
  /** Seconds since the epoch for every entry; default SOURCE_DATE_EPOCH, else 0. */
  mtime?: number;
}

const BLOCK = 512;
const USTAR_NAME = 100;
const USTAR_PREFIX = 155;
const TYPE_FLAG = { file: '0', symlink: '2', dir: '5', pax: 'x' } as const;

/** SOURCE_DATE_EPOCH when set (reproducible-builds.org), else 0. */
export function sourceDateEpoch(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env.SOURCE_DATE_EPOCH;
  if (raw === undefined || raw === '') return 0;
  if (!/^\d+$/.test(raw)) throw new Error(`SOURCE_DATE_EPOCH must be whole seconds since the epoch, got '${raw}'`);
  return Number(raw);
}

/** `usr/bin/x` from `/usr/bin/x`, `./usr/bin/x/` or `usr//bin/x`; refuses `..` and the root itself. */
export function layerPath(path: string): string {
  const clean = posix.normalize(`/${path}`).replace(/^\/+|\/+$/g, '');
  // Checked before normalising too: `/..` would otherwise fold into the root quietly.
  if (clean === '' || path.split('/').includes('..')) throw new Error(`not a path inside a layer: '${path}'`);
  return clean;
}

/** The entries as one tar archive (uncompressed), ending with two zero blocks. */
export function tar(entries: readonly TarEntry[], options: TarOptions = {}): Buffer {
  const mtime = options.mtime ?? sourceDateEpoch();
  const byPath = new Map<string, TarEntry>();
  for (const entry of entries) {
    const path = layerPath(entry.path);
    if (byPath.has(path)) throw new Error(`two layer entries for '${path}'`);
    byPath.set(path, { ...entry, path });
  }
  for (const path of [...byPath.keys()]) {
    for (let dir = posix.dirname(path); dir !== '.'; dir = posix.dirname(dir)) {
      const parent = byPath.get(dir);
      if (parent && parent.type !== 'dir') throw new Error(`'${path}' is under '${dir}', which is a ${parent.type}`);
      if (!parent) byPath.set(dir, { type: 'dir', path: dir });
    }
  }
  // Byte order, not locale order: the same on every machine.
  const sorted = [...byPath.values()].sort((a, b) => Buffer.compare(Buffer.from(a.path), Buffer.from(b.path)));
  const blocks = sorted.flatMap((entry) => entryBlocks(entry, mtime));
  return Buffer.concat([...blocks, Buffer.alloc(2 * BLOCK)]);
}

function entryBlocks(entry: TarEntry, mtime: number): Buffer[] {
  const name = entry.type === 'dir' ? `${entry.path}/` : entry.path;
  const data = entry.type === 'file' ? Buffer.from(entry.data) : Buffer.alloc(0);
  const link = entry.type === 'symlink' ? entry.target : '';
  const mode = entry.mode ?? { file: 0o644, dir: 0o755, symlink: 0o777 }[entry.type];
  const header: Header = {
    name,
    mode,
    uid: entry.uid ?? 0,
    gid: entry.gid ?? 0,
    size: data.length,
    mtime,
    type: TYPE_FLAG[entry.type],
    link,
  };
  const split = splitName(name);
  const pax: [string, string][] = [];
  if (!split) pax.push(['path', name]);
  if (Buffer.byteLength(link) > USTAR_NAME) pax.push(['linkpath', link]);
  const out: Buffer[] = [];
  if (pax.length > 0) {
    const records = Buffer.from(pax.map(([k, v]) => paxRecord(k, v)).join(''));
    // The pax header's own name is never read back; a fixed short one keeps it in ustar.
    out.push(headerBlock({ ...header, name: 'PaxHeader', size: records.length, type: TYPE_FLAG.pax, link: '' }));
    out.push(padded(records));
  }
  const short = split ?? { prefix: '', name: name.slice(-USTAR_NAME) };
  out.push(headerBlock({ ...header, ...short, link: link.slice(0, USTAR_NAME) }));
  if (data.length > 0) out.push(padded(data));
  return out;
}

interface Header {
  name: string;
  prefix?: string;
  mode: number;
  uid: number;
  gid: number;
  size: number;
  mtime: number;
  type: string;
  link: string;
}

/** ustar's name and prefix for a path, or undefined when it does not fit (pax then). */
function splitName(name: string): { prefix: string; name: string } | undefined {
  if (Buffer.byteLength(name) <= USTAR_NAME) return { prefix: '', name };
  const body = name.endsWith('/') ? name.slice(0, -1) : name;
  for (let i = body.indexOf('/'); i !== -1; i = body.indexOf('/', i + 1)) {
    const prefix = name.slice(0, i);
    const rest = name.slice(i + 1);
    if (Buffer.byteLength(prefix) <= USTAR_PREFIX && Buffer.byteLength(rest) <= USTAR_NAME)
      return { prefix, name: rest };
  }
  return undefined;
}

/** `<length> <key>=<value>\n`, the length counting itself. */
function paxRecord(key: string, value: string): string {
  const body = ` ${key}=${value}\n`;
  let length = Buffer.byteLength(body) + 1;
  while (String(length).length + Buffer.byteLength(body) !== length)
    length = String(length).length + Buffer.byteLength(body);
  return `${length}${body}`;
}

function headerBlock(h: Header): Buffer {
  const block = Buffer.alloc(BLOCK);
  const text = (value: string, offset: number, size: number) => {
    const bytes = Buffer.from(value);
    if (bytes.length > size) throw new Error(`tar header field too long: '${value}'`);
    bytes.copy(block, offset);
  };
  const octal = (value: number, offset: number, size: number) => {
    const digits = value.toString(8);
    if (!Number.isSafeInteger(value) || value < 0 || digits.length > size - 1)
      throw new Error(`tar header number out of range: ${value}`);
    text(`${digits.padStart(size - 1, '0')}\0`, offset, size);
  };
  text(h.name, 0, 100);
  octal(h.mode, 100, 8);
  octal(h.uid, 108, 8);
  octal(h.gid, 116, 8);
  octal(h.size, 124, 12);
  octal(h.mtime, 136, 12);
  text(' '.repeat(8), 148, 8); // the checksum counts its own field as spaces
  text(h.type, 156, 1);
  text(h.link, 157, 100);
  text('ustar\0', 257, 6);
  text('00', 263, 2);
  text(h.prefix ?? '', 345, 155);
  let sum = 0;
  for (const byte of block) sum += byte;
  text(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 8);
  return block;
}

function padded(data: Buffer): Buffer {
  const rest = data.length % BLOCK;
  return rest === 0 ? data : Buffer.concat([data, Buffer.alloc(BLOCK - rest)]);
}
