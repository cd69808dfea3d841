// The nodes' network, off the host's interfaces: a "site" network namespace holding a
// bridge (the nodes' LAN, 10.88.0.0/24, with no uplink) and one namespace per node joined
// to it by a veth pair. Nodes have no route out: their default route points at the bridge,
// which leads nowhere. The host reaches a node's port only through a relay listening on
// 127.0.0.1, and nodes reach a host service (the registry, the binary mirror) only through
// a relay on the bridge's address that connects to the host's loopback. Pod CIDRs are
// routed node to node, and the site namespace routes them back to their node.
import { spawn, type ChildProcess } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort } from '../../src/local/free-ports.ts';
import { run } from './run.ts';
import type { Teardown } from './teardown.ts';

/** The site bridge's address: the nodes' gateway, where host services are relayed. */
export const SITE_GATEWAY = '10.88.0.1';
const SITE_PREFIX = 24;

export interface NetworkNode {
  name: string;
  /** Its address on the site network, e.g. 10.88.0.10. */
  ip: string;
  /** The pod CIDR its CNI bridge hands out, e.g. 10.244.1.0/24. */
  podCidr: string;
}

export interface NodeNetwork {
  /** The network namespace (a name under /run/netns) a node's container joins. */
  namespaceOf(node: string): string;
  /** A relay from 127.0.0.1:<returned port> on the host to `port` of a node. */
  forwardFromHost(node: string, port: number): Promise<number>;
  /** A relay from SITE_GATEWAY:`sitePort` (what nodes dial) to 127.0.0.1:`hostPort` on the host. */
  exposeToNodes(sitePort: number, hostPort: number): Promise<void>;
}

/** Names under /run/netns carry the owning process, so an orphan's can be found and removed. */
export function namespacePrefix(pid = process.pid): string {
  return `capi-uo-${pid}-`;
}

export async function createNodeNetwork(
  teardown: Teardown,
  id: string,
  nodes: readonly NetworkNode[],
): Promise<NodeNetwork> {
  const prefix = `${namespacePrefix()}${id}`;
  const site = `${prefix}-site`;
  const nsOf = (node: string) => `${prefix}-${node}`;
  const ip = (...args: string[]) => run('ip', args);

  await ip('netns', 'add', site);
  teardown.add(`network namespace ${site}`, () => ip('netns', 'del', site).then(() => undefined));
  await ip('-n', site, 'link', 'set', 'lo', 'up');
  await ip('-n', site, 'link', 'add', 'br0', 'type', 'bridge');
  await ip('-n', site, 'addr', 'add', `${SITE_GATEWAY}/${SITE_PREFIX}`, 'dev', 'br0');
  await ip('-n', site, 'link', 'set', 'br0', 'up');

  for (const [i, node] of nodes.entries()) {
    const ns = nsOf(node.name);
    await ip('netns', 'add', ns);
    teardown.add(`network namespace ${ns}`, () => ip('netns', 'del', ns).then(() => undefined));
    const siteEnd = `veth${i}`;
    await ip('link', 'add', siteEnd, 'netns', site, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', ns);
    await ip('-n', site, 'link', 'set', siteEnd, 'master', 'br0', 'up');
    await ip('-n', ns, 'link', 'set', 'lo', 'up');
    await ip('-n', ns, 'addr', 'add', `${node.ip}/${SITE_PREFIX}`, 'dev', 'eth0');
    await ip('-n', ns, 'link', 'set', 'eth0', 'up');
    // kubeadm and the kubelet pick their address from the default route: it leads to the
    // bridge, which has no uplink.
    await ip('-n', ns, 'route', 'add', 'default', 'via', SITE_GATEWAY);
    await ip('-n', site, 'route', 'add', node.podCidr, 'via', node.ip);
  }
  for (const node of nodes)
    for (const other of nodes)
      if (other !== node) await ip('-n', nsOf(node.name), 'route', 'add', other.podCidr, 'via', other.ip);

  const relay = (ns: string | undefined, listen: string, connect: string[]) => {
    // socat splits an address at ':' and ',': the command's own are escaped.
    const args = [`TCP-LISTEN:${listen},fork,reuseaddr`, `EXEC:${connect.join(' ').replace(/[:,]/g, '\\$&')}`];
    const child = ns ? spawn('ip', ['netns', 'exec', ns, 'socat', ...args], opts) : spawn('socat', args, opts);
    teardown.add(`relay ${listen}`, () => killGroup(child));
    return child;
  };
  const opts = { detached: true, stdio: 'ignore' } as const;

  return {
    namespaceOf: nsOf,
    async forwardFromHost(node, port) {
      const target = nodes.find((n) => n.name === node);
      if (!target) throw new Error(`no node ${node} in this network`);
      for (let attempt = 1; ; attempt++) {
        const hostPort = await freePort();
        const child = relay(undefined, `${hostPort},bind=127.0.0.1`, [
          'ip',
          'netns',
          'exec',
          site,
          'socat',
          'STDIO',
          `TCP:${target.ip}:${port}`,
        ]);
        if (await listening(child, '127.0.0.1', hostPort)) return hostPort;
        if (attempt === 3) throw new Error(`could not relay 127.0.0.1 to ${node}:${port}`);
      }
    },
    async exposeToNodes(sitePort, hostPort) {
      // socat in the site namespace enters the host's (this process's) network namespace
      // for each connection, so it reaches the host's loopback and nothing else.
      const child = relay(site, `${sitePort},bind=${SITE_GATEWAY}`, [
        'nsenter',
        `--net=/proc/${process.pid}/ns/net`,
        'socat',
        'STDIO',
        `TCP:127.0.0.1:${hostPort}`,
      ]);
      if (!(await listeningIn(site, child, sitePort)))
        throw new Error(`could not relay ${SITE_GATEWAY}:${sitePort} to the host's 127.0.0.1:${hostPort}`);
    },
  };
}

async function listening(child: ChildProcess, host: string, port: number): Promise<boolean> {
  const { connect } = await import('node:net');
  for (let i = 0; i < 50 && child.exitCode === null; i++) {
    const ok = await new Promise<boolean>((resolve) => {
      const s = connect(port, host, () => {
        s.destroy();
        resolve(true);
      });
      s.on('error', () => resolve(false));
    });
    if (ok) return true;
    await sleep(50);
  }
  return false;
}

async function listeningIn(ns: string, child: ChildProcess, port: number): Promise<boolean> {
  for (let i = 0; i < 50 && child.exitCode === null; i++) {
    const out = await run('ip', ['netns', 'exec', ns, 'ss', '-Hltn', `sport = :${port}`]);
    if (out.trim() !== '') return true;
    await sleep(50);
  }
  return false;
}

/** Stops a relay and the per-connection children it forked (its process group). */
async function killGroup(child: ChildProcess): Promise<void> {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  try {
    process.kill(-child.pid, 'SIGTERM');
  } catch {
    return;
  }
  const timer = setTimeout(() => {
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      /* gone */
    }
  }, 5_000);
  await exited;
  clearTimeout(timer);
}
