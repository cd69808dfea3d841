// What a container node holds besides the Debian root: the units that start containerd and
// the kubelet (as the deb packages of a real node install them), containerd's
// configuration (the CRI plugin, the CNI bridge, the local registry's CA), the CNI bridge's
// configuration with the node's own pod CIDR, and the names of the node and the registry.
// Pure: a list of files; container-node.ts writes them into the node's root. A virtual
// machine (bench/vm-node.ts) has its own kernel and cgroup v2: it gets the same files
// without the container's preparation, with systemd's cgroup driver and the kernel modules
// and bridge setting a real node is given.

/** A file (or a symlink) at an absolute path inside the node. */
export type NodeFile = { path: string; content: string; mode?: number } | { path: string; symlinkTo: string };

export interface NodeFilesInput {
  name: string;
  ip: string;
  podCidr: string;
  /** `<host>:<port>` of the registry as nodes dial it (a name /etc/hosts maps to the site gateway). */
  registry: { host: string; port: number; gateway: string; caPem: string };
  /** The pause image kubeadm expects (containerd's sandbox image). */
  sandboxImage: string;
  /** What the node runs on; default a container (the tier's). */
  host?: NodeHost;
}

/**
 * `container`: the host's kernel and cgroup v1, cgroupfs. `vm`: a kernel of its own with
 * cgroup v2, where systemd owns the cgroups and containerd and the kubelet use its driver.
 */
export type NodeHost = 'container' | 'vm';

const UNIT_DIR = '/etc/systemd/system';
const WANTS = `${UNIT_DIR}/multi-user.target.wants`;

/**
 * A container shares the host's kernel: its cgroup controllers are mounted read-only and
 * its /proc/sys is the host's. This unit makes the node's own cgroup subtree writable (its
 * cgroup namespace starts there), makes /proc/sys/net writable (the node has its own
 * network namespace), and shows the kubelet its kernel defaults (kernel.panic=10,
 * kernel.panic_on_oops=1) through files bound over those keys, so the host's settings are
 * never changed.
 */
const NODE_PREP_UNIT = `[Unit]
Description=Container node preparation: writable cgroups and network settings, the kubelet's kernel defaults
DefaultDependencies=no
Before=containerd.service kubelet.service
After=local-fs.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/local/sbin/capi-uo-node-prep

[Install]
WantedBy=multi-user.target
`;

const NODE_PREP_SCRIPT = `#!/bin/sh
set -eu
mount -o remount,rw /sys/fs/cgroup
for c in /sys/fs/cgroup/*/; do
  case "$c" in */unified/|*/systemd/) ;; *) mount -o remount,bind,rw "$c" ;; esac
done
mount --bind /proc/sys/net /proc/sys/net
mount -o remount,bind,rw /proc/sys/net
sysctl -qw net.ipv4.ip_forward=1
for key in panic panic_on_oops; do
  mount --bind "/etc/capi-uo/sysctl/$key" "/proc/sys/kernel/$key"
done
`;

const containerdUnit = (host: NodeHost) => `[Unit]
Description=containerd container runtime
${host === 'container' ? 'After=network.target capi-uo-node-prep.service\nRequires=capi-uo-node-prep.service' : 'After=network.target'}

[Service]
ExecStart=/usr/local/bin/containerd
Restart=always
RestartSec=1
Delegate=yes
KillMode=process
LimitNOFILE=infinity

[Install]
WantedBy=multi-user.target
`;

// As the kubelet deb package and kubeadm's drop-in install it on a real node.
const KUBELET_UNIT = `[Unit]
Description=kubelet: The Kubernetes Node Agent
After=containerd.service
Wants=containerd.service

[Service]
ExecStart=/usr/bin/kubelet
Restart=always
RestartSec=1
StartLimitInterval=0

[Install]
WantedBy=multi-user.target
`;

const KUBEADM_DROP_IN = `[Service]
Environment="KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf"
Environment="KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml"
EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env
EnvironmentFile=-/etc/default/kubelet
ExecStart=
ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS
`;

/**
 * containerd 2.x (config version 3). In a container, cgroupfs, not SystemdCgroup: the host's
 * cgroups are v1 and systemd inside a container does not own the controllers; and
 * restrict_oom_score_adj: this host withholds CAP_SYS_RESOURCE even from root, so a pod's
 * negative oom_score_adj (the kubelet asks -998 for sandboxes) is clamped to containerd's
 * own instead of failing. A virtual machine needs neither.
 */
function containerdConfig(sandboxImage: string, host: NodeHost): string {
  const container = host === 'container';
  return `version = 3

[plugins.'io.containerd.cri.v1.images'.registry]
  config_path = '/etc/containerd/certs.d'

[plugins.'io.containerd.cri.v1.images'.pinned_images]
  sandbox = '${sandboxImage}'

[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = ${container}

[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
  SystemdCgroup = ${!container}

[plugins.'io.containerd.cri.v1.runtime'.cni]
  bin_dirs = ['/usr/lib/cni']
  conf_dir = '/etc/cni/net.d'
`;
}

function cniConfig(podCidr: string): string {
  return JSON.stringify(
    {
      cniVersion: '1.0.0',
      name: 'pods',
      plugins: [
        {
          type: 'bridge',
          bridge: 'cni0',
          isGateway: true,
          ipMasq: false,
          hairpinMode: true,
          ipam: { type: 'host-local', ranges: [[{ subnet: podCidr }]], routes: [{ dst: '0.0.0.0/0' }] },
        },
        { type: 'portmap', capabilities: { portMappings: true } },
      ],
    },
    null,
    2,
  );
}

/** What a container node needs to use the host's kernel (see NODE_PREP_UNIT). */
const CONTAINER_PREP: NodeFile[] = [
  { path: '/etc/capi-uo/sysctl/panic', content: '10\n' },
  { path: '/etc/capi-uo/sysctl/panic_on_oops', content: '1\n' },
  { path: '/usr/local/sbin/capi-uo-node-prep', content: NODE_PREP_SCRIPT, mode: 0o755 },
  { path: `${UNIT_DIR}/capi-uo-node-prep.service`, content: NODE_PREP_UNIT },
];

/** What kubeadm's preflight asks of a machine's own kernel: overlay, br_netfilter, bridged traffic through iptables. */
const VM_KERNEL: NodeFile[] = [
  { path: '/etc/modules-load.d/kubernetes.conf', content: 'overlay\nbr_netfilter\n' },
  { path: '/etc/sysctl.d/91-kubernetes-bridge.conf', content: 'net.bridge.bridge-nf-call-iptables = 1\n' },
];

export function nodeFiles(input: NodeFilesInput): NodeFile[] {
  const host = input.host ?? 'container';
  const registry = `${input.registry.host}:${input.registry.port}`;
  const units = [...(host === 'container' ? ['capi-uo-node-prep'] : []), 'containerd', 'kubelet'];
  return [
    { path: '/etc/hostname', content: `${input.name}\n` },
    {
      path: '/etc/hosts',
      content: `127.0.0.1 localhost\n${input.ip} ${input.name}\n${input.registry.gateway} ${input.registry.host}\n`,
    },
    // The site's name server is the gateway, where nothing answers: nothing resolves beyond
    // /etc/hosts, at once (CoreDNS refuses to start without a name server to forward to).
    { path: '/etc/resolv.conf', content: `nameserver ${input.registry.gateway}\noptions timeout:1 attempts:1\n` },
    ...(host === 'container' ? CONTAINER_PREP : VM_KERNEL),
    { path: `${UNIT_DIR}/containerd.service`, content: containerdUnit(host) },
    { path: `${UNIT_DIR}/kubelet.service`, content: KUBELET_UNIT },
    { path: `${UNIT_DIR}/kubelet.service.d/10-kubeadm.conf`, content: KUBEADM_DROP_IN },
    ...units.map((u) => ({ path: `${WANTS}/${u}.service`, symlinkTo: `${UNIT_DIR}/${u}.service` })),
    { path: '/etc/containerd/config.toml', content: containerdConfig(input.sandboxImage, host) },
    {
      path: `/etc/containerd/certs.d/${registry}/hosts.toml`,
      content: `server = "https://${registry}"\n\n[host."https://${registry}"]\n  capabilities = ["pull", "resolve"]\n  ca = "/etc/containerd/certs.d/${registry}/ca.crt"\n`,
    },
    { path: `/etc/containerd/certs.d/${registry}/ca.crt`, content: input.registry.caPem },
    { path: '/etc/cni/net.d/10-bridge.conflist', content: cniConfig(input.podCidr) },
    { path: '/etc/crictl.yaml', content: 'runtime-endpoint: unix:///run/containerd/containerd.sock\n' },
  ];
}
