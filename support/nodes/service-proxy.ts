// Services for a cluster whose pods call each other by Service (a management cluster running
// the extension): kube-proxy on every node as a host service, as distributions that ship it
// outside a pod do. kubeadm's kube-proxy add-on runs it from an image that must carry iptables;
// the node's root file system has iptables already (tools-nodes.sh), so the release's own
// kube-proxy binary runs there under systemd, with a ServiceAccount token of the
// system:node-proxier role kubeadm's add-on binds.
import { stringify } from 'yaml';
import type { ContainerNode } from './container-node.ts';

/** kube-proxy's binary on a node (installed beside the kubelet). */
export const KUBE_PROXY_PATH = '/usr/bin/kube-proxy';

/**
 * masqueradeAll: a pod calling a Service whose endpoint is on its own node's bridge gets the
 * answer bridged straight back, past the conntrack entry that undoes the DNAT, unless the
 * kernel sends bridged traffic through iptables (br_netfilter), which a container node's
 * network namespace cannot turn on. Masquerading every Service connection makes the answer
 * come back through the node. conntrack maxPerCore 0: the limits are the host kernel's.
 */
function proxyConfig(node: string, clusterCidr: string): string {
  return stringify({
    apiVersion: 'kubeproxy.config.k8s.io/v1alpha1',
    kind: 'KubeProxyConfiguration',
    clientConnection: { kubeconfig: '/etc/kubernetes/kube-proxy.conf' },
    hostnameOverride: node,
    mode: 'iptables',
    clusterCIDR: clusterCidr,
    iptables: { masqueradeAll: true },
    conntrack: { maxPerCore: 0 },
  });
}

export async function startServiceProxies(
  cp: ContainerNode,
  apiServer: string,
  nodes: Record<string, ContainerNode>,
  clusterCidr: string,
): Promise<void> {
  const kubectl = (args: string) => cp.sh(`kubectl --kubeconfig /etc/kubernetes/admin.conf ${args}`);
  await kubectl('create serviceaccount kube-proxy -n kube-system');
  await kubectl(
    'create clusterrolebinding capi-uo:kube-proxy --clusterrole=system:node-proxier --serviceaccount=kube-system:kube-proxy',
  );
  const token = (await kubectl('create token kube-proxy -n kube-system --duration=24h')).trim();
  const ca = Buffer.from(await cp.sh('cat /etc/kubernetes/pki/ca.crt')).toString('base64');
  const kubeconfig = stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'cluster', cluster: { server: apiServer, 'certificate-authority-data': ca } }],
    users: [{ name: 'kube-proxy', user: { token } }],
    contexts: [{ name: 'kube-proxy', context: { cluster: 'cluster', user: 'kube-proxy' } }],
    'current-context': 'kube-proxy',
  });
  for (const [name, node] of Object.entries(nodes)) {
    await node.sh('umask 077 && cat > /etc/kubernetes/kube-proxy.conf', { input: kubeconfig });
    await node.sh('cat > /etc/kubernetes/kube-proxy.yaml', { input: proxyConfig(name, clusterCidr) });
    await node.sh(
      `systemd-run --unit=kube-proxy --property=Restart=always ${KUBE_PROXY_PATH} --config=/etc/kubernetes/kube-proxy.yaml`,
    );
  }
  // Ready once each node's rules name the API server's own Service.
  for (const [name, node] of Object.entries(nodes)) {
    const deadline = Date.now() + 60_000;
    while (
      !(await node.sh('iptables-save -t nat 2>/dev/null | grep -c "default/kubernetes:https" || true'))
        .trim()
        .match(/^[1-9]/)
    ) {
      if (Date.now() > deadline)
        throw new Error(
          `kube-proxy on ${name} wrote no rules in 60 s:\n${await node.sh('journalctl -u kube-proxy --no-pager -n 30')}`,
        );
      await new Promise((r) => setTimeout(r, 500));
    }
  }
}
