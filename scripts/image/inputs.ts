// What `make image` is made of, on disk and cached in the tool cache: Node 24's binary from the
// bootstrap's npm package, Debian bookworm's packages at their pinned sha256 (scripts/image-debs.json),
// and the application (dist/ compiled into a scratch directory, production node_modules installed
// from package-lock.json). The same inputs give the same image (scripts/image.ts).
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
} from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

export const ROOT = new URL('../../', import.meta.url).pathname;
export const DEB_PINS_FILE = join(ROOT, 'scripts/image-debs.json');
export const NODE_MAJOR = 24;

export interface DebPin {
  name: string;
  version: string;
  architecture: string;
  sha256: string;
}

/** What an image is made of, on disk; the same inputs give the same image. */
export interface ImageInputs {
  /** The `node` binary and its version (v24.x.y). */
  node: { binary: string; version: string };
  /** Each pinned package's extracted tree (dpkg-deb -x). */
  debs: { pin: DebPin; dir: string }[];
  /** Holds package.json, dist/ (with the bundle and upgrade-node.sh) and node_modules/ (production). */
  app: { packageJson: string; dist: string; nodeModules: string };
}

/** The tool cache (scripts/env.sh's CAPI_UO_CACHE) and this builder's part of it. */
export function toolCache(env: NodeJS.ProcessEnv = process.env): string {
  return (
    env.CAPI_UO_CACHE ?? join(env.XDG_CACHE_HOME ?? join(env.HOME ?? homedir(), '.cache'), 'capi-upgrade-orchestrator')
  );
}

export function imageCache(): string {
  const dir = join(toolCache(), 'image');
  mkdirSync(dir, { recursive: true });
  return dir;
}

export function log(message: string): void {
  process.stderr.write(`\u001b[2m[image]\u001b[0m ${message}\n`);
}

/** stdout; the command's output is shown only when it fails. */
export function run(command: string, args: string[], options: { cwd?: string } = {}): string {
  try {
    return execFileSync(command, args, {
      cwd: options.cwd ?? ROOT,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
      maxBuffer: 64 * 1024 * 1024,
    });
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message: string };
    throw new Error(`${command} ${args.join(' ')} failed: ${e.message}\n${e.stdout ?? ''}${e.stderr ?? ''}`.trimEnd());
  }
}

export function sha256File(path: string): string {
  return createHash('sha256').update(readFileSync(path)).digest('hex');
}

/** A directory made whole: built in a temp dir beside it, then renamed into place. */
export function cached(dir: string, build: (tmp: string) => void): string {
  if (existsSync(dir)) return dir;
  const tmp = mkdtempSync(`${dir}.tmp-`);
  try {
    build(tmp);
    renameSync(tmp, dir);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  return dir;
}

// --- Node ------------------------------------------------------------------------------

/** The bootstrap's node package (scripts/env.sh installs `node@24` there when the system node is older). */
export function nodeInput(): ImageInputs['node'] {
  const dir = join(toolCache(), `node-${NODE_MAJOR}`);
  const binary = join(dir, 'node_modules/node/bin/node');
  if (!existsSync(binary)) {
    log(`installing node@${NODE_MAJOR} from the npm registry into ${dir} (as scripts/env.sh does)`);
    mkdirSync(dir, { recursive: true });
    run('npm', ['install', '--prefix', dir, '--no-audit', '--no-fund', '--loglevel=error', `node@${NODE_MAJOR}`]);
  }
  const version = run(binary, ['-p', 'process.version']).trim();
  if (!version.startsWith(`v${NODE_MAJOR}.`)) throw new Error(`${binary} is node ${version}, not ${NODE_MAJOR}.x`);
  return { binary, version };
}

// --- Debian packages ------------------------------------------------------------------------

export function readDebPins(file = DEB_PINS_FILE): DebPin[] {
  const parsed = JSON.parse(readFileSync(file, 'utf8')) as { packages: DebPin[] };
  return parsed.packages;
}

/** `--pin`: the candidate version of each pinned package and its sha256, from apt's lists. */
export function candidatePins(names: readonly string[]): DebPin[] {
  return names.map((name) => {
    const policy = run('apt-cache', ['policy', name]);
    const version = /Candidate:\s*(\S+)/.exec(policy)?.[1];
    if (!version || version === '(none)') throw new Error(`apt has no candidate for ${name}: apt-get update?`);
    const show = run('apt-cache', ['show', `${name}=${version}`]);
    const field = (key: string) => new RegExp(`^${key}: (\\S+)$`, 'm').exec(show)?.[1];
    const sha256 = field('SHA256');
    const architecture = field('Architecture');
    if (!sha256 || !architecture) throw new Error(`apt-cache show ${name}=${version} has no SHA256 or Architecture`);
    return { name, version, architecture, sha256 };
  });
}

/** The package's .deb (downloaded once, checked) extracted into the tool cache. */
function debInput(pin: DebPin): { pin: DebPin; dir: string } {
  const base = `${pin.name}_${pin.version.replace(/:/g, '%3a')}_${pin.architecture}`;
  const cache = join(imageCache(), 'debs');
  mkdirSync(cache, { recursive: true });
  const deb = join(cache, `${base}.deb`);
  if (!existsSync(deb) || sha256File(deb) !== pin.sha256) {
    log(`apt-get download ${pin.name}=${pin.version}`);
    const tmp = mkdtempSync(join(cache, '.download-'));
    try {
      try {
        run('apt-get', ['download', '-qq', '-o', 'APT::Sandbox::User=root', `${pin.name}=${pin.version}`], {
          cwd: tmp,
        });
      } catch {
        throw new Error(
          `apt-get download ${pin.name}=${pin.version} failed: the pinned version may have left the mirror ` +
            `(a Debian point release). Run \`node scripts/image.ts --pin\` to pin the current ones (scripts/image-debs.json).`,
        );
      }
      const [file] = readdirSync(tmp).filter((f) => f.endsWith('.deb'));
      if (!file) throw new Error(`apt-get download ${pin.name}=${pin.version} wrote no .deb`);
      const got = sha256File(join(tmp, file));
      if (got !== pin.sha256)
        throw new Error(`${pin.name}_${pin.version}.deb has sha256 ${got}, scripts/image-debs.json pins ${pin.sha256}`);
      renameSync(join(tmp, file), deb);
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  }
  const dir = cached(join(cache, `${base}-${pin.sha256.slice(0, 12)}`), (tmp) => run('dpkg-deb', ['-x', deb, tmp]));
  return { pin, dir };
}

// --- the application ---------------------------------------------------------------------------

/** Production dependencies from package-lock.json, installed once per lock and node/npm version. */
function productionModules(nodeVersion: string): string {
  const files = ['package.json', 'package-lock.json'].map((f) => readFileSync(join(ROOT, f)));
  const npmVersion = run('npm', ['--version']).trim();
  const key = createHash('sha256')
    .update(Buffer.concat(files))
    .update(`${nodeVersion} npm ${npmVersion}`)
    .digest('hex')
    .slice(0, 16);
  const dir = cached(join(imageCache(), `node-modules-${key}`), (tmp) => {
    log(`npm install --omit=dev (package-lock.json's versions) into ${tmp}`);
    for (const f of ['package.json', 'package-lock.json']) copyFileSync(join(ROOT, f), join(tmp, f));
    // As the Dockerfile's `npm install` + `npm prune --omit=dev`: the locked versions, no dev tools.
    run('npm', ['install', '--omit=dev', '--no-save', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: tmp });
  });
  return join(dir, 'node_modules');
}

/** tsc's output for src/ (tsconfig.build.json), the workflow bundle and upgrade-node.sh, in `workDir/dist`. */
function buildDist(workDir: string): string {
  const dist = join(workDir, 'dist');
  rmSync(dist, { recursive: true, force: true });
  log('tsc -p tsconfig.build.json');
  run(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json', '--outDir', dist]);
  log('workflow bundle');
  run(process.execPath, ['scripts/bundle-workflows.ts', join(dist, 'workflow-bundle.js')]);
  const script = 'activities/executors/upgrade-node.sh';
  copyFileSync(join(ROOT, 'src', script), join(dist, script));
  return dist;
}

/** Everything the image is made of; `workDir` receives dist/ (the caller removes it). */
export function prepareInputs(workDir: string): ImageInputs {
  const node = nodeInput();
  const debs = readDebPins().map(debInput);
  const nodeModules = productionModules(node.version);
  const dist = buildDist(workDir);
  return { node, debs, app: { packageJson: join(ROOT, 'package.json'), dist, nodeModules } };
}
