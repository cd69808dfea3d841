// A TCG virtual machine as a kubeadm node (not a test): what the real-node tier's node
// host would cost if its nodes were virtual machines instead of containers: the node host
// was chosen by measuring both.
//
//   make bench-vm-node [BENCH_ARGS='--cpus 2 --memory 4096 --no-wait']
//
// It builds the VM's disk from the tool cache's VM root (scripts/tools-nodes.sh --vm: the
// node packages, a Debian kernel, qemu-guest-agent) with the node's files as the tier
// writes them (node-files.ts, host `vm`: systemd's cgroup driver on the guest's cgroup v2)
// and both releases' binaries, written with `mkfs.ext4 -d`; starts the tier's site
// (node-site.ts: the local registry with the control-plane images); boots the disk with the
// kernel from that root under `qemu-system-x86_64 -accel tcg` (this machine's /dev/kvm
// cannot run a stock kernel), on qemu's user network with no route out
// (`restrict=on`): the guest reaches the registry through a `guestfwd` to the registry's
// port on 127.0.0.1, the host reaches the API server through a `hostfwd` on 127.0.0.1.
// Commands run in the guest through qemu-guest-agent on a virtio serial port.
//
// It times: the boot to systemd's multi-user, `kubeadm init` at the starting release,
// `kubeadm upgrade apply -y` to the target (kubeadm swapped first, as the Job does), and the
// kubelet's swap and restart until the Node is Ready at the target. Then it stops the VM
// and the site and removes its scratch directory.
//
// It waits, polling every 30 s, until no `systemd-nspawn` and no `jest` runs on the
// machine (the node tier), unless --no-wait: both on 2 cores would skew both figures.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { createConnection, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { freePort } from '../src/local/free-ports.ts';
import { installNodeFiles } from '../support/nodes/container-node.ts';
import { httpsGet } from '../support/nodes/https-get.ts';
import {
  initConfig,
  PAUSE_TAG,
  REGISTRY_HOST,
  REGISTRY_SITE_PORT,
  VM_KUBEADM_TIMEOUTS,
} from '../support/nodes/kubeadm-cluster.ts';
import { nodeFiles, type NodeFile } from '../support/nodes/node-files.ts';
import { startNodeSite } from '../support/nodes/node-site.ts';
import { createCertificateAuthority } from '../src/local/certs.ts';
import { requireHostTools, run } from '../support/nodes/run.ts';
import { Teardown } from '../support/nodes/teardown.ts';

const { values: args } = parseArgs({
  options: {
    cpus: { type: 'string', default: '2' },
    memory: { type: 'string', default: '4096' },
    'no-wait': { type: 'boolean', default: false },
    'init-timeout': { type: 'string', default: '25' },
    'upgrade-timeout': { type: 'string', default: '30' },
  },
});

const NAME = 'vm-cp';
/** qemu's user network: the guest's address, its gateway, and where guestfwd answers for the site. */
const GUEST_IP = '10.0.2.15';
const SLIRP_GATEWAY = '10.0.2.2';
const SITE_ADDRESS = '10.0.2.100';
const API_PORT = 6443;
const DISK_BYTES = 8 * 1024 ** 3;
const TARGET_BIN = '/opt/capi-uo/target';
const KUBECTL = 'kubectl --kubeconfig /etc/kubernetes/admin.conf';

const log = (line: string) => console.log(`vm-node: ${line}`);
const seconds = (since: number) => Number(((Date.now() - since) / 1000).toFixed(1));

// --- qemu-guest-agent: JSON commands on the VM's virtio serial port ---------------------------

interface ExecResult {
  code: number;
  out: string;
  err: string;
}

class GuestAgent {
  private buffer = '';
  private pending:
    { accept: (msg: Record<string, unknown>) => boolean; resolve: (msg: Record<string, unknown>) => void } | undefined;
  private queue: Promise<unknown> = Promise.resolve();
  private readonly socket: Socket;

  private constructor(socket: Socket) {
    this.socket = socket;
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      this.buffer += chunk;
      for (let i = this.buffer.indexOf('\n'); i >= 0; i = this.buffer.indexOf('\n')) {
        const line = this.buffer.slice(0, i).replace(/^[^{]*/, '');
        this.buffer = this.buffer.slice(i + 1);
        try {
          const msg = JSON.parse(line) as Record<string, unknown>;
          // An answer to a guest-sync that timed out is not the one awaited.
          if (this.pending && this.pending.accept(msg)) {
            const { resolve } = this.pending;
            this.pending = undefined;
            resolve(msg);
          }
        } catch {
          // a partial line from before the agent was up
        }
      }
    });
  }

  /** Connects to qemu's end of the port and waits until the guest's agent answers a guest-sync. */
  static async connect(path: string, qemu: ChildProcess, timeoutMs: number): Promise<GuestAgent> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (qemu.exitCode !== null) throw new Error(`qemu exited (${qemu.exitCode}) before the guest agent answered`);
      const socket = await new Promise<Socket | undefined>((resolve) => {
        const s = createConnection(path);
        s.once('connect', () => resolve(s));
        s.once('error', () => resolve(undefined));
      });
      if (socket) {
        const agent = new GuestAgent(socket);
        for (let id = 1; Date.now() < deadline; id++) {
          const reply = await agent
            .send({ execute: 'guest-sync', arguments: { id } }, 3000, (msg) => msg.return === id)
            .catch(() => undefined);
          if (reply?.return === id) return agent;
        }
        socket.destroy();
      }
      if (Date.now() > deadline) throw new Error(`the guest agent did not answer in ${timeoutMs / 1000} s`);
      await sleep(500);
    }
  }

  private send(
    command: object,
    timeoutMs: number,
    accept: (msg: Record<string, unknown>) => boolean = () => true,
  ): Promise<Record<string, unknown>> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending = undefined;
        reject(new Error(`the guest agent did not answer ${JSON.stringify(command)} in ${timeoutMs} ms`));
      }, timeoutMs);
      this.pending = {
        accept,
        resolve: (msg) => {
          clearTimeout(timer);
          resolve(msg);
        },
      };
      this.socket.write(`${JSON.stringify(command)}\n`);
    });
  }

  private call<T>(execute: string, args: object): Promise<T> {
    const next = this.queue.then(async () => {
      const msg = await this.send({ execute, arguments: args }, 60_000);
      if (msg.error) throw new Error(`guest agent ${execute}: ${JSON.stringify(msg.error)}`);
      return msg.return as T;
    });
    this.queue = next.catch(() => undefined);
    return next;
  }

  /** `bash -c script` in the guest, as root; resolves when it exits, throws after timeoutMs. */
  async exec(script: string, options: { input?: string; timeoutMs?: number } = {}): Promise<ExecResult> {
    const { pid } = await this.call<{ pid: number }>('guest-exec', {
      path: '/bin/bash',
      arg: ['-c', script],
      env: ['PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', 'HOME=/root'],
      'capture-output': true,
      ...(options.input !== undefined ? { 'input-data': Buffer.from(options.input).toString('base64') } : {}),
    });
    const deadline = Date.now() + (options.timeoutMs ?? 120_000);
    for (;;) {
      const s = await this.call<{ exited: boolean; exitcode?: number; 'out-data'?: string; 'err-data'?: string }>(
        'guest-exec-status',
        { pid },
      );
      const text = (b64?: string) => Buffer.from(b64 ?? '', 'base64').toString();
      if (s.exited) return { code: s.exitcode ?? -1, out: text(s['out-data']), err: text(s['err-data']) };
      if (Date.now() > deadline) throw new TimedOut(script);
      await sleep(1000);
    }
  }

  /** Like exec, and throws with the output unless the script exits 0. */
  async sh(script: string, options: { input?: string; timeoutMs?: number } = {}): Promise<string> {
    const r = await this.exec(script, options);
    if (r.code !== 0) throw new Error(`in the VM: \`${script}\` exited ${r.code}\n${(r.err || r.out).slice(-3000)}`);
    return r.out;
  }

  close(): void {
    this.socket.destroy();
  }
}

class TimedOut extends Error {
  constructor(script: string) {
    super(`\`${script}\` did not finish in time`);
  }
}

// --- the VM ---------------------------------------------------------------------------------

/** The guest's address on qemu's user network, before containerd and the kubelet start. */
const NETWORK_UNIT = `[Unit]
Description=The VM's address on qemu's user network
After=sys-subsystem-net-devices-eth0.device
BindsTo=sys-subsystem-net-devices-eth0.device
Before=network.target containerd.service kubelet.service
Wants=network.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=ip link set eth0 up
ExecStart=ip addr add ${GUEST_IP}/24 dev eth0
ExecStart=ip route add default via ${SLIRP_GATEWAY}

[Install]
WantedBy=multi-user.target
`;

function vmRootfs(): string {
  const dir = process.env.NODE_VM_ROOTFS_DIR;
  if (!dir)
    throw new Error(
      'NODE_VM_ROOTFS_DIR is not set: eval "$(bash scripts/tools-nodes.sh --vm)" (make bench-vm-node does)',
    );
  return dir;
}

function bootFile(rootfs: string, prefix: string): string {
  const name = readdirSync(join(rootfs, 'boot')).find((f) => f.startsWith(prefix));
  if (!name) throw new Error(`${rootfs}/boot has no ${prefix}*: the VM root has no kernel`);
  return join(rootfs, 'boot', name);
}

/** The VM's disk: the cached VM root, the node's files and both releases' binaries, as ext4. */
async function buildDisk(teardown: Teardown, scratch: string, rootfs: string, files: NodeFile[]): Promise<string> {
  const upper = join(scratch, 'upper');
  const work = join(scratch, 'work');
  const root = join(scratch, 'root');
  for (const d of [upper, work, root]) mkdirSync(d, { recursive: true });
  await run('mount', ['-t', 'overlay', 'overlay', '-o', `lowerdir=${rootfs},upperdir=${upper},workdir=${work}`, root]);
  const unmount = () => run('umount', [root]).then(() => undefined);
  teardown.add('the disk tree', unmount);
  const tools = nodeToolsDirs();
  installNodeFiles(root, files, [
    ...['containerd', 'containerd-shim-runc-v2', 'ctr'].map((b) => ({
      path: `/usr/local/bin/${b}`,
      from: `${tools.containerd}/${b}`,
    })),
    { path: '/usr/local/bin/crictl', from: tools.crictl },
    ...['kubeadm', 'kubelet', 'kubectl'].flatMap((b) => [
      { path: `/usr/bin/${b}`, from: `${tools.from}/${b}` },
      // What the Job would download from the site's mirror.
      { path: `${TARGET_BIN}/${b}`, from: `${tools.to}/${b}` },
    ]),
  ]);
  const disk = join(scratch, 'disk.img');
  writeFileSync(disk, '');
  truncateSync(disk, DISK_BYTES);
  await run('mkfs.ext4', ['-q', '-F', '-L', 'root', '-d', root, disk], { timeoutMs: 600_000 });
  return disk;
}

function nodeToolsDirs() {
  const env = (name: string) => {
    const v = process.env[name];
    if (!v) throw new Error(`${name} is not set: source scripts/env.sh --nodes`);
    return v;
  };
  return {
    containerd: env('NODE_CONTAINERD_DIR'),
    crictl: env('NODE_CRICTL_BINARY'),
    from: env('NODE_KUBE_FROM_DIR'),
    to: env('NODE_KUBE_TO_DIR'),
  };
}

function startQemu(
  teardown: Teardown,
  o: { scratch: string; rootfs: string; disk: string; apiPort: number; registryPort: number },
): { qemu: ChildProcess; agentSocket: string; console: string } {
  const agentSocket = join(o.scratch, 'qga.sock');
  const console_ = join(o.scratch, 'console.log');
  const qemuArgs = [
    '-accel', 'tcg,thread=multi',
    '-cpu', 'max',
    '-smp', args.cpus,
    '-m', args.memory,
    '-kernel', bootFile(o.rootfs, 'vmlinuz-'),
    '-initrd', bootFile(o.rootfs, 'initrd.img-'),
    '-append', 'root=/dev/vda rw console=ttyS0 net.ifnames=0 systemd.firstboot=off',
    '-drive', `file=${o.disk},if=virtio,format=raw,cache=unsafe`,
    '-netdev',
    `user,id=n0,restrict=on,hostfwd=tcp:127.0.0.1:${o.apiPort}-:${API_PORT},` +
      `guestfwd=tcp:${SITE_ADDRESS}:${REGISTRY_SITE_PORT}-cmd:socat STDIO TCP:127.0.0.1:${o.registryPort}`,
    '-device', 'virtio-net-pci,netdev=n0',
    '-device', 'virtio-rng-pci',
    '-chardev', `socket,id=qga,path=${agentSocket},server=on,wait=off`,
    '-device', 'virtio-serial-pci',
    '-device', 'virtserialport,chardev=qga,name=org.qemu.guest_agent.0',
    '-display', 'none',
    '-monitor', 'none',
    '-serial', `file:${console_}`,
    '-no-reboot',
  ]; // prettier-ignore
  const qemu = spawn('qemu-system-x86_64', qemuArgs, { stdio: ['ignore', 'inherit', 'inherit'] });
  const exited = new Promise<void>((resolve) => qemu.once('exit', () => resolve()));
  teardown.add('qemu', async () => {
    if (qemu.exitCode !== null || qemu.signalCode !== null) return;
    qemu.kill('SIGTERM');
    const timer = setTimeout(() => qemu.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
  });
  return { qemu, agentSocket, console: console_ };
}

// --- phases ----------------------------------------------------------------------------------

/** Runs a kubeadm command in the guest with each output line stamped with the guest's clock. */
async function timedKubeadm(
  agent: GuestAgent,
  what: string,
  command: string,
  timeoutMin: number,
): Promise<{ figure: string; finished: boolean }> {
  const logFile = `/root/${what}.log`;
  const began = Date.now();
  const stamped = `set -o pipefail; start=$(date +%s); ${command} 2>&1 | while IFS= read -r l; do printf '%s %s\\n' "$(( $(date +%s) - start ))" "$l"; done > ${logFile}`;
  let outcome = 'ok';
  try {
    const r = await agent.exec(stamped, { timeoutMs: timeoutMin * 60_000 });
    if (r.code !== 0) outcome = `failed (exit ${r.code})`;
  } catch (err) {
    if (!(err instanceof TimedOut)) throw err;
    outcome = `did not finish in ${timeoutMin} min`;
  }
  const elapsed = seconds(began);
  // The first line of each of kubeadm's bracketed phases, with its second.
  const lines = (await agent.exec(`cat ${logFile}`)).out.split('\n');
  const seen = new Set<string>();
  const phases = lines
    .map((l) => /^(\d+) \[([\w-]+)\]/.exec(l))
    .filter((m): m is RegExpExecArray => m !== null && !seen.has(m[2]!) && Boolean(seen.add(m[2]!)))
    .map((m) => `${m[2]}@${m[1]}`)
    .join(' ');
  log(`${what} (${command}): ${elapsed} s, ${outcome}; kubeadm's phases, first seen at second: ${phases}`);
  if (outcome !== 'ok') log(`${what}: the end of its log:\n${lines.slice(-12).join('\n')}`);
  const last = lines.filter((l) => /^\d+ \[/.test(l)).at(-1) ?? '';
  return {
    figure: outcome === 'ok' ? String(elapsed) : `${elapsed}, ${outcome}, last: ${last.slice(0, 100)}`,
    finished: outcome === 'ok',
  };
}

async function waitNode(agent: GuestAgent, version: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const query = `${KUBECTL} get node ${NAME} -o jsonpath='{.status.nodeInfo.kubeletVersion} {.status.conditions[?(@.type=="Ready")].status}'`;
  for (;;) {
    const out = (await agent.exec(query)).out.trim();
    if (out === `${version} True`) return;
    if (Date.now() > deadline)
      throw new Error(`node ${NAME} was not Ready at ${version} in ${timeoutMs / 1000} s: ${out}`);
    await sleep(2000);
  }
}

const busyNow = () => ['systemd-nspawn', 'jest'].filter((p) => spawnSync('pgrep', ['-f', p]).status === 0);

async function waitForQuietMachine(): Promise<void> {
  let said = '';
  for (;;) {
    const busy = busyNow().join(' and ');
    if (busy === '') return;
    if (busy !== said) log(`waiting: ${busy} running (a test run); polling every 30 s`);
    said = busy;
    await sleep(30_000);
  }
}

async function main(): Promise<void> {
  requireHostTools(['qemu-system-x86_64', 'mkfs.ext4', 'mount', 'umount', 'socat']);
  if (process.getuid?.() !== 0) throw new Error('bench/vm-node.ts runs as root (overlay mount, mkfs of the disk tree)');
  const rootfs = vmRootfs();
  const from = process.env.NODE_KUBE_FROM_VERSION ?? '';
  const to = process.env.NODE_KUBE_TO_VERSION ?? '';
  if (!args['no-wait']) await waitForQuietMachine();
  // Whether the node tier started while this ran: its figures would be skewed (and ours).
  const sharedWith = new Set<string>();
  const watch = setInterval(() => busyNow().forEach((p) => sharedWith.add(p)), 10_000);

  const teardown = new Teardown();
  const scratch = mkdtempSync(join(tmpdir(), 'capi-uo-vm-node-'));
  teardown.add('the scratch directory', () => rmSync(scratch, { recursive: true, force: true }));
  const stop = () => void teardown.run().finally(() => process.exit(130));
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  const figures: [string, string][] = [];
  try {
    let t = Date.now();
    // The site's certificates come from a CA of the benchmark's own, as the tier's from its run's.
    const site = await startNodeSite(join(scratch, 'site'), createCertificateAuthority('vm-node bench CA'));
    teardown.add('the site', () => site.stop());
    log(`site (registry and images) ready in ${seconds(t)} s`);

    t = Date.now();
    const files: NodeFile[] = [
      ...nodeFiles({
        name: NAME,
        ip: GUEST_IP,
        podCidr: '10.244.1.0/24',
        registry: { host: REGISTRY_HOST, port: REGISTRY_SITE_PORT, gateway: SITE_ADDRESS, caPem: site.registry.caPem },
        sandboxImage: `${REGISTRY_HOST}:${REGISTRY_SITE_PORT}/pause:${PAUSE_TAG}`,
        host: 'vm',
      }),
      { path: '/etc/systemd/system/capi-uo-vm-net.service', content: NETWORK_UNIT },
      {
        path: '/etc/systemd/system/multi-user.target.wants/capi-uo-vm-net.service',
        symlinkTo: '/etc/systemd/system/capi-uo-vm-net.service',
      },
      {
        path: '/etc/capi-uo/kubeadm.yaml',
        content: initConfig({ name: NAME, role: 'control-plane' }, GUEST_IP, from, 'vm'),
      },
    ];
    const disk = await buildDisk(teardown, scratch, rootfs, files);
    log(`disk (${DISK_BYTES / 1024 ** 3} GiB sparse ext4, mkfs.ext4 -d) built in ${seconds(t)} s`);

    const apiPort = await freePort('127.0.0.1');
    const registryPort = Number(new URL(site.registry.url).port);
    log(`qemu-system-x86_64 -accel tcg,thread=multi -cpu max -smp ${args.cpus} -m ${args.memory} (MiB)`);
    t = Date.now();
    const vm = startQemu(teardown, { scratch, rootfs, disk, apiPort, registryPort });
    const agent = await GuestAgent.connect(vm.agentSocket, vm.qemu, 300_000);
    teardown.add('the guest agent connection', () => agent.close());
    const agentUp = seconds(t);
    const state = (await agent.exec('systemctl is-system-running --wait', { timeoutMs: 300_000 })).out.trim();
    const boot = seconds(t);
    if (state !== 'running')
      log(`systemd says ${state}; failed units:\n${(await agent.exec('systemctl --failed --no-legend --plain')).out}`);
    const facts = (
      await agent.sh('uname -r; stat -fc %T /sys/fs/cgroup; nproc; systemd-analyze | head -1', { timeoutMs: 60_000 })
    ).trim();
    log(`guest: ${facts.split('\n').join('; ')}`);
    log(`boot: qemu start to the guest agent ${agentUp} s, to systemd ${state} ${boot} s`);
    figures.push(['VM boot to multi-user', String(boot)]);

    const init = await timedKubeadm(
      agent,
      'init',
      'kubeadm init --config /etc/capi-uo/kubeadm.yaml',
      Number(args['init-timeout']),
    );
    figures.push([`kubeadm init ${from}`, init.figure]);
    if (!init.finished) return;

    t = Date.now();
    await waitNode(agent, from, 600_000);
    log(`node Ready at ${from} ${seconds(t)} s after kubeadm init returned`);
    const ca = await agent.sh('cat /etc/kubernetes/pki/ca.crt');
    const readyz = await httpsGet(`https://127.0.0.1:${apiPort}`, '/readyz', { caPem: ca });
    log(`the API server through hostfwd 127.0.0.1:${apiPort}: /readyz ${readyz.status} ${readyz.body.toString()}`);

    await agent.sh(`install -m 0755 ${TARGET_BIN}/kubeadm /usr/bin/kubeadm`);
    // CreateJob: the preflight's health-check Job must complete in a fixed 60 s (kubeadm's
    // phases/upgrade/health.go), which its pod does not under TCG; the Job executor's
    // NODE_UPGRADE_KUBEADM_IGNORE_PREFLIGHT_ERRORS is how a fleet would say the same.
    const upgradeConfig = {
      apiVersion: 'kubeadm.k8s.io/v1beta4',
      kind: 'UpgradeConfiguration',
      apply: { ignorePreflightErrors: ['CreateJob'] },
      timeouts: VM_KUBEADM_TIMEOUTS,
    };
    await agent.sh('cat > /etc/capi-uo/upgrade.yaml', { input: JSON.stringify(upgradeConfig) });
    const upgrade = await timedKubeadm(
      agent,
      'upgrade',
      `kubeadm upgrade apply -y ${to} --config /etc/capi-uo/upgrade.yaml`,
      Number(args['upgrade-timeout']),
    );
    figures.push([`kubeadm upgrade apply ${to}`, upgrade.figure]);
    if (!upgrade.finished) return;

    t = Date.now();
    await agent.sh(
      `install -m 0755 ${TARGET_BIN}/kubelet /usr/bin/kubelet && install -m 0755 ${TARGET_BIN}/kubectl /usr/bin/kubectl && systemctl daemon-reload && systemctl restart kubelet`,
    );
    await waitNode(agent, to, 600_000);
    figures.push([`kubelet swap and restart to Ready at ${to}`, String(seconds(t))]);
  } finally {
    clearInterval(watch);
    console.log(`\nTCG VM node (${args.cpus} vCPUs, ${args.memory} MiB), seconds:`);
    for (const [what, s] of figures) console.log(`| ${what} | ${s} |`);
    const consoleLog = (() => {
      try {
        return readFileSync(join(scratch, 'console.log'), 'utf8');
      } catch {
        return '';
      }
    })();
    if (figures.length < 4 && consoleLog)
      log(`the end of the VM's console:\n${consoleLog.split('\n').slice(-20).join('\n')}`);
    if (sharedWith.size > 0) log(`the machine was shared: ${[...sharedWith].join(' and ')} ran during the run`);
    await teardown.run();
  }
}

main().then(
  () => process.exit(0),
  (err: Error) => {
    console.error(err.stack ?? err.message);
    process.exit(1);
  },
);
