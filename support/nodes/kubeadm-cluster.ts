// A real kubeadm cluster on container nodes: `kubeadm init` on a control-plane node, then
// `kubeadm join` of the workers, from the local registry (imageRepository) as an
// air-gapped site runs it. The host reaches the API server only through a relay on
// 127.0.0.1 (the API server's certificate carries 127.0.0.1); everything the cluster
// started is stopped by stop(), in reverse order.
import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { stringify } from 'yaml';
import { createContainerNode, type ContainerNode } from './container-node.ts';
import { createNodeNetwork, namespacePrefix, SITE_GATEWAY, type NetworkNode } from './network.ts';
import { nodeFiles, type NodeHost } from './node-files.ts';
import type { NodeTools } from './node-tools.ts';
import { startServiceProxies } from './service-proxy.ts';
import { buildOrUndo, type Teardown } from './teardown.ts';

/** How nodes name the registry: /etc/hosts maps it to the site gateway, where it is relayed. */
export const REGISTRY_HOST = 'registry.capi-uo.test';
export const REGISTRY_SITE_PORT = 5000;
const API_PORT = 6443;
const POD_NETWORK = '10.244';
const SERVICE_SUBNET = '10.96.0.0/16';
/** kubeadm v1.36's sandbox image tag (`kubeadm config images list`). */
export const PAUSE_TAG = '3.10.2';
/** The etcd build the tool cache has; kubeadm is told its tag rather than its own default. */
export const ETCD_TAG = 'v3.6.10';
/**
 * The preflight check a kubelet ≥ 1.35 on a cgroup v1 host fails unless skipped (with the
 * kubelet's failCgroupV1: false), and bridge-nf-call-iptables, which the host's kernel
 * keeps for the host: the container's network namespace does not show it.
 */
const HOST_PREFLIGHT_EXCEPTIONS = ['SystemVerification', 'FileContent--proc-sys-net-bridge-bridge-nf-call-iptables'];

/**
 * kubeadm's waits on a TCG virtual machine, where its defaults (1 min for an API call, 4 for
 * a component's health, 5 for each static pod's replacement) run out: `kubeadm init`'s
 * admin ClusterRoleBinding timed out after the API server came up.
 */
export const VM_KUBEADM_TIMEOUTS = {
  controlPlaneComponentHealthCheck: '20m0s',
  kubeletHealthCheck: '10m0s',
  kubernetesAPICall: '10m0s',
  etcdAPICall: '10m0s',
  upgradeManifests: '20m0s',
};

export interface ClusterNodeSpec {
  name: string;
  role: 'control-plane' | 'worker';
  /** Flags for this node's kubelet, as a KubeadmConfig's nodeRegistration.kubeletExtraArgs gives them. */
  kubeletExtraArgs?: Record<string, string>;
}

export interface KubeadmClusterOptions {
  tools: NodeTools;
  /** The registry's host port (what the site relays REGISTRY_SITE_PORT to) and its CA. */
  registry: { hostPort: number; caPem: string };
  /** Host services the nodes must reach: each site port is relayed to the host port. */
  relays?: readonly { sitePort: number; hostPort: number }[];
  /** Where the cluster's own directory is made. */
  parentDir: string;
  nodes: readonly ClusterNodeSpec[];
  /** kube-proxy on every node, for pods that call each other by Service (service-proxy.ts). */
  services?: boolean;
}

export interface KubeadmCluster {
  /** A system:masters kubeconfig, as CAPI's Secret holds, whose server is the relay on 127.0.0.1. */
  kubeconfig: string;
  /** The API server as the host reaches it, `https://127.0.0.1:<port>`. */
  server: string;
  nodes: Record<string, ContainerNode>;
  /** Seconds: the nodes' boot, `kubeadm init`, every `kubeadm join`. */
  timings: { boot: number; init: number; join: number };
  stop(): Promise<void>;
}

export function createKubeadmCluster(o: KubeadmClusterOptions): Promise<KubeadmCluster> {
  return buildOrUndo((teardown) => build(teardown, o));
}

async function build(teardown: Teardown, o: KubeadmClusterOptions): Promise<Omit<KubeadmCluster, 'stop'>> {
  const controlPlanes = o.nodes.filter((n) => n.role === 'control-plane');
  if (controlPlanes.length !== 1) throw new Error('a cluster here has exactly one control-plane node');
  const id = randomBytes(3).toString('hex');
  // Named after its owner, as the network namespaces are, so reap.ts finds an orphan's mounts.
  const dir = join(o.parentDir, `${namespacePrefix()}${id}`);
  mkdirSync(dir, { recursive: true });

  const networkNodes: NetworkNode[] = o.nodes.map((n, i) => ({
    name: n.name,
    ip: `10.88.0.${10 + i}`,
    podCidr: `${POD_NETWORK}.${i + 1}.0/24`,
  }));
  const network = await createNodeNetwork(teardown, id, networkNodes);
  await network.exposeToNodes(REGISTRY_SITE_PORT, o.registry.hostPort);
  for (const r of o.relays ?? []) await network.exposeToNodes(r.sitePort, r.hostPort);

  const from = o.tools.from;
  const sandboxImage = `${REGISTRY_HOST}:${REGISTRY_SITE_PORT}/pause:${PAUSE_TAG}`;
  const nodes: Record<string, ContainerNode> = {};
  const bootStarted = Date.now();
  for (const n of networkNodes) {
    nodes[n.name] = await createContainerNode(teardown, {
      name: n.name,
      netns: network.namespaceOf(n.name),
      rootfs: o.tools.rootfs,
      dir: join(dir, n.name),
      cgroupName: `${network.namespaceOf(n.name)}`,
      files: nodeFiles({
        ...n,
        registry: { host: REGISTRY_HOST, port: REGISTRY_SITE_PORT, gateway: SITE_GATEWAY, caPem: o.registry.caPem },
        sandboxImage,
      }),
      binaries: [
        ...['containerd', 'containerd-shim-runc-v2', 'ctr'].map((b) => ({
          path: `/usr/local/bin/${b}`,
          from: `${o.tools.containerdDir}/${b}`,
        })),
        { path: '/usr/local/bin/crictl', from: o.tools.crictl },
        ...['kubeadm', 'kubelet', 'kubectl', ...(o.services ? ['kube-proxy'] : [])].map((b) => ({
          path: `/usr/bin/${b}`,
          from: `${from.dir}/${b}`,
        })),
      ],
    });
  }
  const boot = (Date.now() - bootStarted) / 1000;

  const cpSpec = controlPlanes[0]!;
  const cp = nodes[cpSpec.name]!;
  const cpIp = networkNodes.find((n) => n.name === cpSpec.name)!.ip;
  const initStarted = Date.now();
  await cp.exec(['mkdir', '-p', '/etc/capi-uo']);
  await cp.sh('cat > /etc/capi-uo/kubeadm.yaml', { input: initConfig(cpSpec, cpIp, from.version) });
  await cp.sh('kubeadm init --config /etc/capi-uo/kubeadm.yaml', { timeoutMs: 300_000 });
  const init = (Date.now() - initStarted) / 1000;

  const joinStarted = Date.now();
  const joinCommand = (await cp.sh('kubeadm token create --print-join-command')).trim();
  const [, token, caHash] =
    /--token (\S+) --discovery-token-ca-cert-hash (\S+)/.exec(joinCommand) ??
    (() => {
      throw new Error(`unexpected join command: ${joinCommand}`);
    })();
  for (const spec of o.nodes.filter((n) => n.role === 'worker')) {
    const node = nodes[spec.name]!;
    await node.exec(['mkdir', '-p', '/etc/capi-uo']);
    const ip = networkNodes.find((n) => n.name === spec.name)!.ip;
    await node.sh('cat > /etc/capi-uo/kubeadm.yaml', {
      input: joinConfig(spec, ip, `${cpIp}:${API_PORT}`, token!, caHash!),
    });
    await node.sh('kubeadm join --config /etc/capi-uo/kubeadm.yaml', { timeoutMs: 300_000 });
  }
  const join_ = (Date.now() - joinStarted) / 1000;

  const port = await network.forwardFromHost(cpSpec.name, API_PORT);
  const server = `https://127.0.0.1:${port}`;
  // CAPI's `<cluster>-kubeconfig` Secret holds a system:masters client certificate, as kubeadm's
  // super-admin.conf does; admin.conf's group is authorized by RBAC, which answers 403 for a few
  // seconds after the API server restarts, until its caches are filled again.
  const kubeconfig = (await cp.sh('cat /etc/kubernetes/super-admin.conf')).replace(
    /server: https:\/\/[^\s]+/,
    `server: ${server}`,
  );
  await waitNodesReady(cp, o.nodes.length);
  if (o.services) await startServiceProxies(cp, `https://${cpIp}:${API_PORT}`, nodes, `${POD_NETWORK}.0.0/16`);
  return { kubeconfig, server, nodes, timings: { boot, init, join: join_ } };
}

function kubeletArgs(spec: ClusterNodeSpec, ip: string) {
  return Object.entries({ 'node-ip': ip, ...(spec.kubeletExtraArgs ?? {}) }).map(([name, value]) => ({ name, value }));
}

/**
 * kubeadm's v1beta4 configuration, as Cluster API's KubeadmConfig renders it for the first
 * control plane. A virtual machine (bench/vm-node.ts) passes every preflight check.
 */
export function initConfig(spec: ClusterNodeSpec, ip: string, version: string, host: NodeHost = 'container'): string {
  const init = {
    apiVersion: 'kubeadm.k8s.io/v1beta4',
    kind: 'InitConfiguration',
    localAPIEndpoint: { advertiseAddress: ip, bindPort: API_PORT },
    nodeRegistration: {
      name: spec.name,
      criSocket: 'unix:///run/containerd/containerd.sock',
      ignorePreflightErrors: host === 'container' ? HOST_PREFLIGHT_EXCEPTIONS : [],
      kubeletExtraArgs: kubeletArgs(spec, ip),
    },
    // kube-proxy: see node-images.ts.
    skipPhases: ['addon/kube-proxy'],
    ...(host === 'vm' ? { timeouts: VM_KUBEADM_TIMEOUTS } : {}),
  };
  const cluster = {
    apiVersion: 'kubeadm.k8s.io/v1beta4',
    kind: 'ClusterConfiguration',
    kubernetesVersion: version,
    imageRepository: `${REGISTRY_HOST}:${REGISTRY_SITE_PORT}`,
    etcd: { local: { imageTag: ETCD_TAG } },
    apiServer: { certSANs: ['127.0.0.1'] },
    networking: { serviceSubnet: SERVICE_SUBNET },
  };
  return [init, cluster, kubeletConfig(host)].map((d) => stringify(d)).join('---\n');
}

function joinConfig(spec: ClusterNodeSpec, ip: string, endpoint: string, token: string, caHash: string): string {
  return stringify({
    apiVersion: 'kubeadm.k8s.io/v1beta4',
    kind: 'JoinConfiguration',
    discovery: { bootstrapToken: { apiServerEndpoint: endpoint, token, caCertHashes: [caHash] } },
    nodeRegistration: {
      name: spec.name,
      criSocket: 'unix:///run/containerd/containerd.sock',
      ignorePreflightErrors: HOST_PREFLIGHT_EXCEPTIONS,
      kubeletExtraArgs: kubeletArgs(spec, ip),
    },
  });
}

/**
 * A container node's file system is the host's: the kubelet's default eviction thresholds
 * (imagefs 15 % free, nodefs 10 %) would measure the whole host disk, and a host a little
 * fuller than that (a fresh clone's caches) puts every node under DiskPressure, whose kubelet
 * then rejects the upgrade Job's pods ("Evicted"). Absolute sizes measure what a node needs.
 * Every signal is named: the ones left out of evictionHard would be 0.
 */
const CONTAINER_EVICTION_HARD = {
  'memory.available': '100Mi',
  'nodefs.available': '1Gi',
  'imagefs.available': '1Gi',
  'nodefs.inodesFree': '5%',
  'imagefs.inodesFree': '5%',
};

/**
 * In a container, cgroupfs (see node-files.ts), failCgroupV1: false, which a kubelet ≥ 1.35
 * needs to run on this host's cgroup v1 at all, and eviction thresholds in absolute sizes; a
 * virtual machine (its own disk, cgroup v2) takes the defaults (systemd's driver).
 */
function kubeletConfig(host: NodeHost) {
  return {
    apiVersion: 'kubelet.config.k8s.io/v1beta1',
    kind: 'KubeletConfiguration',
    ...(host === 'container'
      ? { cgroupDriver: 'cgroupfs', failCgroupV1: false, evictionHard: CONTAINER_EVICTION_HARD }
      : { cgroupDriver: 'systemd' }),
    failSwapOn: false,
  };
}

async function waitNodesReady(cp: ContainerNode, count: number): Promise<void> {
  const deadline = Date.now() + 120_000;
  for (;;) {
    const out = await cp
      .sh(
        'kubectl --kubeconfig /etc/kubernetes/admin.conf get nodes -o jsonpath=\'{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\\n"}{end}\'',
      )
      .catch(() => '');
    if (out.split('\n').filter((l) => l === 'True').length === count) return;
    if (Date.now() > deadline) throw new Error(`the cluster's ${count} nodes were not Ready in 120 s:\n${out}`);
    await sleep(500);
  }
}
