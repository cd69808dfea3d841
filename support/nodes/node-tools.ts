// Where the real-node tier's cached inputs are: what `scripts/env.sh --nodes`
// (scripts/tools-nodes.sh) builds and exports. A missing one fails naming the variable and
// the command that makes it, never a silent skip.
import { accessSync, constants, existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ReleaseBinaries } from './node-images.ts';

export interface NodeTools {
  /** The cached Debian root every node's disk is layered on. */
  rootfs: string;
  /** containerd, containerd-shim-runc-v2, ctr. */
  containerdDir: string;
  /** The CRI command line a real node has (crictl). */
  crictl: string;
  /** The release the cluster starts at, and the one it is upgraded to. */
  from: ReleaseBinaries;
  to: ReleaseBinaries;
  etcd: string;
  pause: string;
  /** CoreDNS builds for the tags each release's kubeadm deploys. */
  coredns: { from: string; to: string };
  busybox: string;
}

const HOW = 'source scripts/env.sh --nodes (make test-nodes does)';

function need(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: ${HOW}`);
  if (!existsSync(value)) throw new Error(`${name}=${value} does not exist: ${HOW}`);
  return value;
}

function executable(path: string, what: string): string {
  try {
    accessSync(path, constants.X_OK);
  } catch {
    throw new Error(`${what} ${path} is missing or not executable: ${HOW}`);
  }
  return path;
}

function release(dirVar: string, versionVar: string): ReleaseBinaries {
  const dir = need(dirVar);
  const version = process.env[versionVar];
  if (!version) throw new Error(`${versionVar} is not set: ${HOW}`);
  for (const b of ['kubeadm', 'kubelet', 'kubectl', 'kube-apiserver', 'kube-controller-manager', 'kube-scheduler'])
    executable(join(dir, b), `${dirVar}'s ${b}`);
  return { dir, version };
}

export function nodeTools(): NodeTools {
  const containerdDir = need('NODE_CONTAINERD_DIR');
  for (const b of ['containerd', 'containerd-shim-runc-v2', 'ctr'])
    executable(join(containerdDir, b), `NODE_CONTAINERD_DIR's ${b}`);
  const busybox = process.env.NODE_BUSYBOX_BINARY ?? '/bin/busybox';
  executable(busybox, 'busybox (Debian: apt-get install busybox-static; or set NODE_BUSYBOX_BINARY)');
  // A pod's image has no libraries: the busybox it ships must be the static one.
  // (a dynamic ELF names its loader, /lib64/ld-linux-…, near its start).
  if (readFileSync(busybox).subarray(0, 4096).includes('ld-linux'))
    throw new Error(`${busybox} is not statically linked: install Debian's busybox-static (not busybox)`);
  return {
    rootfs: need('NODE_ROOTFS_DIR'),
    containerdDir,
    crictl: executable(need('NODE_CRICTL_BINARY'), 'NODE_CRICTL_BINARY'),
    from: release('NODE_KUBE_FROM_DIR', 'NODE_KUBE_FROM_VERSION'),
    to: release('NODE_KUBE_TO_DIR', 'NODE_KUBE_TO_VERSION'),
    etcd: executable(need('NODE_ETCD_BINARY'), 'NODE_ETCD_BINARY'),
    pause: executable(need('NODE_PAUSE_BINARY'), 'NODE_PAUSE_BINARY'),
    coredns: {
      from: executable(need('NODE_COREDNS_FROM_BINARY'), 'NODE_COREDNS_FROM_BINARY'),
      to: executable(need('NODE_COREDNS_TO_BINARY'), 'NODE_COREDNS_TO_BINARY'),
    },
    busybox,
  };
}
