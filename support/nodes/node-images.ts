// The images the nodes pull, made without Docker by the project's own OCI writer
// (scripts/oci) from static binaries in the tool cache, and pushed to the local registry:
// kubeadm's control plane for each release (kube-apiserver, kube-controller-manager,
// kube-scheduler), etcd, CoreDNS and the sandbox (pause) image under the tags kubeadm
// asks for, and the `job` executor's image: Debian's busybox-static with its applets
// (sh, chroot, sha256sum, wget, mktemp...), referenced by digest as the executor requires.
// kube-proxy is not an image: in a scratch image it has no iptables or nft to program
// (kubeadm's kube-proxy phase is skipped); a cluster whose pods use Services runs it on its
// nodes (service-proxy.ts).
import { execFileSync } from 'node:child_process';
import { buildImage, type LayerEntry } from '../../scripts/oci/image.ts';
import { digestReference, pushImage } from '../../scripts/oci/push.ts';
import type { LocalRegistry } from './registry.ts';

/** A Kubernetes release's binaries in one directory (the tool cache's kubernetes-<version>). */
export interface ReleaseBinaries {
  version: string;
  dir: string;
}

export interface NodeImageInputs {
  releases: readonly ReleaseBinaries[];
  etcd: { binary: string; tag: string };
  pause: { binary: string; tag: string };
  /** CoreDNS builds under the tags each release's kubeadm deploys. */
  coredns: readonly { binary: string; tag: string }[];
  busybox: string;
}

export interface NodeImages {
  /** The registry as nodes name it, `<host>:<port>` (kubeadm's imageRepository). */
  repository: string;
  /** The job executor's image, `<repository>/capi-uo/node-upgrade@sha256:…`. */
  jobImage: string;
  /** A small image for test workloads (the pause binary), pinned by digest. */
  appImage: string;
  /** Seconds building and pushing took. */
  seconds: number;
}

const CONTROL_PLANE = ['kube-apiserver', 'kube-controller-manager', 'kube-scheduler'] as const;
const PATH_ENV = 'PATH=/usr/local/bin:/usr/bin:/bin';

function binaryImage(name: string, from: string, options: { entrypoint?: boolean } = {}) {
  const path = `usr/local/bin/${name}`;
  return buildImage({
    // Uncompressed: the digest depends on the inputs only, and gzip would cost seconds
    // per push for a registry on the same machine.
    compression: 'none',
    layers: [[{ type: 'file', path, from }]],
    config: { env: [PATH_ENV], ...(options.entrypoint ? { entrypoint: [`/${path}`] } : {}) },
  });
}

function busyboxImage(busybox: string) {
  const applets = execFileSync(busybox, ['--list'], { encoding: 'utf8' }).split('\n').filter(Boolean);
  const entries: LayerEntry[] = [
    { type: 'file', path: 'bin/busybox', from: busybox, mode: 0o755 },
    ...applets
      .filter((a) => a !== 'busybox')
      .map((a): LayerEntry => ({ type: 'symlink', path: `bin/${a}`, target: 'busybox' })),
    { type: 'dir', path: 'tmp', mode: 0o1777 },
  ];
  return buildImage({ compression: 'none', layers: [entries], config: { env: [PATH_ENV], cmd: ['/bin/sh'] } });
}

/** Builds every image and pushes it to `registry`; `repository` is how nodes reach it. */
export async function pushNodeImages(
  registry: LocalRegistry,
  repository: string,
  inputs: NodeImageInputs,
): Promise<NodeImages> {
  const began = Date.now();
  const target = { url: registry.url, caPem: registry.caPem };
  const push = (name: string, tag: string | undefined, image: ReturnType<typeof buildImage>) =>
    pushImage({ ...target, repository: name, ...(tag ? { tag } : {}), image });
  for (const release of inputs.releases)
    for (const name of CONTROL_PLANE) await push(name, release.version, binaryImage(name, `${release.dir}/${name}`));
  await push('etcd', inputs.etcd.tag, binaryImage('etcd', inputs.etcd.binary));
  for (const c of inputs.coredns) await push('coredns', c.tag, binaryImage('coredns', c.binary, { entrypoint: true }));
  const pause = await push('pause', inputs.pause.tag, binaryImage('pause', inputs.pause.binary, { entrypoint: true }));
  const job = await push('capi-uo/node-upgrade', 'busybox', busyboxImage(inputs.busybox));
  return {
    repository,
    jobImage: digestReference(repository, 'capi-uo/node-upgrade', job.digest),
    appImage: digestReference(repository, 'pause', pause.digest),
    seconds: (Date.now() - began) / 1000,
  };
}
