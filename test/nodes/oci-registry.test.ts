// Pushing an image built by scripts/oci to a real registry (distribution's, REGISTRY_BINARY)
// over TLS with the test CA, and reading it back by digest with a plain HTTPS GET.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { buildImage, MEDIA_TYPE } from '../../scripts/oci/image.ts';
import { digestReference, pushImage } from '../../scripts/oci/push.ts';
import { httpsGet } from '../../support/nodes/https-get.ts';
import { registryBinary, startRegistry, type LocalRegistry } from '../../support/nodes/registry.ts';
import { testPki } from '../support/pki.ts';

/**
 * A 132-byte static x86-64 Linux executable that exits 42: an ELF header, one loadable
 * segment, and `mov edi, 42; mov eax, 60 (exit); syscall`.
 */
function tinyElf(): Buffer {
  const base = 0x400000n;
  const code = Buffer.from('bf2a000000b83c0000000f05', 'hex');
  const elf = Buffer.alloc(64 + 56 + code.length);
  Buffer.from('7f454c46020101', 'hex').copy(elf, 0);
  elf.writeUInt16LE(2, 16); // executable
  elf.writeUInt16LE(0x3e, 18); // x86-64
  elf.writeUInt32LE(1, 20);
  elf.writeBigUInt64LE(base + 120n, 24); // entry: the code after both headers
  elf.writeBigUInt64LE(64n, 32); // program headers right after this one
  elf.writeUInt16LE(64, 52);
  elf.writeUInt16LE(56, 54);
  elf.writeUInt16LE(1, 56);
  elf.writeUInt32LE(1, 64); // PT_LOAD
  elf.writeUInt32LE(5, 68); // read + execute
  elf.writeBigUInt64LE(base, 80);
  elf.writeBigUInt64LE(base, 88);
  elf.writeBigUInt64LE(BigInt(elf.length), 96);
  elf.writeBigUInt64LE(BigInt(elf.length), 104);
  elf.writeBigUInt64LE(0x1000n, 112);
  code.copy(elf, 120);
  return elf;
}

const dir = mkdtempSync(join(tmpdir(), 'oci-registry-'));
let registry: LocalRegistry;
beforeAll(async () => {
  registry = await startRegistry({ parentDir: dir, dnsNames: ['registry.test'], ca: testPki().ca });
});
afterAll(async () => {
  await registry?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('a local registry over TLS', () => {
  it('says which variable names its binary when it is unset', () => {
    const saved = process.env.REGISTRY_BINARY;
    try {
      delete process.env.REGISTRY_BINARY;
      expect(() => registryBinary()).toThrow('REGISTRY_BINARY is not set');
      process.env.REGISTRY_BINARY = join(dir, 'missing');
      expect(() => registryBinary()).toThrow(`REGISTRY_BINARY=${join(dir, 'missing')} is not an executable file`);
    } finally {
      process.env.REGISTRY_BINARY = saved;
    }
  });

  it('takes a pushed scratch image and serves its manifest and layer back by digest', async () => {
    const elf = tinyElf();
    if (process.arch === 'x64') {
      // It is a real executable: the image carries something a node could run.
      const file = join(dir, 'exit42');
      writeFileSync(file, elf);
      chmodSync(file, 0o755);
      expect(spawnSync(file).status).toBe(42);
    }
    const image = buildImage({
      layers: [[{ type: 'file', path: 'exit42', data: elf, mode: 0o755 }]],
      config: { entrypoint: ['/exit42'] },
    });
    const pushed = await pushImage({ ...registry, repository: 'test/exit42', tag: 'v1.0.0', image });
    expect(pushed.digest).toBe(image.manifest.digest);
    expect(pushed.reference).toBe(`${registry.address}/test/exit42@${image.manifest.digest}`);
    expect(pushed.uploaded).toEqual([image.config.digest, image.layers[0]!.digest]);

    const accept = { accept: MEDIA_TYPE.manifest };
    const byDigest = await httpsGet(registry.url, `/v2/test/exit42/manifests/${image.manifest.digest}`, {
      caPem: registry.caPem,
      headers: accept,
    });
    expect(byDigest.status).toBe(200);
    expect(byDigest.headers['content-type']).toBe(MEDIA_TYPE.manifest);
    expect(byDigest.body.equals(image.manifest.bytes)).toBe(true);
    const byTag = await httpsGet(registry.url, '/v2/test/exit42/manifests/v1.0.0', {
      caPem: registry.caPem,
      headers: accept,
    });
    expect(byTag.headers['docker-content-digest']).toBe(image.manifest.digest);
    const layer = await httpsGet(registry.url, `/v2/test/exit42/blobs/${image.layers[0]!.digest}`, {
      caPem: registry.caPem,
    });
    expect(`sha256:${createHash('sha256').update(layer.body).digest('hex')}`).toBe(image.layers[0]!.digest);

    // Pushed again under another tag: the blobs are there, only the manifest goes up.
    const again = await pushImage({ ...registry, repository: 'test/exit42', tag: 'latest', image });
    expect(again).toEqual({ ...pushed, uploaded: [] });
  });

  it('pushes by digest when there is no tag, and refuses names the API would', async () => {
    const image = buildImage({ layers: [[{ type: 'file', path: 'a', data: Buffer.from('a') }]] });
    const pushed = await pushImage({ ...registry, repository: 'untagged', image });
    expect(pushed.reference).toBe(digestReference(registry.url, 'untagged', image.manifest.digest));
    await expect(pushImage({ ...registry, repository: 'Upper', image })).rejects.toThrow(
      "not a repository name: 'Upper'",
    );
    await expect(pushImage({ ...registry, repository: 'ok', tag: '-bad', image })).rejects.toThrow("not a tag: '-bad'");
  });

  it('is trusted only through its CA', async () => {
    await expect(httpsGet(registry.url, '/v2/')).rejects.toThrow(/certificate/);
    const image = buildImage({ layers: [] });
    await expect(pushImage({ ...registry, caPem: '', repository: 'x', image })).rejects.toThrow(/certificate/);
  });

  it('keeps its storage in its own directory, which stop() removes', async () => {
    const other = await startRegistry({ parentDir: dir, ca: testPki().ca });
    expect(existsSync(join(other.dir, 'config.yml'))).toBe(true);
    expect((await httpsGet(other.url, '/v2/', { caPem: other.caPem })).status).toBe(200);
    await other.stop();
    expect(existsSync(other.dir)).toBe(false);
    await expect(httpsGet(other.url, '/v2/', { caPem: other.caPem })).rejects.toThrow(/ECONNREFUSED/);
  });
});
