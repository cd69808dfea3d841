// The OCI image writer (scripts/oci): layers the system's tar reads as written, the same
// inputs give the same manifest digest, and a layout directory whose blobs are what they say.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { afterAll, describe, expect, it } from '@jest/globals';
import { buildImage, MEDIA_TYPE, type ImageSpec, type LayerEntry } from '../../scripts/oci/image.ts';
import { writeOciLayout } from '../../scripts/oci/layout.ts';
import { layerPath, sourceDateEpoch, tar } from '../../scripts/oci/tar.ts';

const dir = mkdtempSync(join(tmpdir(), 'oci-image-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const longDir = `opt/${'deep/'.repeat(30)}`; // 154 bytes: ustar's prefix holds it
const longName = `${'n'.repeat(120)}`; // longer than ustar's name field: a pax header
const entries: LayerEntry[] = [
  { type: 'file', path: '/usr/local/bin/hello', data: Buffer.from('#!/bin/sh\necho hi\n'), mode: 0o755 },
  { type: 'symlink', path: 'usr/bin/hello', target: '../local/bin/hello' },
  { type: 'dir', path: 'var/lib/empty', mode: 0o700, uid: 65532, gid: 65532 },
  { type: 'file', path: `${longDir}file`, data: Buffer.from('deep') },
  { type: 'file', path: `opt/${longName}`, data: Buffer.from('long'), uid: 1000, gid: 1001 },
  { type: 'symlink', path: 'opt/far', target: `/${longDir}file` }, // a target longer than ustar's field
  { type: 'file', path: 'opt/block', data: Buffer.alloc(512, 7) }, // exactly one block: no padding
];
const spec: ImageSpec = {
  layers: [entries, [{ type: 'file', path: 'etc/motd', data: Buffer.from('top layer\n') }]],
  config: {
    entrypoint: ['/usr/local/bin/hello'],
    cmd: ['--flag'],
    env: ['PATH=/usr/local/bin:/usr/bin'],
    user: '65532:65532',
    workingDir: '/',
    labels: { 'org.opencontainers.image.source': 'capi-upgrade-orchestrator', a: 'b' },
  },
};

describe('tar layers', () => {
  it('the system tar lists each entry with its mode, owner, time and link; parents are added, entries sorted', () => {
    const file = join(dir, 'layer.tar.gz');
    const image = buildImage({ ...spec, mtime: 86_400 });
    writeFileSync(file, image.layers[0]!.bytes);
    const listing = execFileSync('tar', ['--numeric-owner', '-tvzf', file], { encoding: 'utf8', env: { TZ: 'UTC' } })
      .trim()
      .split('\n')
      .map((line) => line.split(/\s+/));
    // mode, uid/gid, size, date, time, name [-> target]
    const byName = new Map(listing.map((f) => [f[5], f]));
    expect(byName.get('usr/local/bin/hello')?.slice(0, 5)).toEqual(['-rwxr-xr-x', '0/0', '18', '1970-01-02', '00:00']);
    expect(byName.get('usr/bin/hello')?.slice(0, 2)).toEqual(['lrwxrwxrwx', '0/0']);
    expect(byName.get('usr/bin/hello')?.slice(6)).toEqual(['->', '../local/bin/hello']);
    expect(byName.get('var/lib/empty/')?.slice(0, 2)).toEqual(['drwx------', '65532/65532']);
    expect(byName.get('usr/')?.slice(0, 2)).toEqual(['drwxr-xr-x', '0/0']);
    expect(byName.get(`${longDir}file`)?.[2]).toBe('4');
    expect(byName.get(`opt/${longName}`)?.slice(0, 3)).toEqual(['-rw-r--r--', '1000/1001', '4']);
    expect(byName.get('opt/far')?.slice(6)).toEqual(['->', `/${longDir}file`]);
    expect(byName.get('opt/block')?.[2]).toBe('512');
    const names = listing.map((f) => f[5] ?? '');
    expect(names).toEqual([...names].sort());
    expect(names).toContain('opt/deep/');
    // And it extracts to the same bytes.
    const out = join(dir, 'extracted');
    execFileSync('mkdir', ['-p', out]);
    execFileSync('tar', ['-xzf', file, '-C', out]);
    expect(readFileSync(join(out, 'usr/bin/hello'), 'utf8')).toBe('#!/bin/sh\necho hi\n');
    expect(readFileSync(join(out, `opt/${longName}`), 'utf8')).toBe('long');
    expect(readFileSync(join(out, 'opt/block')).equals(Buffer.alloc(512, 7))).toBe(true);
  });

  it('refuses a path outside the layer, twice the same path, and a file under a file', () => {
    expect(() => layerPath('../etc/passwd')).toThrow("not a path inside a layer: '../etc/passwd'");
    expect(() => layerPath('/')).toThrow('not a path inside a layer');
    expect(layerPath('./usr//bin/x/')).toBe('usr/bin/x');
    const file = { type: 'file' as const, path: 'a', data: Buffer.alloc(0) };
    expect(() => tar([file, { ...file, path: '/a' }])).toThrow("two layer entries for 'a'");
    expect(() => tar([file, { ...file, path: 'a/b' }])).toThrow("'a/b' is under 'a', which is a file");
  });

  it('takes its time from SOURCE_DATE_EPOCH, else 0', () => {
    expect(sourceDateEpoch({})).toBe(0);
    expect(sourceDateEpoch({ SOURCE_DATE_EPOCH: '1700000000' })).toBe(1_700_000_000);
    expect(() => sourceDateEpoch({ SOURCE_DATE_EPOCH: 'yesterday' })).toThrow('SOURCE_DATE_EPOCH must be');
  });
});

describe('images', () => {
  it('the same inputs, in any order, give the same digests; one byte more gives another', () => {
    const a = buildImage(spec);
    const b = buildImage({ ...spec, layers: [[...entries].reverse(), spec.layers[1]!] });
    expect(b.manifest.digest).toBe(a.manifest.digest);
    expect(b.manifest.bytes.equals(a.manifest.bytes)).toBe(true);
    const changed = buildImage({
      ...spec,
      layers: [
        entries.map((e) =>
          e.type === 'file' && e.path === `${longDir}file` ? { ...e, data: Buffer.from('deeP') } : e,
        ),
        spec.layers[1]!,
      ],
    });
    expect(changed.manifest.digest).not.toBe(a.manifest.digest);
    expect(buildImage({ ...spec, mtime: 1 }).manifest.digest).not.toBe(a.manifest.digest);
    expect(buildImage({ ...spec, config: { ...spec.config, user: '0' } }).manifest.digest).not.toBe(a.manifest.digest);
  });

  it('gives a layer its own time when asked: another build time leaves that layer as it was', () => {
    const pinned = (mtime: number) => buildImage({ ...spec, mtime, layerMtimes: [0] });
    expect(pinned(1).layers[0]!.digest).toBe(pinned(2).layers[0]!.digest);
    expect(pinned(1).layers[1]!.digest).not.toBe(pinned(2).layers[1]!.digest);
    expect(pinned(0).manifest.digest).toBe(buildImage({ ...spec, mtime: 0 }).manifest.digest);
  });

  it('gives an uncompressed image the digest it had when this test was written (no clock, no locale, no machine)', () => {
    const image = buildImage({
      layers: [
        [
          { type: 'file', path: 'bin/x', data: Buffer.from('x'), mode: 0o755 },
          { type: 'symlink', path: 'x', target: 'bin/x' },
        ],
      ],
      config: { entrypoint: ['/x'] },
      compression: 'none',
      mtime: 0,
    });
    expect(image.manifest.digest).toBe('sha256:6f8a863f0e2c723a2e9216ca3965ae9ae8e683cfa2f91a3e29ba0ce697e1597d');
  });

  it('writes gzip with a fixed header, and diff_ids that are the uncompressed tars', () => {
    const image = buildImage(spec);
    const layer = image.layers[0]!.bytes;
    // magic, deflate, no flags, mtime 0, XFL 0 (default level), OS 3 (Unix)
    expect(layer.subarray(0, 10).toString('hex')).toBe('1f8b0800000000000003');
    expect(`sha256:${createHash('sha256').update(gunzipSync(layer)).digest('hex')}`).toBe(image.diffIds[0]);
    const plain = buildImage({ ...spec, compression: 'none' });
    expect(plain.layers.map((l) => l.digest)).toEqual(image.diffIds);
    expect(plain.layers[0]!.mediaType).toBe(MEDIA_TYPE.layer);
  });

  it('has a manifest and config as the image spec shapes them', () => {
    const image = buildImage(spec);
    const manifest = JSON.parse(image.manifest.bytes.toString()) as Record<string, unknown>;
    expect(manifest).toEqual({
      schemaVersion: 2,
      mediaType: MEDIA_TYPE.manifest,
      config: { mediaType: MEDIA_TYPE.config, digest: image.config.digest, size: image.config.size },
      layers: image.layers.map((l) => ({ mediaType: MEDIA_TYPE.layerGzip, digest: l.digest, size: l.size })),
    });
    const config = JSON.parse(image.config.bytes.toString()) as Record<string, unknown>;
    expect(config).toMatchObject({
      created: '1970-01-01T00:00:00.000Z',
      architecture: 'amd64',
      os: 'linux',
      config: {
        Entrypoint: ['/usr/local/bin/hello'],
        Cmd: ['--flag'],
        Env: ['PATH=/usr/local/bin:/usr/bin'],
        User: '65532:65532',
        WorkingDir: '/',
        Labels: { a: 'b', 'org.opencontainers.image.source': 'capi-upgrade-orchestrator' },
      },
      rootfs: { type: 'layers', diff_ids: image.diffIds },
    });
    expect(Object.keys((config.config as { Labels: object }).Labels)).toEqual(['a', 'org.opencontainers.image.source']);
  });

  it('reads a file from disk, executable when its source is', () => {
    const source = join(dir, 'tool');
    writeFileSync(source, 'binary');
    chmodSync(source, 0o750);
    const layers = (from: LayerEntry[]) => buildImage({ layers: [from] }).manifest.digest;
    expect(layers([{ type: 'file', path: 'bin/tool', from: source }])).toBe(
      layers([{ type: 'file', path: 'bin/tool', data: Buffer.from('binary'), mode: 0o755 }]),
    );
  });

  it('writes an OCI layout whose blobs hash to their names', () => {
    const image = buildImage(spec);
    const layout = join(dir, 'layout');
    const index = writeOciLayout(layout, [{ image, tag: 'v1' }]);
    expect(JSON.parse(readFileSync(join(layout, 'oci-layout'), 'utf8'))).toEqual({ imageLayoutVersion: '1.0.0' });
    expect(readFileSync(join(layout, 'index.json')).equals(index.bytes)).toBe(true);
    expect(JSON.parse(index.bytes.toString())).toEqual({
      schemaVersion: 2,
      mediaType: MEDIA_TYPE.index,
      manifests: [
        {
          mediaType: MEDIA_TYPE.manifest,
          digest: image.manifest.digest,
          size: image.manifest.size,
          annotations: { 'org.opencontainers.image.ref.name': 'v1' },
        },
      ],
    });
    for (const b of [image.manifest, image.config, ...image.layers]) {
      const bytes = readFileSync(join(layout, 'blobs', 'sha256', b.digest.slice('sha256:'.length)));
      expect(`sha256:${createHash('sha256').update(bytes).digest('hex')}`).toBe(b.digest);
    }
  });
});
