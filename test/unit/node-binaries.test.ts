// The `job` executor's supply chain settings: the image by digest, an https (or
// file:///) binary source, checksums pinned per version in the worker's configuration.
import { describe, expect, it } from '@jest/globals';
import type { V1Job } from '@kubernetes/client-node';
import { upgradeJob } from '../../src/activities/executors/job.ts';
import { jobBinarySource } from '../../src/activities/executors/node-binaries.ts';
import { ConfigError, parseConfig } from '../../src/config/index.ts';
import {
  BINARY_VOLUME_MOUNT,
  binarySourceProblem,
  DEFAULT_JOB_IMAGE,
  isPinnedImage,
  parseBinaryVolume,
  parseChecksums,
  pinnedDigests,
} from '../../src/domain/node-binaries.ts';

const A = 'a'.repeat(64);
const B = 'B'.repeat(64);

function problems(env: Record<string, string>): string[] {
  try {
    parseConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  return [];
}

describe('NODE_UPGRADE_* settings', () => {
  it('defaults to an image pinned by digest, dl.k8s.io and no checksums (every Job upgrade then fails closed)', () => {
    expect(isPinnedImage(DEFAULT_JOB_IMAGE)).toBe(true);
    expect(parseConfig({}).nodeUpgradeJob).toEqual({ image: DEFAULT_JOB_IMAGE, allowHttpBinarySource: false });
  });

  it('refuses an image by tag unless NODE_UPGRADE_JOB_ALLOW_UNPINNED_IMAGE=true', () => {
    expect(problems({ NODE_UPGRADE_JOB_IMAGE: 'docker.io/library/alpine:3.22' })).toEqual([
      'NODE_UPGRADE_JOB_IMAGE="docker.io/library/alpine:3.22": not pinned by digest (<image>@sha256:<64 hex>); ' +
        'a tag can be moved to other content (set NODE_UPGRADE_JOB_ALLOW_UNPINNED_IMAGE=true to accept it)',
    ]);
    expect(
      parseConfig({ NODE_UPGRADE_JOB_IMAGE: 'alpine:3.22', NODE_UPGRADE_JOB_ALLOW_UNPINNED_IMAGE: 'true' })
        .nodeUpgradeJob.image,
    ).toBe('alpine:3.22');
    expect(problems({ NODE_UPGRADE_JOB_IMAGE: `registry.example/upgrader@sha256:${A}` })).toEqual([]);
    expect(problems({ NODE_UPGRADE_JOB_IMAGE: `registry.example/upgrader@sha256:${B}` })).toHaveLength(1);
  });

  it('refuses an http binary source unless NODE_UPGRADE_BINARY_SOURCE_ALLOW_HTTP=true', () => {
    expect(problems({ NODE_UPGRADE_BINARY_SOURCE: 'http://mirror.internal/release' })).toEqual([
      'NODE_UPGRADE_BINARY_SOURCE="http://mirror.internal/release": is plain http: set ' +
        'NODE_UPGRADE_BINARY_SOURCE_ALLOW_HTTP=true to accept it (the pinned checksums still apply)',
    ]);
    expect(
      parseConfig({
        NODE_UPGRADE_BINARY_SOURCE: 'http://mirror.internal/release',
        NODE_UPGRADE_BINARY_SOURCE_ALLOW_HTTP: 'true',
      }).nodeUpgradeJob,
    ).toMatchObject({ binarySource: 'http://mirror.internal/release', allowHttpBinarySource: true });
    expect(binarySourceProblem('https://mirror.internal/release', false)).toBeUndefined();
    expect(binarySourceProblem('file:///opt/kubernetes', false)).toBeUndefined();
    expect(binarySourceProblem('ftp://mirror/release', true)).toBe('must be an https:// or file:/// URL');
    expect(binarySourceProblem('https://user:pw@mirror/release', false)).toBe('must not carry credentials');
    expect(binarySourceProblem('file://host/dir', false)).toBe('must be file:///<absolute directory>');
  });

  it('takes the kubeadm preflight checks to ignore, names only', () => {
    expect(
      parseConfig({ NODE_UPGRADE_KUBEADM_IGNORE_PREFLIGHT_ERRORS: 'SystemVerification, Swap' }).nodeUpgradeJob,
    ).toMatchObject({ ignorePreflightErrors: ['SystemVerification', 'Swap'] });
    expect(parseConfig({}).nodeUpgradeJob).not.toHaveProperty('ignorePreflightErrors');
    expect(problems({ NODE_UPGRADE_KUBEADM_IGNORE_PREFLIGHT_ERRORS: 'Swap --v=9' })).toEqual([
      'NODE_UPGRADE_KUBEADM_IGNORE_PREFLIGHT_ERRORS="Swap --v=9": expected comma-separated kubeadm preflight check names (e.g. SystemVerification)',
    ]);
  });

  it('takes the checksums file and an air-gapped binary volume', () => {
    expect(
      parseConfig({
        NODE_UPGRADE_CHECKSUMS_FILE: '/etc/capi-upgrade-orchestrator/node-binaries/checksums',
        NODE_UPGRADE_BINARY_VOLUME: 'pvc:kubernetes-binaries',
      }).nodeUpgradeJob,
    ).toMatchObject({
      checksumsFile: '/etc/capi-upgrade-orchestrator/node-binaries/checksums',
      binaryVolume: { kind: 'pvc', claimName: 'kubernetes-binaries' },
    });
    expect(problems({ NODE_UPGRADE_CHECKSUMS_FILE: 'checksums' })).toEqual([
      'NODE_UPGRADE_CHECKSUMS_FILE="checksums": expected an absolute path',
    ]);
    expect(parseBinaryVolume('hostPath:/opt/kubernetes', false)).toEqual({
      ok: true,
      volume: { kind: 'hostPath', path: '/opt/kubernetes' },
    });
    expect(parseBinaryVolume('image:registry.example/k8s-binaries:v1.34.2', false)).toMatchObject({ ok: false });
    expect(parseBinaryVolume(`image:registry.example/k8s-binaries@sha256:${A}`, false)).toMatchObject({ ok: true });
    expect(problems({ NODE_UPGRADE_BINARY_VOLUME: 'hostPath:opt' })).toEqual([
      `NODE_UPGRADE_BINARY_VOLUME="hostPath:opt": hostPath:<dir> needs an absolute path without '..'`,
    ]);
  });
});

describe('parseChecksums / pinnedDigests', () => {
  const text = [
    '# pinned by the platform team',
    `v1.34.2/amd64/kubeadm: ${A}`,
    `v1.34.2/amd64/kubelet: "${B}"`,
    `v1.34.2/amd64/kubectl: ${A}`,
    `v1.34.2/arm64/kubeadm: ${A}`,
    '',
  ].join('\n');

  it('reads one line per version, arch and binary, lowercasing the digest', () => {
    const { table, problems } = parseChecksums(text);
    expect(problems).toEqual([]);
    expect(pinnedDigests(table, 'v1.34.2', 'amd64')).toEqual({
      ok: true,
      digests: { kubeadm: A, kubelet: B.toLowerCase(), kubectl: A },
    });
  });

  it('names a missing version, and the binaries missing for an arch', () => {
    const { table } = parseChecksums(text);
    expect(pinnedDigests(table, 'v1.99.0', 'amd64')).toEqual({ ok: false, missing: 'no pinned checksums for v1.99.0' });
    expect(pinnedDigests(table, 'v1.34.2', 'arm64')).toEqual({
      ok: false,
      missing: 'no pinned checksum for kubelet, kubectl v1.34.2 linux/arm64',
    });
  });

  it('reports bad lines by number', () => {
    const { problems } = parseChecksums(
      [
        `v1.34.2/amd64/kubeadm: ${A}`,
        'v1.34.2/amd64/kubelet: abc',
        `v1.34.2/mips/kubelet: ${A}`,
        `v1.34.2/amd64/kubeadm: ${B}`,
      ].join('\n'),
    );
    expect(problems).toEqual([
      'line 2: expected <version>/<arch>/<binary>: <sha256> (e.g. v1.34.2/amd64/kubelet: <64 hex>)',
      'line 3: arch mips is not one of amd64 arm64 ppc64le s390x',
      'line 4: v1.34.2/amd64/kubeadm is pinned twice, to different digests',
    ]);
  });
});

describe('air-gapped binaries (NODE_UPGRADE_BINARY_VOLUME)', () => {
  const params = {
    name: 'machine-update-x',
    namespace: 'kube-system',
    nodeName: 'node-1',
    version: 'v1.34.2',
    mode: 'node' as const,
    image: DEFAULT_JOB_IMAGE,
    script: 'true',
    backoffLimit: 2,
    timeoutMs: 600_000,
    arch: 'amd64',
    digests: { kubeadm: A, kubelet: A, kubectl: A },
  };
  const env = (job: V1Job) =>
    Object.fromEntries((job.spec?.template.spec?.containers[0]?.env ?? []).map((e) => [e.name, e.value]));

  it('fetches from the volume, mounted read-only where the script reads it, when no other source is set', () => {
    const binaryVolume = { kind: 'pvc' as const, claimName: 'kubernetes-binaries' };
    const binarySource = jobBinarySource({ binaryVolume });
    expect(binarySource).toBe(`file://${BINARY_VOLUME_MOUNT}`);
    const job = upgradeJob({ ...params, binaryVolume, ...(binarySource ? { binarySource } : {}) });
    const pod = job.spec!.template.spec!;
    expect(env(job)['BINARY_SOURCE']).toBe('file:///node-binaries');
    expect(pod.containers[0]!.volumeMounts).toContainEqual({
      name: 'binaries',
      mountPath: BINARY_VOLUME_MOUNT,
      readOnly: true,
    });
    expect(pod.volumes).toContainEqual({
      name: 'binaries',
      persistentVolumeClaim: { claimName: 'kubernetes-binaries', readOnly: true },
    });
  });

  it('keeps an explicit source over the volume, and neither source nor volume without them', () => {
    const binaryVolume = { kind: 'image' as const, reference: 'registry.example.com/k8s-binaries@sha256:' + A };
    expect(jobBinarySource({ binaryVolume, binarySource: 'https://mirror.example.com/k8s' })).toBe(
      'https://mirror.example.com/k8s',
    );
    expect(jobBinarySource({})).toBeUndefined();
    const job = upgradeJob(params);
    expect(env(job)['BINARY_SOURCE']).toBeUndefined();
    expect(job.spec!.template.spec!.volumes!.map((v) => v.name)).toEqual(['host']);
  });
});
