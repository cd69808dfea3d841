// Runs the node upgrade script (src/activities/executors/upgrade-node.sh) with `sh` against a
// sandbox host root: stub kubeadm/kubelet/kubectl/systemctl/chown in $HOST_ROOT/usr/bin record
// their argv (and which build they are, and which builds are installed at that moment) in a
// calls log; the Kubernetes release is a file:// directory of stub binaries, their sha256 pinned
// through KUBEADM_SHA256 / KUBELET_SHA256 / KUBECTL_SHA256 (the .sha256 files the directory also
// serves, as dl.k8s.io does, are never read: a mirror that serves both proves nothing).
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { failedScriptLine } from '../../src/activities/executors/job-pods.ts';

const SCRIPT = new URL('../../src/activities/executors/upgrade-node.sh', import.meta.url).pathname;
const VERSION = 'v1.34.2';
const OLD_VERSION = 'v1.33.5';
const BINARIES = ['kubeadm', 'kubelet', 'kubectl'] as const;
type Binary = (typeof BINARIES)[number];
const HOST_ARCH = process.arch === 'arm64' ? 'arm64' : 'amd64';

/**
 * A stub command. Each call appends `<name>@<build> <argv> | <installed builds>` to $STUB_LOG,
 * e.g. `kubeadm@new upgrade node | kubeadm@new kubelet@old kubectl@old`.
 */
function stub(name: string, build: string, kubeletVersion?: string, exitCode = 0): string {
  return `#!/bin/sh
# stub: ${name}@${build}
tag() { sed -n 's/^# stub: //p' "$HOST_ROOT/usr/bin/$1" 2>/dev/null; }
printf '%s | %s %s %s\\n' "${name}@${build} $*" "$(tag kubeadm)" "$(tag kubelet)" "$(tag kubectl)" >>"$STUB_LOG"
${kubeletVersion ? `if [ "\${1:-}" = --version ]; then echo "Kubernetes ${kubeletVersion}"; fi\n` : ''}${exitCode ? 'echo "[ERROR SystemVerification]: secret-looking tool output" >&2\n' : ''}exit ${exitCode}
`;
}

function writeExecutable(path: string, content: string): void {
  writeFileSync(path, content);
  chmodSync(path, 0o755);
}

const sha256 = (content: string): string => createHash('sha256').update(content).digest('hex');

interface Sandbox {
  dir: string;
  root: string;
  bin: string;
  source: string;
  files: string;
  log: string;
  newStubs: Record<Binary, string>;
  oldStubs: Record<Binary, string>;
  /** The pinned digests the script is given (`KUBEADM_SHA256`...). */
  pinned: Record<string, string>;
}

interface SandboxOpts {
  arch?: string;
  /** What the downloaded kubelet answers to --version. */
  newKubeletVersion?: string;
  /** Binaries whose pinned digest is not the served binary's (the served .sha256 matches the binary). */
  badChecksum?: Binary[];
  /** The downloaded kubeadm exits with this (its `kubeadm upgrade` fails). */
  newKubeadmExit?: number;
}

function makeSandbox(o: SandboxOpts = {}): Sandbox {
  const dir = mkdtempSync(join(tmpdir(), 'upgrade-node-'));
  const root = join(dir, 'root');
  const bin = join(root, 'usr/bin');
  const source = join(dir, 'release');
  const files = join(dir, 'files');
  const release = join(source, VERSION, 'bin/linux', o.arch ?? HOST_ARCH);
  mkdirSync(bin, { recursive: true });
  mkdirSync(release, { recursive: true });
  mkdirSync(files);
  const oldStubs = {} as Record<Binary, string>;
  const newStubs = {} as Record<Binary, string>;
  const pinned: Record<string, string> = {};
  for (const b of BINARIES) {
    oldStubs[b] = stub(b, 'old', b === 'kubelet' ? OLD_VERSION : undefined);
    newStubs[b] = stub(
      b,
      'new',
      b === 'kubelet' ? (o.newKubeletVersion ?? VERSION) : undefined,
      b === 'kubeadm' ? o.newKubeadmExit : undefined,
    );
    writeExecutable(join(bin, b), oldStubs[b]);
    // Published binaries are not executable in a file:// mirror necessarily.
    writeFileSync(join(release, b), newStubs[b]);
    writeFileSync(join(release, `${b}.sha256`), `${sha256(newStubs[b])}\n`);
    pinned[`${b.toUpperCase()}_SHA256`] = o.badChecksum?.includes(b)
      ? sha256(`${newStubs[b]}tampered`)
      : sha256(newStubs[b]);
  }
  writeExecutable(join(bin, 'systemctl'), stub('systemctl', 'host'));
  writeExecutable(join(bin, 'chown'), stub('chown', 'host'));
  return { dir, root, bin, source, files, log: join(dir, 'calls.log'), newStubs, oldStubs, pinned };
}

interface RunResult {
  status: number | null;
  stdout: string;
  stderr: string;
}

function run(sb: Sandbox, env: Record<string, string | undefined> = {}): RunResult {
  const full: Record<string, string | undefined> = {
    PATH: process.env.PATH,
    HOST_ROOT: sb.root,
    SANDBOX: '1',
    BINARY_SOURCE: `file://${sb.source}`,
    KUBERNETES_VERSION: VERSION,
    NODE_NAME: 'node-1',
    UPGRADE_MODE: 'apply',
    STUB_LOG: sb.log,
    ...sb.pinned,
    ...env,
  };
  const clean = Object.fromEntries(Object.entries(full).filter(([, v]) => v !== undefined)) as Record<string, string>;
  const r = spawnSync('sh', [SCRIPT], { env: clean, encoding: 'utf8', timeout: 30_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** Lines of the calls log (none when no stub ran). */
function calls(sb: Sandbox): string[] {
  return existsSync(sb.log) ? readFileSync(sb.log, 'utf8').trimEnd().split('\n') : [];
}
/** The argv part of each call: `kubeadm@new upgrade node`. */
const argv = (sb: Sandbox): string[] => calls(sb).map((l) => l.split(' | ')[0] ?? '');

function installed(sb: Sandbox, b: Binary): 'old' | 'new' | 'other' {
  const content = readFileSync(join(sb.bin, b), 'utf8');
  return content === sb.newStubs[b] ? 'new' : content === sb.oldStubs[b] ? 'old' : 'other';
}

/** Every file under dir, relative to it. */
function tree(dir: string): string[] {
  return (readdirSync(dir, { recursive: true, withFileTypes: true }) as { parentPath: string; name: string }[])
    .filter((e) => statSync(join(e.parentPath, e.name)).isFile())
    .map((e) => join(e.parentPath, e.name).slice(dir.length + 1))
    .sort();
}

const mode = (path: string): number => statSync(path).mode & 0o777;

/** Every file under the sandbox's host root with its sha256: the host as the script found it. */
const snapshot = (sb: Sandbox): string[] =>
  tree(sb.root).map(
    (f) =>
      `${f} ${createHash('sha256')
        .update(readFileSync(join(sb.root, f)))
        .digest('hex')}`,
  );

let sb: Sandbox;
const extra: Sandbox[] = [];
beforeEach(() => {
  sb = makeSandbox();
});
afterEach(() => {
  for (const s of [sb, ...extra.splice(0)]) rmSync(s.dir, { recursive: true, force: true });
});

describe('upgrade-node.sh: roles', () => {
  it('first control-plane node (apply): new kubeadm runs `upgrade apply`, then kubelet/kubectl, restart, check', () => {
    const r = run(sb, { UPGRADE_MODE: 'apply' });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(argv(sb)).toEqual([
      `kubeadm@new upgrade apply -y ${VERSION}`,
      'systemctl@host daemon-reload',
      'systemctl@host restart kubelet',
      'kubelet@new --version',
    ]);
    // What was installed at each call: kubeadm before the upgrade, kubelet/kubectl only after it.
    expect(calls(sb).map((l) => l.split(' | ')[1])).toEqual([
      'kubeadm@new kubelet@old kubectl@old',
      'kubeadm@new kubelet@new kubectl@new',
      'kubeadm@new kubelet@new kubectl@new',
      'kubeadm@new kubelet@new kubectl@new',
    ]);
    for (const b of BINARIES) {
      expect(installed(sb, b)).toBe('new');
      expect(mode(join(sb.bin, b))).toBe(0o755);
    }
    expect(r.stdout.trimEnd().split('\n').at(-1)).toBe('[node-upgrade] done');
  });

  it.each([['worker'], ['other control-plane node']])('%s (node): new kubeadm runs `upgrade node`', () => {
    const r = run(sb, { UPGRADE_MODE: 'node' });
    expect(r.status).toBe(0);
    expect(argv(sb)).toEqual([
      'kubeadm@new upgrade node',
      'systemctl@host daemon-reload',
      'systemctl@host restart kubelet',
      'kubelet@new --version',
    ]);
    expect(calls(sb)[0]).toBe('kubeadm@new upgrade node | kubeadm@new kubelet@old kubectl@old');
    for (const b of BINARIES) expect(installed(sb, b)).toBe('new');
  });

  it.each([
    ['apply', `kubeadm@new upgrade apply -y ${VERSION} --ignore-preflight-errors=SystemVerification,Swap`],
    ['node', 'kubeadm@new upgrade node --ignore-preflight-errors=SystemVerification,Swap'],
  ])('%s with IGNORE_PREFLIGHT_ERRORS: kubeadm is told to ignore those checks, as one argument', (mode, call) => {
    const r = run(sb, { UPGRADE_MODE: mode, IGNORE_PREFLIGHT_ERRORS: 'SystemVerification,Swap' });
    expect(r.status).toBe(0);
    expect(argv(sb)[0]).toBe(call);
  });

  it('is idempotent: a second run succeeds and makes the same calls', () => {
    expect(run(sb, { UPGRADE_MODE: 'node' }).status).toBe(0);
    const first = argv(sb);
    expect(run(sb, { UPGRADE_MODE: 'node' }).status).toBe(0);
    expect(argv(sb)).toEqual([...first, ...first]);
  });

  it('leaves no temp files behind (bin dir, download dir)', () => {
    expect(run(sb).status).toBe(0);
    expect(tree(sb.bin)).toEqual(['chown', 'kubeadm', 'kubectl', 'kubelet', 'systemctl']);
    expect(tree(join(sb.root, 'var/lib/capi-upgrade-orchestrator'))).toEqual([]);
  });
});

describe('upgrade-node.sh: files from the manifest', () => {
  function writeFiles(manifest: string, keys: Record<string, string>): void {
    for (const [k, v] of Object.entries(keys)) writeFileSync(join(sb.files, k), v);
    writeFileSync(join(sb.files, 'manifest'), manifest);
  }

  it('writes each file with its exact content and mode, atomically, chown only when the owner is not -', () => {
    const key = '-----BEGIN PRIVATE KEY-----\nsecret\n-----END PRIVATE KEY-----\n';
    const conf = 'kind: KubeletConfiguration\n# no trailing newline';
    writeFiles(
      '# comment\n' +
        'ca.key 0600 - /etc/kubernetes/pki/ca.key\n' +
        '\n' +
        'kubelet-conf 644 - /etc/my dir/kubelet config.yaml\n' +
        'admin 0640 root:root /etc/kubernetes/admin.conf',
      { 'ca.key': key, 'kubelet-conf': conf, admin: 'admin\n' },
    );
    // An existing file is replaced (content and mode).
    mkdirSync(join(sb.root, 'etc/kubernetes/pki'), { recursive: true });
    writeFileSync(join(sb.root, 'etc/kubernetes/pki/ca.key'), 'old');
    chmodSync(join(sb.root, 'etc/kubernetes/pki/ca.key'), 0o644);

    const r = run(sb, { FILES_DIR: sb.files });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);

    const caKey = join(sb.root, 'etc/kubernetes/pki/ca.key');
    const kubeletConf = join(sb.root, 'etc/my dir/kubelet config.yaml');
    expect(readFileSync(caKey, 'utf8')).toBe(key);
    expect(mode(caKey)).toBe(0o600);
    expect(readFileSync(kubeletConf, 'utf8')).toBe(conf);
    expect(mode(kubeletConf)).toBe(0o644);
    expect(mode(join(sb.root, 'etc/kubernetes/admin.conf'))).toBe(0o640);
    expect(tree(join(sb.root, 'etc'))).toEqual([
      'kubernetes/admin.conf',
      'kubernetes/pki/ca.key',
      'my dir/kubelet config.yaml',
    ]);

    // chown ran on the host once, for admin.conf only, on its temp file (before the mv).
    const chowns = argv(sb).filter((c) => c.startsWith('chown@'));
    expect(chowns).toHaveLength(1);
    expect(chowns[0]).toMatch(
      new RegExp(
        `^chown@host root:root ${sb.root.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}/etc/kubernetes/\\.admin\\.conf\\.`,
      ),
    );
    // Files are written after kubeadm is installed and before kubeadm upgrade runs.
    expect(argv(sb)).toEqual([
      expect.stringMatching(/^chown@host /),
      `kubeadm@new upgrade apply -y ${VERSION}`,
      'systemctl@host daemon-reload',
      'systemctl@host restart kubelet',
      'kubelet@new --version',
    ]);
    expect(calls(sb)[0]).toMatch(/ \| kubeadm@new kubelet@old kubectl@old$/);
  });

  it.each([
    ['relative with ..', '../etc/x'],
    ['relative', 'etc/x'],
    ['absolute with ..', '/etc/kubernetes/../x'],
    ['a directory', '/etc/kubernetes/'],
  ])('refuses a manifest path that is %s (exit 2, nothing changed)', (_what, path) => {
    writeFiles(`good 0600 - /etc/good\nbad 0600 - ${path}\n`, { good: 'g', bad: 'b' });
    const r = run(sb, { FILES_DIR: sb.files });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain(`manifest line 2: path '${path}'`);
    expect(calls(sb)).toEqual([]);
    expect(installed(sb, 'kubeadm')).toBe('old');
    expect(existsSync(join(sb.root, 'etc'))).toBe(false);
  });

  it.each([
    ['too few fields', 'k 0600 /etc/k', 'expected'],
    ['a mode that is not octal', 'k 0986 - /etc/k', "mode '0986'"],
    ['an owner that is not user:group', 'k 0600 root /etc/k', "owner 'root'"],
    ['a key that is not in FILES_DIR', 'missing 0600 - /etc/k', "key 'missing'"],
  ])('refuses a manifest line with %s (exit 2)', (_what, line, message) => {
    writeFiles(`${line}\n`, { k: 'k' });
    const r = run(sb, { FILES_DIR: sb.files });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain(message);
    expect(calls(sb)).toEqual([]);
    expect(installed(sb, 'kubeadm')).toBe('old');
  });
});

describe('upgrade-node.sh: failures', () => {
  it.each([
    ['KUBERNETES_VERSION missing', { KUBERNETES_VERSION: undefined }, 'KUBERNETES_VERSION'],
    ['KUBERNETES_VERSION v1.34', { KUBERNETES_VERSION: 'v1.34' }, 'KUBERNETES_VERSION'],
    ['KUBERNETES_VERSION without v', { KUBERNETES_VERSION: '1.34.2' }, 'KUBERNETES_VERSION'],
    ['KUBERNETES_VERSION with a suffix', { KUBERNETES_VERSION: 'v1.34.2-rc.0' }, 'KUBERNETES_VERSION'],
    ['KUBERNETES_VERSION with 4 parts', { KUBERNETES_VERSION: 'v1.34.2.1' }, 'KUBERNETES_VERSION'],
    ['NODE_NAME missing', { NODE_NAME: undefined }, 'NODE_NAME'],
    ['UPGRADE_MODE missing', { UPGRADE_MODE: undefined }, 'UPGRADE_MODE'],
    ['UPGRADE_MODE foo', { UPGRADE_MODE: 'foo' }, 'UPGRADE_MODE'],
    ['HOST_ROOT relative', { HOST_ROOT: 'root' }, 'HOST_ROOT'],
    ['BIN_DIR with ..', { BIN_DIR: '/usr/../bin' }, 'BIN_DIR'],
    ['BINARY_SOURCE ftp', { BINARY_SOURCE: 'ftp://mirror/release' }, 'BINARY_SOURCE'],
    ['ARCH unknown', { ARCH: 'mips' }, 'ARCH'],
    ['FILES_DIR without a manifest', { FILES_DIR: '/nonexistent' }, 'FILES_DIR'],
  ])('bad input: %s → exit 2 naming the variable, no stub called', (_what, env, variable) => {
    const r = run(sb, env);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(new RegExp(`^\\[node-upgrade\\] error: ${variable}\\b`, 'm'));
    expect(calls(sb)).toEqual([]);
    for (const b of BINARIES) expect(installed(sb, b)).toBe('old');
    expect(existsSync(join(sb.root, 'var'))).toBe(false);
  });

  it.each([['kubeadm'], ['kubelet'], ['kubectl']] as const)(
    'a wrong checksum for %s → exit 1 naming it, host untouched, no kubeadm upgrade',
    (bad) => {
      extra.push(sb);
      sb = makeSandbox({ badChecksum: [bad] });
      writeFileSync(join(sb.files, 'f'), 'f');
      writeFileSync(join(sb.files, 'manifest'), 'f 0600 - /etc/f\n');
      const before = snapshot(sb);
      const r = run(sb, { FILES_DIR: sb.files });
      expect(snapshot(sb)).toEqual(before);
      expect(r.status).toBe(1);
      expect(r.stderr).toContain(
        `checksum mismatch for ${bad}: pinned ${sb.pinned[`${bad.toUpperCase()}_SHA256`]}, got`,
      );
      expect(calls(sb)).toEqual([]);
      for (const b of BINARIES) expect(installed(sb, b)).toBe('old');
      expect(existsSync(join(sb.root, 'etc/f'))).toBe(false);
      expect(tree(sb.bin)).toEqual(['chown', 'kubeadm', 'kubectl', 'kubelet', 'systemctl']);
      expect(tree(join(sb.root, 'var/lib/capi-upgrade-orchestrator'))).toEqual([]);
    },
  );

  it.each([['kubeadm'], ['kubelet'], ['kubectl']] as const)(
    'a version with no pinned checksum for %s → exit 2 naming the binary and the version, before touching the host',
    (missing) => {
      const before = snapshot(sb);
      const r = run(sb, { [`${missing.toUpperCase()}_SHA256`]: undefined });
      expect(r.status).toBe(2);
      expect(r.stderr).toContain(
        `[node-upgrade] error: ${missing.toUpperCase()}_SHA256 is unset: no pinned sha256 for ${missing} ${VERSION} linux/${HOST_ARCH}`,
      );
      expect(calls(sb)).toEqual([]);
      expect(snapshot(sb)).toEqual(before);
      expect(existsSync(join(sb.root, 'var'))).toBe(false);
    },
  );

  it.each([['SystemVerification --v=9'], ['a;reboot'], [',Swap'], ['Swap,'], ['$(id)']])(
    'IGNORE_PREFLIGHT_ERRORS %j that is not a list of check names → exit 2 naming it, before touching the host',
    (value) => {
      const before = snapshot(sb);
      const r = run(sb, { IGNORE_PREFLIGHT_ERRORS: value });
      expect(r.status).toBe(2);
      expect(r.stderr).toContain(
        `[node-upgrade] error: IGNORE_PREFLIGHT_ERRORS '${value}' is not a comma-separated list`,
      );
      expect(calls(sb)).toEqual([]);
      expect(snapshot(sb)).toEqual(before);
    },
  );

  it('a pinned digest that is not 64 hex digits → exit 2 naming the variable, before touching the host', () => {
    const before = snapshot(sb);
    const r = run(sb, { KUBELET_SHA256: 'sha256:abc' });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('[node-upgrade] error: KUBELET_SHA256 is not a sha256 hex digest');
    expect(snapshot(sb)).toEqual(before);
    expect(existsSync(join(sb.root, 'var'))).toBe(false);
  });

  it.each([[undefined], ['0'], ['yes']])(
    'an http:// mirror without BINARY_SOURCE_ALLOW_HTTP=1 (%s) → exit 2 naming the source, before touching the host',
    (allow) => {
      const before = snapshot(sb);
      const r = run(sb, { BINARY_SOURCE: 'http://mirror.example/release', BINARY_SOURCE_ALLOW_HTTP: allow });
      expect(r.status).toBe(2);
      expect(r.stderr).toMatch(/^\[node-upgrade\] error: BINARY_SOURCE(_ALLOW_HTTP)? '/m);
      if (allow === undefined)
        expect(r.stderr).toContain(
          "BINARY_SOURCE 'http://mirror.example/release' is plain http: refused unless BINARY_SOURCE_ALLOW_HTTP=1",
        );
      expect(calls(sb)).toEqual([]);
      expect(snapshot(sb)).toEqual(before);
      expect(existsSync(join(sb.root, 'var'))).toBe(false);
    },
  );

  it('a kubelet that reports another version after the restart → exit 1 saying what it printed', () => {
    extra.push(sb);
    sb = makeSandbox({ newKubeletVersion: 'v1.34.1' });
    const r = run(sb);
    expect(r.status).toBe(1);
    expect(r.stderr).toContain(`kubelet --version printed 'Kubernetes v1.34.1', expected 'Kubernetes ${VERSION}'`);
    expect(argv(sb).at(-1)).toBe('kubelet@new --version');
  });
});

describe('upgrade-node.sh: downloads', () => {
  /** A PATH of the utilities the script needs plus the given stubs (so curl may be absent). */
  function toolPath(stubs: Record<string, string>): string {
    const tools = join(sb.dir, 'tools');
    mkdirSync(tools);
    const needed = ['sh', 'env', 'mkdir', 'mktemp', 'cp', 'chmod', 'mv', 'rm', 'rmdir', 'cat', 'tr', 'sha256sum'];
    for (const t of [...needed, 'sed', 'uname']) {
      if (stubs[t]) continue;
      const found = spawnSync('sh', ['-c', `command -v ${t}`], { encoding: 'utf8' }).stdout.trim();
      symlinkSync(found, join(tools, t));
    }
    for (const [name, body] of Object.entries(stubs)) writeExecutable(join(tools, name), body);
    return tools;
  }
  /** A fetcher stub that logs its argv and serves https://mirror.example/release/... from the sandbox. */
  const fetcher = (name: string, outFlag: string): string => `#!/bin/sh
echo "${name} $*" >>"$FETCH_LOG"
out=""; url=""
while [ $# -gt 0 ]; do
  case $1 in ${outFlag}) out=$2; shift 2 ;; -*) shift ;; *) url=$1; shift ;; esac
done
cp "$RELEASE_DIR/\${url#*://mirror.example/release/}" "$out"
`;

  it('prefers curl -fsSL (over wget) against <source>/<version>/bin/linux/<arch>/<name>, arch from uname -m', () => {
    extra.push(sb);
    sb = makeSandbox({ arch: 'arm64' });
    const fetchLog = join(sb.dir, 'fetch.log');
    const tools = toolPath({
      curl: fetcher('curl', '-o'),
      wget: fetcher('wget', '-qO'),
      uname: '#!/bin/sh\necho aarch64\n',
    });
    const r = run(sb, {
      PATH: tools,
      BINARY_SOURCE: 'https://mirror.example/release/',
      FETCH_LOG: fetchLog,
      RELEASE_DIR: sb.source,
    });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    const base = `https://mirror.example/release/${VERSION}/bin/linux/arm64`;
    // The binaries only: their digests are pinned, never fetched from the same server.
    expect(readFileSync(fetchLog, 'utf8').trimEnd().split('\n')).toEqual(
      BINARIES.map((b) => expect.stringMatching(new RegExp(`^curl -fsSL -o \\S+/${b} ${base}/${b}$`))),
    );
    for (const b of BINARIES) expect(installed(sb, b)).toBe('new');
  });

  it('falls back to wget -qO when curl is absent; ARCH overrides uname -m', () => {
    extra.push(sb);
    sb = makeSandbox({ arch: 's390x' });
    const fetchLog = join(sb.dir, 'fetch.log');
    const tools = toolPath({ wget: fetcher('wget', '-qO') });
    const r = run(sb, {
      PATH: tools,
      ARCH: 's390x',
      BINARY_SOURCE: 'https://mirror.example/release',
      FETCH_LOG: fetchLog,
      RELEASE_DIR: sb.source,
    });
    expect(r.status).toBe(0);
    const lines = readFileSync(fetchLog, 'utf8').trimEnd().split('\n');
    expect(lines).toHaveLength(3);
    expect(lines[0]).toMatch(
      new RegExp(`^wget -qO \\S+/kubeadm https://mirror.example/release/${VERSION}/bin/linux/s390x/kubeadm$`),
    );
    for (const b of BINARIES) expect(installed(sb, b)).toBe('new');
  });

  it('accepts an http:// mirror with BINARY_SOURCE_ALLOW_HTTP=1, still verified against the pinned digests', () => {
    const fetchLog = join(sb.dir, 'fetch.log');
    const tools = toolPath({ curl: fetcher('curl', '-o') });
    const env = {
      PATH: tools,
      ARCH: HOST_ARCH,
      BINARY_SOURCE: 'http://mirror.example/release',
      BINARY_SOURCE_ALLOW_HTTP: '1',
      FETCH_LOG: fetchLog,
      RELEASE_DIR: sb.source,
    };
    const r = run(sb, env);
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    for (const b of BINARIES) expect(installed(sb, b)).toBe('new');
    // The same mirror serving another kubelet is caught by the pin.
    writeFileSync(join(sb.source, VERSION, 'bin/linux', HOST_ARCH, 'kubelet'), 'evil');
    const bad = run(sb, env);
    expect(bad.status).toBe(1);
    expect(bad.stderr).toContain(`checksum mismatch for kubelet: pinned ${sb.pinned.KUBELET_SHA256}, got`);
  });
});

describe('upgrade-node.sh: versioning and lint', () => {
  const script = readFileSync(SCRIPT, 'utf8');
  const scriptVersion = /^SCRIPT_VERSION=(\d+)$/m.exec(script)?.[1];

  it('declares SCRIPT_VERSION near the top and names it in the first log line, on success and failure', () => {
    expect(script.split('\n').slice(0, 5)).toContain(`SCRIPT_VERSION=${scriptVersion}`);
    const first = `[node-upgrade] upgrade-node.sh SCRIPT_VERSION=${scriptVersion} `;
    expect(run(sb).stdout.split('\n')[0]).toContain(first);
    expect(run(sb, { UPGRADE_MODE: 'foo' }).stdout.split('\n')[0]).toContain(first);
  });

  it('prefixes every stdout line with [node-upgrade]', () => {
    const lines = run(sb).stdout.trimEnd().split('\n');
    expect(lines.length).toBeGreaterThan(5);
    for (const l of lines) expect(l).toMatch(/^\[node-upgrade\] /);
  });

  it('a failed kubeadm upgrade ends with an error line naming the command and its exit code, not its output', () => {
    extra.push(sb);
    sb = makeSandbox({ newKubeadmExit: 3 });
    const r = run(sb, { UPGRADE_MODE: 'apply' });
    expect(r.status).toBe(3);
    const lines = `${r.stdout}${r.stderr}`.split('\n').filter(Boolean);
    expect(failedScriptLine(lines)).toBe(
      `[node-upgrade] error: kubeadm upgrade apply -y ${VERSION} failed (exit 3); its output is in the Job's log`,
    );
    // kubelet and kubectl stay old: nothing after the failed upgrade ran.
    expect(installed(sb, 'kubelet')).toBe('old');
  });

  it('ends a failure with the error line the job executor quotes to CAPI, never a line of its tools', () => {
    const r = run(sb, { UPGRADE_MODE: 'foo' });
    expect(r.status).toBe(2);
    const lines = `${r.stdout}${r.stderr}`.split('\n').filter(Boolean);
    expect(failedScriptLine(lines)).toBe("[node-upgrade] error: UPGRADE_MODE 'foo' is neither apply nor node");
    // Without an error line (killed at the Job's deadline): the script's last own line, not kubeadm's output.
    expect(failedScriptLine(['[node-upgrade] running kubeadm upgrade node', 'kubeadm: bootstrap token abcdef'])).toBe(
      '[node-upgrade] running kubeadm upgrade node',
    );
    expect(failedScriptLine(['kubeadm: bootstrap token abcdef'])).toBeUndefined();
  });

  // scripts/env.sh --lint (make test, make test-unit) installs shellcheck: never skipped.
  it('passes shellcheck as POSIX sh', () => {
    const r = spawnSync('shellcheck', ['-s', 'sh', SCRIPT], { encoding: 'utf8' });
    expect(r.error).toBeUndefined();
    expect(r.stdout + r.stderr).toBe('');
    expect(r.status).toBe(0);
  });
});
