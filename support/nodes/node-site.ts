// What an air-gapped site gives its clusters, once per test file: the local registry with
// every image kubeadm and the job executor pull (pushed by node-images.ts), and the HTTPS
// mirror of kubeadm, kubelet and kubectl for both releases with the checksums file the
// worker pins them by. Clusters (kubeadm-cluster.ts) reach both through relays on their
// site gateway.
import type { PemPair } from '../../src/local/certs.ts';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { checksumsText, startBinaryMirror, type BinaryMirror } from './binary-mirror.ts';
import {
  createKubeadmCluster,
  ETCD_TAG,
  PAUSE_TAG,
  REGISTRY_HOST,
  REGISTRY_SITE_PORT,
  type ClusterNodeSpec,
  type KubeadmCluster,
} from './kubeadm-cluster.ts';
import { SITE_GATEWAY } from './network.ts';
import { pushNodeImages, type NodeImages } from './node-images.ts';
import { nodeTools, type NodeTools } from './node-tools.ts';
import { requireHostTools } from './run.ts';
import { startRegistry, type LocalRegistry } from './registry.ts';
import { buildOrUndo } from './teardown.ts';

/** Where nodes reach the binary mirror (a relay on their gateway). */
const MIRROR_SITE_PORT = 8080;

export interface NodeSite {
  tools: NodeTools;
  registry: LocalRegistry;
  images: NodeImages;
  mirror: BinaryMirror;
  /**
   * BINARY_SOURCE as the job's script on a node dials it: http, with the executor's
   * allowHttpBinarySource, because the job image's busybox wget cannot verify the site's
   * CA (it needs an openssl binary for that); the pinned checksums guard what it fetches.
   */
  binarySource: string;
  /** The pinned checksums of both releases' binaries (NODE_UPGRADE_CHECKSUMS_FILE). */
  checksumsFile: string;
  dir: string;
  /**
   * A cluster of these nodes at the starting release; `relays` adds host services its nodes
   * reach, `services` kube-proxy on its nodes.
   */
  cluster(
    nodes: readonly ClusterNodeSpec[],
    options?: { relays?: readonly { sitePort: number; hostPort: number }[]; services?: boolean },
  ): Promise<KubeadmCluster>;
  stop(): Promise<void>;
}

/** `ca` issues the registry's and the mirror's certificates; nodes trust it through containerd's certs.d. */
export function startNodeSite(dir: string, ca: PemPair): Promise<NodeSite> {
  requireHostTools(['ip', 'nsenter', 'mount', 'umount', 'systemd-nspawn', 'socat']);
  if (process.getuid?.() !== 0)
    throw new Error('the real-node tier runs as root (it makes network namespaces, mounts and containers)');
  const tools = nodeTools();
  mkdirSync(dir, { recursive: true });
  return buildOrUndo(async (teardown) => {
    const registry = await startRegistry({ parentDir: dir, dnsNames: [REGISTRY_HOST], ca });
    teardown.add('registry', () => registry.stop());
    const images = await pushNodeImages(registry, `${REGISTRY_HOST}:${REGISTRY_SITE_PORT}`, {
      releases: [tools.from, tools.to],
      etcd: { binary: tools.etcd, tag: ETCD_TAG },
      pause: { binary: tools.pause, tag: PAUSE_TAG },
      coredns: [
        { binary: tools.coredns.from, tag: requireVersion('NODE_COREDNS_FROM_VERSION') },
        { binary: tools.coredns.to, tag: requireVersion('NODE_COREDNS_TO_VERSION') },
      ],
      busybox: tools.busybox,
    });
    const releases = [tools.from, tools.to].map((r) => ({ version: r.version, dir: r.dir }));
    const mirror = await startBinaryMirror({ releases, plain: true, ca });
    teardown.add('binary mirror', () => mirror.stop());
    const checksumsFile = join(dir, 'checksums.yaml');
    writeFileSync(checksumsFile, checksumsText(releases));
    const registryPort = Number(new URL(registry.url).port);
    const mirrorPort = Number(new URL(mirror.url).port);
    return {
      tools,
      registry,
      images,
      mirror,
      binarySource: `http://${SITE_GATEWAY}:${MIRROR_SITE_PORT}`,
      checksumsFile,
      dir,
      cluster: (nodes, { relays = [], services = false } = {}) =>
        createKubeadmCluster({
          tools,
          registry: { hostPort: registryPort, caPem: registry.caPem },
          relays: [{ sitePort: MIRROR_SITE_PORT, hostPort: mirrorPort }, ...relays],
          services,
          parentDir: dir,
          nodes,
        }),
    };
  });
}

function requireVersion(name: string): string {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: source scripts/env.sh --nodes (make test-nodes does)`);
  return v;
}
