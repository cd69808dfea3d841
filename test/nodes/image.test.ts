// `make image` (scripts/image.ts): the Dockerfile's runtime image built without Docker. Built
// twice from scratch in this file (dist/ compiled and bundled again, the Debian packages and
// production node_modules from the tool cache): the same digest; compared with the Dockerfile's
// runtime stage (both sides listed when they differ); its layers unpacked and its own `node`
// run as uid 1000 under chroot, loading Temporal's native core bridge and reporting the build;
// pushed to the local registry and read back by digest. Needs root (chroot) and REGISTRY_BINARY
// (source scripts/env.sh --nodes), like the rest of this tier.
import { execFileSync, spawnSync } from 'node:child_process';
import { lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { prepareInputs, type ImageInputs } from '../../scripts/image/inputs.ts';
import { assembleImage, imageSizes, type ImageArgs } from '../../scripts/image.ts';
import { MEDIA_TYPE, type OciImage } from '../../scripts/oci/image.ts';
import { pushImage } from '../../scripts/oci/push.ts';
import { httpsGet } from '../../support/nodes/https-get.ts';
import { startRegistry } from '../../support/nodes/registry.ts';
import { testPki } from '../support/pki.ts';

const ROOT = join(import.meta.dirname, '../..');
const ARGS: ImageArgs = { version: 'v0.9.1', buildId: 'image-test', revision: '0123456789abcdef' };
const MTIME = 1_700_000_000;

const dir = mkdtempSync(join(tmpdir(), 'image-test-'));
let inputs: ImageInputs;
let image: OciImage;
/** The image's layers unpacked, bottom first, as a runtime would. */
let rootfs: string;

beforeAll(() => {
  inputs = prepareInputs(join(dir, 'first'));
  image = assembleImage(inputs, ARGS, MTIME);
  rootfs = join(dir, 'rootfs');
  mkdirSync(rootfs, { mode: 0o755 });
  for (const layer of image.layers)
    execFileSync('tar', ['-xz', '--numeric-owner', '-C', rootfs], { input: layer.bytes, maxBuffer: 1 << 20 });
}, 600_000);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function config(): Record<string, unknown> {
  return (JSON.parse(image.config.bytes.toString('utf8')) as { config: Record<string, unknown> }).config;
}

// --- the Dockerfile's runtime stage -------------------------------------------------------------

interface Stage {
  env: Record<string, string>;
  labels: Record<string, string>;
  user: string;
  workingDir: string;
  exposed: string[];
  entrypoint: string[];
  /** Each COPY's destination in the image, absolute, with the source it names. */
  copies: { source: string; destination: string; chown: string }[];
}

/** `A="x y" B=z` → pairs, with ${ARG} substituted. */
function pairs(text: string, args: Record<string, string>): [string, string][] {
  const out: [string, string][] = [];
  for (const m of text.matchAll(/([\w.-]+)=(?:"((?:[^"\\]|\\.)*)"|(\S*))/g))
    out.push([m[1]!, (m[2] ?? m[3] ?? '').replace(/\$\{(\w+)\}/g, (_, name: string) => args[name] ?? '')]);
  return out;
}

function runtimeStage(dockerfile: string, buildArgs: Record<string, string>): Stage {
  const lines = dockerfile
    .replace(/\\\n/g, ' ')
    .split('\n')
    .filter((l) => !/^\s*#/.test(l) && l.trim() !== '');
  const from = lines.findLastIndex((l) => /^FROM\s.*\sAS\s+runtime\s*$/i.test(l));
  if (from < 0) throw new Error('no `FROM … AS runtime` stage in the Dockerfile');
  const stage: Stage = { env: {}, labels: {}, user: '', workingDir: '/', exposed: [], entrypoint: [], copies: [] };
  const args: Record<string, string> = {};
  for (const line of lines.slice(from + 1)) {
    const [, op = '', rest = ''] = /^\s*(\w+)\s+(.*)$/.exec(line) ?? [];
    switch (op.toUpperCase()) {
      case 'ARG':
        for (const [k, v] of pairs(rest, args)) args[k] = buildArgs[k] ?? v;
        break;
      case 'ENV':
        for (const [k, v] of pairs(rest, args)) stage.env[k] = v;
        break;
      case 'LABEL':
        for (const [k, v] of pairs(rest, args)) stage.labels[k] = v;
        break;
      case 'USER':
        stage.user = rest.trim();
        break;
      case 'WORKDIR':
        stage.workingDir = rest.trim();
        break;
      case 'EXPOSE':
        stage.exposed.push(
          ...rest
            .trim()
            .split(/\s+/)
            .map((p) => (p.includes('/') ? p : `${p}/tcp`)),
        );
        break;
      case 'ENTRYPOINT':
        stage.entrypoint = JSON.parse(rest) as string[];
        break;
      case 'COPY': {
        const words = rest.trim().split(/\s+/);
        const chown = words.find((w) => w.startsWith('--chown='))?.slice('--chown='.length) ?? '';
        const paths = words.filter((w) => !w.startsWith('--'));
        const destination = paths.pop()!;
        for (const source of paths) {
          const base = destination.startsWith('/') ? destination : join(stage.workingDir, destination);
          const into = destination.endsWith('/') || destination === '.' || destination === './';
          stage.copies.push({ source, destination: into ? join(base, source.split('/').pop()!) : base, chown });
        }
        break;
      }
      default:
        throw new Error(`the runtime stage has an instruction this test does not read: ${line.trim()}`);
    }
  }
  return stage;
}

/** Equal (a map's keys in any order), or an error listing both sides. */
function agree(what: string, dockerfile: unknown, built: unknown): void {
  const sorted = (v: unknown) =>
    v && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).sort()) : v;
  const a = JSON.stringify(sorted(dockerfile), null, 2);
  const b = JSON.stringify(sorted(built), null, 2);
  if (a !== b)
    throw new Error(`${what} differ:\n  the Dockerfile's runtime stage: ${a}\n  the image (make image): ${b}`);
}

/** Every file under `path` (relative to it). */
function files(path: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      const p = join(d, name);
      if (lstatSync(p).isDirectory()) walk(p);
      else out.push(relative(path, p));
    }
  };
  walk(path);
  return out.sort();
}

describe('make image', () => {
  it('gives the same digest for a second build from the same inputs (dist compiled and bundled again)', () => {
    const second = assembleImage(prepareInputs(join(dir, 'second')), ARGS, MTIME);
    expect(second.diffIds).toEqual(image.diffIds);
    expect(second.manifest.digest).toBe(image.manifest.digest);
    // Another commit's time changes the app layer only; another build id the configuration only.
    const later = assembleImage(inputs, ARGS, MTIME + 86_400);
    expect(later.layers.slice(0, 3).map((l) => l.digest)).toEqual(image.layers.slice(0, 3).map((l) => l.digest));
    expect(later.layers[3]!.digest).not.toBe(image.layers[3]!.digest);
    const restamped = assembleImage(inputs, { ...ARGS, buildId: 'another' }, MTIME);
    expect(restamped.layers.map((l) => l.digest)).toEqual(image.layers.map((l) => l.digest));
    expect(restamped.manifest.digest).not.toBe(image.manifest.digest);
    const sizes = imageSizes(image);
    process.stderr.write(
      `image ${image.manifest.digest}: ${(sizes.compressed / 2 ** 20).toFixed(1)} MiB compressed, ${(sizes.uncompressed / 2 ** 20).toFixed(1)} MiB uncompressed\n`,
    );
  }, 300_000);

  it("has the Dockerfile's environment, labels, user, working directory, port and entrypoint", () => {
    const stage = runtimeStage(readFileSync(join(ROOT, 'Dockerfile'), 'utf8'), {
      VERSION: ARGS.version,
      BUILD_ID: ARGS.buildId,
      REVISION: ARGS.revision,
    });
    const c = config();
    const env = Object.fromEntries(
      (c.Env as string[]).map((e) => [e.slice(0, e.indexOf('=')), e.slice(e.indexOf('=') + 1)] as const),
    );
    // node:24-bookworm-slim's own ENV, which the runtime stage inherits.
    const { PATH, NODE_VERSION, ...own } = env;
    expect(PATH).toBe('/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin');
    expect(`v${NODE_VERSION}`).toBe(inputs.node.version);
    agree('ENV', stage.env, own);
    agree('LABEL', stage.labels, c.Labels);
    agree('USER', stage.user, c.User);
    agree('WORKDIR', stage.workingDir, c.WorkingDir);
    agree('EXPOSE', stage.exposed, Object.keys(c.ExposedPorts as object));
    agree('ENTRYPOINT', stage.entrypoint, c.Entrypoint);
    expect(c.Cmd).toBeUndefined(); // an ENTRYPOINT clears the base image's CMD
  });

  it("has every file the Dockerfile's COPY lines put in /app, owned as they say", () => {
    const stage = runtimeStage(readFileSync(join(ROOT, 'Dockerfile'), 'utf8'), {});
    const copied = stage.copies.map((c) => ({
      destination: c.destination,
      chown: c.chown,
    }));
    const inImage = copied.map(({ destination }) => {
      const path = join(rootfs, destination);
      let stat;
      try {
        stat = statSync(path);
      } catch {
        return { destination, chown: 'missing' };
      }
      return { destination, chown: `${stat.uid === 0 ? 'root' : stat.uid}:${stat.gid === 0 ? 'root' : stat.gid}` };
    });
    agree('COPY destinations', copied, inImage);
    expect(copied.map((c) => c.destination)).toEqual([
      '/app/package.json',
      '/app/node_modules',
      '/app/dist',
      '/app/dist/activities/executors/upgrade-node.sh',
    ]);
    // dist/ is the build stage's: tsc's output for every module of src/ but make dev's
    // launcher (tsconfig.build.json), and the prebuilt workflow bundle.
    const sources = files(join(ROOT, 'src'))
      .filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts') && !f.startsWith('local/'))
      .map((f) => f.replace(/\.ts$/, '.js'));
    const dist = files(join(rootfs, 'app/dist')).filter((f) => !f.endsWith('.js.map')); // tsconfig's sourceMap
    expect(sources.filter((f) => !dist.includes(f))).toEqual([]);
    expect(dist.filter((f) => !sources.includes(f))).toEqual([
      'activities/executors/upgrade-node.sh',
      'workflow-bundle.js',
    ]);
    expect(readFileSync(join(rootfs, 'app/dist/activities/executors/upgrade-node.sh'))).toEqual(
      readFileSync(join(ROOT, 'src/activities/executors/upgrade-node.sh')),
    );
    expect(readFileSync(join(rootfs, 'app/package.json'))).toEqual(readFileSync(join(ROOT, 'package.json')));
    // node_modules is `npm prune --omit=dev`'s: every dependency, no development tool.
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
      dependencies: Record<string, string>;
    };
    const missing = Object.keys(pkg.dependencies).filter((d) => !statSafe(join(rootfs, 'app/node_modules', d)));
    expect(missing).toEqual([]);
    const devTools = ['jest', 'typescript', 'eslint', 'prettier', 'ts-jest', '@temporalio/testing', 'fast-check'];
    expect(devTools.filter((d) => statSafe(join(rootfs, 'app/node_modules', d)))).toEqual([]);
    // The base image's: node where node:24-bookworm-slim has it, user 1000 named, /tmp writable by all.
    expect(statSync(join(rootfs, 'usr/local/bin/node')).mode & 0o777).toBe(0o755);
    expect(readFileSync(join(rootfs, 'etc/passwd'), 'utf8')).toMatch(/^node:x:1000:1000:/m);
    expect(statSync(join(rootfs, 'tmp')).mode & 0o7777).toBe(0o1777);
    expect(readFileSync(join(rootfs, 'etc/ssl/certs/ca-certificates.crt'), 'utf8')).toMatch(/BEGIN CERTIFICATE/);
  });

  it("runs: its own node, as uid 1000 under chroot, loads Temporal's native core bridge and reports the build", () => {
    if (process.getuid?.() !== 0)
      throw new Error('this test runs the image with chroot, which needs root: run the nodes tier as root');
    const env = Object.fromEntries(
      (config().Env as string[]).map((e) => [e.slice(0, e.indexOf('=')), e.slice(e.indexOf('=') + 1)] as const),
    );
    const script = [
      `process.chdir(${JSON.stringify(config().WorkingDir)});`,
      "const { createRequire } = await import('node:module');",
      "const bridge = createRequire('/app/package.json')('@temporalio/core-bridge');",
      "const { buildInfo } = await import('/app/dist/version.js');",
      'console.log(JSON.stringify({ uid: process.getuid(), gid: process.getgid(), native: Object.keys(bridge.native).length,',
      '  cwd: process.cwd(), build: buildInfo(), env: process.env.NODE_ENV }));',
    ].join('\n');
    const chroot = ['/usr/sbin/chroot', '/usr/bin/chroot'].find(statSafe) ?? 'chroot';
    const result = spawnSync(
      chroot,
      ['--userspec=1000:1000', rootfs, '/usr/local/bin/node', '--input-type=module', '-e', script],
      { env, encoding: 'utf8', timeout: 60_000 },
    );
    if (result.status !== 0)
      throw new Error(`the image's node failed (${result.status ?? result.signal}): ${result.stderr}${result.stdout}`);
    expect(JSON.parse(result.stdout)).toEqual({
      uid: 1000,
      gid: 1000,
      native: expect.any(Number),
      cwd: '/app',
      build: { version: ARGS.version, buildId: ARGS.buildId, node: inputs.node.version },
      env: 'production',
    });
    expect((JSON.parse(result.stdout) as { native: number }).native).toBeGreaterThan(0);
  });

  it('is pushed to a registry and read back by digest', async () => {
    const registry = await startRegistry({ parentDir: dir, ca: testPki().ca });
    try {
      const pushed = await pushImage({
        ...registry,
        repository: 'capi-upgrade-orchestrator',
        tag: ARGS.version,
        image,
      });
      expect(pushed.digest).toBe(image.manifest.digest);
      const manifest = await httpsGet(
        registry.url,
        `/v2/capi-upgrade-orchestrator/manifests/${image.manifest.digest}`,
        {
          caPem: registry.caPem,
          headers: { accept: MEDIA_TYPE.manifest },
        },
      );
      expect(manifest.status).toBe(200);
      expect(manifest.body.equals(image.manifest.bytes)).toBe(true);
      const byTag = await httpsGet(registry.url, `/v2/capi-upgrade-orchestrator/manifests/${ARGS.version}`, {
        caPem: registry.caPem,
        headers: { accept: MEDIA_TYPE.manifest },
      });
      expect(byTag.headers['docker-content-digest']).toBe(image.manifest.digest);
      const blob = await httpsGet(registry.url, `/v2/capi-upgrade-orchestrator/blobs/${image.config.digest}`, {
        caPem: registry.caPem,
      });
      expect(blob.body.equals(image.config.bytes)).toBe(true);
    } finally {
      await registry.stop();
    }
  }, 120_000);
});

function statSafe(path: string): boolean {
  try {
    lstatSync(path);
    return true;
  } catch {
    return false;
  }
}
