// The HTTPS binary mirror the real-node tier's upgrades download from: dl.k8s.io's layout,
// 404 for anything else, and a checksums file the worker's parser accepts.
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { parseChecksums } from '../../src/domain/node-binaries.ts';
import {
  checksumsText,
  startBinaryMirror,
  type BinaryMirror,
  type MirroredRelease,
} from '../../support/nodes/binary-mirror.ts';
import { httpsGet } from '../../support/nodes/https-get.ts';
import { testPki } from '../support/pki.ts';

const dir = mkdtempSync(join(tmpdir(), 'binary-mirror-'));
const releases: MirroredRelease[] = ['v1.36.1', 'v1.37.2'].map((version) => {
  const release = join(dir, version);
  mkdirSync(join(release, 'subdir'), { recursive: true });
  for (const name of ['kubeadm', 'kubelet', 'kubectl']) writeFileSync(join(release, name), `${name} ${version}\n`);
  return { version, dir: release };
});
let mirror: BinaryMirror;
beforeAll(async () => {
  mirror = await startBinaryMirror({ releases, ca: testPki().ca });
});
afterAll(async () => {
  await mirror?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('the binary mirror', () => {
  it('serves each binary where the node-upgrade script looks, matching the checksums file', async () => {
    const text = checksumsText(releases);
    const { table, problems } = parseChecksums(text);
    expect(problems).toEqual([]);
    expect(table.get('v1.37.2')?.size).toBe(3);
    const reply = await httpsGet(mirror.url, '/v1.37.2/bin/linux/amd64/kubelet', { caPem: mirror.caPem });
    expect(reply.status).toBe(200);
    expect(reply.body.toString()).toBe('kubelet v1.37.2\n');
    const sha = createHash('sha256').update(reply.body).digest('hex');
    expect(text).toContain(`v1.37.2/amd64/kubelet: ${sha}\n`);
    expect(table.get('v1.37.2')?.get('amd64/kubelet')).toBe(sha);
  });

  it.each([
    '/v1.37.2/bin/linux/amd64/kubelet2',
    '/v1.99.0/bin/linux/amd64/kubelet',
    '/v1.37.2/bin/linux/arm64/kubelet',
    '/v1.37.2/bin/linux/amd64/',
    '/v1.37.2/bin/linux/amd64/subdir',
    '/v1.37.2/bin/linux/amd64/../../../../v1.36.1/kubelet',
    '/v1.37.2/bin/linux/amd64/%2e%2e%2fkubelet',
    '/v1.37.2/kubelet',
    '/',
  ])('404s %s', async (path) => {
    const reply = await httpsGet(mirror.url, path, { caPem: mirror.caPem });
    expect(reply.status).toBe(404);
    expect(reply.body.toString()).toBe('not found\n');
  });

  it('is trusted only through its CA', async () => {
    await expect(httpsGet(mirror.url, '/v1.37.2/bin/linux/amd64/kubelet')).rejects.toThrow(/certificate/);
  });
});
