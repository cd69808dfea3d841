// `make release VERSION=vX.Y.Z [IMAGE=registry/name[:tag]]`: the release assets a
// clusterctl user installs from, written to out/ (docs/release.md).
//   node scripts/release.ts --version v0.2.0 [--image ghcr.io/me/capi-upgrade-orchestrator] [--out out]
// kubectl (its built-in kustomize) renders config/release: $KUBECTL, else kubectl on PATH.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import semver from 'semver';

export const PROVIDER_NAME = 'capi-upgrade-orchestrator';
/** clusterctl's label for a RuntimeExtensionProvider, and its local repository's directory name. */
export const PROVIDER_LABEL = `runtime-extension-${PROVIDER_NAME}`;
export const NAMESPACE = 'capi-upgrade-orchestrator-system';
/** The CAPI contract every release series implements (Cluster API v1.11+ serves v1beta2). */
export const CONTRACT = 'v1beta2';
export const DEFAULT_IMAGE_REPOSITORY = 'ghcr.io/capi-upgrade-orchestrator/capi-upgrade-orchestrator';
export const COMPONENTS_FILE = 'runtime-extension-components.yaml';
export const CLIENT_CERTIFICATES_FILE = 'capi-client-certificates.yaml';

const ROOT = new URL('../', import.meta.url).pathname;

/** Bad input to `make release`: printed as is, exit 2. */
export class ReleaseInputError extends Error {}

export interface ReleaseVersion {
  /** As given: `v0.2.0`. */
  tag: string;
  major: number;
  minor: number;
  patch: number;
}

export function parseVersion(raw: string | undefined): ReleaseVersion {
  const given = (raw ?? '').trim();
  const example = 'e.g. make release VERSION=v0.2.0';
  if (given === '') throw new ReleaseInputError(`VERSION is required: a semantic version with a leading v, ${example}`);
  const parsed = given.startsWith('v') ? semver.parse(given.slice(1)) : null;
  if (!parsed)
    throw new ReleaseInputError(
      `VERSION=${JSON.stringify(given)} is not a semantic version with a leading v (vMAJOR.MINOR.PATCH), ${example}`,
    );
  return { tag: given, major: parsed.major, minor: parsed.minor, patch: parsed.patch };
}

// A container image reference: [host[:port]/]path[:tag][@sha256:digest], lowercase path.
const IMAGE_REF =
  /^(?:[a-zA-Z0-9.-]+(?::\d+)?\/)?[a-z0-9]+(?:[._-][a-z0-9]+)*(?:\/[a-z0-9]+(?:[._-][a-z0-9]+)*)*(?::[\w][\w.-]{0,127})?(?:@sha256:[a-f0-9]{64})?$/;

/** IMAGE as given; without a tag or digest, tagged with the release. */
export function parseImage(raw: string | undefined, version: ReleaseVersion): string {
  const given = (raw ?? '').trim();
  if (given === '') return `${DEFAULT_IMAGE_REPOSITORY}:${version.tag}`;
  if (!IMAGE_REF.test(given))
    throw new ReleaseInputError(
      `IMAGE=${JSON.stringify(given)} is not an image reference (registry/name[:tag][@sha256:digest]), e.g. IMAGE=ghcr.io/me/capi-upgrade-orchestrator`,
    );
  const last = given.slice(given.lastIndexOf('/') + 1);
  return last.includes(':') || last.includes('@') ? given : `${given}:${version.tag}`;
}

/** The documents of a multi-document YAML stream (kustomize's output), without separators or comment-only ones. */
export function splitDocuments(yaml: string): string[] {
  return yaml
    .split(/^---\s*$/m)
    .map((d) => d.replace(/^\n+/, ''))
    .filter((d) => d.split('\n').some((line) => line.trim() !== '' && !line.startsWith('#')));
}

export function documentKind(doc: string): string {
  return /^kind: (\S+)$/m.exec(doc)?.[1] ?? '';
}

/** metadata.namespace of a kustomize-rendered document ('' when none). */
export function documentNamespace(doc: string): string {
  const metadata = /^metadata:\n((?: {2}.*\n?|\n)*)/m.exec(doc)?.[1] ?? '';
  return /^ {2}namespace: (\S+)$/m.exec(metadata)?.[1] ?? '';
}

/**
 * Quotes a YAML value that is exactly one clusterctl variable, so an empty
 * substitution stays an empty string (an unquoted empty value is null).
 */
function quoteVariables(doc: string): string {
  return doc.replace(/^(\s*(?:- )?[\w./-]+: )(\$\{[A-Z0-9_]+(?::=[^}"]*)?\})$/gm, '$1"$2"');
}

/** A cluster-scoped RBAC name clusterctl deletes: it removes only those starting with `<namespace>-`. */
export function instanceName(name: string): string {
  return name.startsWith(`${PROVIDER_NAME}-`)
    ? `${NAMESPACE}-${name.slice(PROVIDER_NAME.length + 1)}`
    : `${NAMESPACE}-${name}`;
}

/** The `  name:` line of a top-level block (`metadata:`, `roleRef:`) renamed with `rename`. */
function renameIn(doc: string, block: string, rename: (name: string) => string): string {
  return doc.replace(
    new RegExp(`^(${block}:\n(?: {2}.*\n)*? {2}name: )(\\S+)$`, 'm'),
    (_, head: string, name: string) => `${head}${rename(name)}`,
  );
}

/**
 * ClusterRoles and ClusterRoleBindings under instance names, so that `clusterctl delete`
 * and `clusterctl upgrade` remove them (their roleRefs follow; subjects are ServiceAccounts).
 */
function instanceRbac(doc: string): string {
  const kind = documentKind(doc);
  if (kind === 'ClusterRole') return renameIn(doc, 'metadata', instanceName);
  if (kind !== 'ClusterRoleBinding') return doc;
  const bound = renameIn(doc, 'metadata', instanceName);
  return /^roleRef:\n(?: {2}.*\n)*? {2}kind: ClusterRole$/m.test(bound)
    ? renameIn(bound, 'roleRef', instanceName)
    : bound;
}

/** The clusterctl variable that names the promote Job's image (clusterctl's image overrides skip Jobs). */
export const PROMOTE_IMAGE_VARIABLE = 'CAPI_UPGRADE_PROMOTE_IMAGE';

/**
 * The image in one object. Deployments carry the literal reference: clusterctl parses it to apply
 * the `images:` overrides of clusterctl.yaml (on `init`, `upgrade` and `generate provider
 * --describe`, where no variable is substituted), and a `${VAR:=…}` there is no reference to it.
 * Those overrides reach Deployments and DaemonSets only, so the promote Job, which must run the
 * workers' image (its build id), takes a variable a mirror's user sets to the same image.
 */
function fillImage(doc: string, image: string): string {
  const value = documentKind(doc) === 'Job' ? `\${${PROMOTE_IMAGE_VARIABLE}:=${image}}` : image;
  return doc.replaceAll('__RELEASE_IMAGE__:__RELEASE_TAG__', value);
}

/**
 * Fills config/release's tokens and splits the objects clusterctl cannot install (it
 * moves every namespaced object into the provider's one namespace) from the rest.
 */
export function releaseComponents(
  rendered: string,
  release: { version: ReleaseVersion; image: string },
): { components: string; clientCertificates: string } {
  const filled = splitDocuments(rendered.replaceAll('__RELEASE_VERSION__', release.version.tag)).map((d) =>
    fillImage(d, release.image),
  );
  const leftover = /__RELEASE_\w+__/.exec(filled.join('---\n'));
  if (leftover) throw new Error(`config/release left the token ${leftover[0]} unfilled`);
  const docs = filled.map(quoteVariables).map(instanceRbac);
  const own = docs.filter((d) => [NAMESPACE, ''].includes(documentNamespace(d)));
  const foreign = docs.filter((d) => !own.includes(d));
  const namespaces = own.filter((d) => documentKind(d) === 'Namespace');
  if (namespaces.length !== 1)
    throw new Error(`the components hold ${namespaces.length} Namespaces, clusterctl needs 1`);
  const header = (what: string) =>
    `# ${PROVIDER_NAME} ${release.version.tag}: ${what}\n# Generated by \`make release\` from config/release; docs/release.md.\n`;
  return {
    components: `${header(`clusterctl ${PROVIDER_LABEL} components`)}---\n${own.join('---\n')}`,
    clientCertificates:
      `${header("the client CA and CAPI's client certificates, in cert-manager's and CAPI's namespaces")}` +
      `# Apply after clusterctl init (kubectl apply -f); docs/client-certificates.md.\n---\n${foreign.join('---\n')}`,
  };
}

/** `## [0.2.0] - 2026-11-25` headings of a Keep a Changelog file, newest first. */
function changelogVersions(changelog: string): string[] {
  return [...changelog.matchAll(/^## \[(\d+\.\d+\.\d+[^\]]*)\]/gm)].map((m) => m[1]!);
}

/** clusterctl's Metadata: every release series so far (from CHANGELOG.md) and this one, all on CONTRACT. */
export function metadataYaml(version: ReleaseVersion, changelog: string): string {
  const series = new Map<string, { major: number; minor: number }>();
  for (const v of [...changelogVersions(changelog), `${version.major}.${version.minor}.${version.patch}`]) {
    const parsed = semver.parse(v);
    if (parsed) series.set(`${parsed.major}.${parsed.minor}`, { major: parsed.major, minor: parsed.minor });
  }
  const sorted = [...series.values()].sort((a, b) => b.major - a.major || b.minor - a.minor);
  return [
    `# Release series of ${PROVIDER_NAME} and the Cluster API contract each implements.`,
    'apiVersion: clusterctl.cluster.x-k8s.io/v1alpha3',
    'kind: Metadata',
    'releaseSeries:',
    ...sorted.map((s) => `  - major: ${s.major}\n    minor: ${s.minor}\n    contract: ${CONTRACT}`),
    '',
  ].join('\n');
}

/** A section's entries: its text without the heading and the link references. */
function sectionBody(section: string): string {
  return section
    .replace(/^## .*\n/, '')
    .replace(/^\[[^\]]+\]: .*$/gm, '')
    .trim();
}

/**
 * The release notes: the changes under [Unreleased] for a version newer than every released one (the usual
 * release), or the version's own section when [Unreleased] has just been moved there (it is the newest and
 * [Unreleased] is empty). A version CHANGELOG.md released before the changes under [Unreleased] is refused: its
 * notes would not describe what this checkout builds.
 */
export function releaseNotes(changelog: string, version: ReleaseVersion): { notes: string; fromUnreleased: boolean } {
  const sections = changelog.split(/^(?=## \[)/m).slice(1);
  const bare = version.tag.slice(1);
  const unreleased = sections.find((s) => s.startsWith('## [Unreleased]'));
  const pending = unreleased !== undefined && sectionBody(unreleased) !== '';
  const released = sections.filter((s) => !s.startsWith('## [Unreleased]'));
  const newest = released[0] && /^## \[([^\]]+)\]/.exec(released[0])?.[1];
  const next = (() => {
    const n = newest ? semver.parse(newest) : null;
    return n ? `v${n.major}.${n.minor + 1}.0` : 'v0.1.0';
  })();
  const notes = (section: string) => `# ${PROVIDER_NAME} ${version.tag}\n\n${sectionBody(section)}\n`;
  const own = released.find((s) => s.startsWith(`## [${bare}]`));
  if (own) {
    if (own === released[0] && !pending) return { notes: notes(own), fromUnreleased: false };
    const heading = own.split('\n')[0]!.replace(/^## /, '');
    throw new ReleaseInputError(
      `CHANGELOG.md already has ${heading}, and ${pending ? '[Unreleased] holds changes' : 'newer versions were released'} since: ` +
        `release them as a newer version (VERSION=${next}), or move [Unreleased] to a new version section first`,
    );
  }
  if (!unreleased) throw new ReleaseInputError(`CHANGELOG.md has neither a [${bare}] nor an [Unreleased] section`);
  if (newest && semver.valid(newest) && !semver.gt(bare, newest))
    throw new ReleaseInputError(
      `${version.tag} is older than [${newest}], the newest release in CHANGELOG.md: VERSION=${next} releases [Unreleased]`,
    );
  if (!pending)
    throw new ReleaseInputError(`CHANGELOG.md's [Unreleased] section is empty: nothing to release as ${version.tag}`);
  return { notes: notes(unreleased), fromUnreleased: true };
}

/** `sha256sum` format: `<hex>  <file>` per file, sorted by name. */
export function checksums(files: Record<string, string>): string {
  return Object.keys(files)
    .sort()
    .map((name) => `${createHash('sha256').update(files[name]!).digest('hex')}  ${name}\n`)
    .join('');
}

/** Every asset of a release, by file name. */
export function releaseAssets(
  version: ReleaseVersion,
  image: string,
  rendered: string,
  read: (path: string) => string,
): { files: Record<string, string>; fromUnreleased: boolean } {
  const changelog = read('CHANGELOG.md');
  const { components, clientCertificates } = releaseComponents(rendered, { version, image });
  const { notes, fromUnreleased } = releaseNotes(changelog, version);
  const files: Record<string, string> = {
    [COMPONENTS_FILE]: components,
    [CLIENT_CERTIFICATES_FILE]: clientCertificates,
    'metadata.yaml': metadataYaml(version, changelog),
    'nodeupgraderequests-crd.yaml': read('config/crd/nodeupgraderequests.yaml'),
    'workload-role.yaml': read('config/workload/workload-role.yaml'),
    'grafana-dashboard.json': read('config/prometheus/dashboard.json'),
    'release-notes.md': notes,
  };
  return { files: { ...files, 'checksums.txt': checksums(files) }, fromUnreleased };
}

function main(): void {
  const { values } = parseArgs({
    options: { version: { type: 'string' }, image: { type: 'string' }, out: { type: 'string', default: 'out' } },
  });
  let version: ReleaseVersion;
  let image: string;
  try {
    version = parseVersion(values.version);
    image = parseImage(values.image, version);
    // Before anything is rendered: a version CHANGELOG.md refuses stops here.
    releaseNotes(readFileSync(join(ROOT, 'CHANGELOG.md'), 'utf8'), version);
  } catch (err) {
    if (!(err instanceof ReleaseInputError)) throw err;
    console.error(`make release: ${err.message}`);
    process.exit(2);
  }
  const rendered = execFileSync(process.env['KUBECTL'] || 'kubectl', ['kustomize', join(ROOT, 'config/release')], {
    encoding: 'utf8',
    maxBuffer: 16 << 20,
  });
  const { files, fromUnreleased } = releaseAssets(version, image, rendered, (p) => readFileSync(join(ROOT, p), 'utf8'));
  const out = resolve(values.out);
  rmSync(out, { recursive: true, force: true });
  mkdirSync(out, { recursive: true });
  for (const [name, text] of Object.entries(files)) writeFileSync(join(out, name), text);
  if (fromUnreleased)
    console.error(
      `note: release notes from CHANGELOG.md's [Unreleased]; move them to [${version.tag.slice(1)}] - <date> when you publish`,
    );
  if ((values.image ?? '').trim() === '')
    console.error(
      `warning: no IMAGE given: the components name ${image}, which this project does not publish; ` +
        'build and push the image yourself and name it (make release VERSION=… IMAGE=registry/name), ' +
        "or override it with clusterctl's images: (docs/release.md)",
    );
  console.log(`${PROVIDER_NAME} ${version.tag} (image ${image}) written to ${out}:`);
  for (const name of Object.keys(files)) console.log(`  ${name}`);
}

if (process.argv[1] && resolve(process.argv[1]) === new URL(import.meta.url).pathname) main();
