// Which build this process is: the release in CAPI_UPGRADE_VERSION (the image sets it from its
// VERSION build arg: `docker build --build-arg VERSION=v0.2.0`), else package.json's version
// marked `-dev` (a checkout: make dev, the tests), so nothing unreleased claims a release.
// Shown at the ops server's /version, in the start-up log, as capi_upgrade_build_info, and in
// the memo of each upgrade the api starts (docs/release.md).
import { readFileSync } from 'node:fs';
import { EnvReader } from './config/env.ts';
import { processEnvironment } from './config/environment.ts';
import { RELEASE_VERSION as VERSION } from './config/variables.ts';

export interface BuildInfo {
  /** `v0.2.0` from the image; `v0.1.0-dev` from a checkout. */
  version: string;
  /** Worker Versioning's build id (TEMPORAL_WORKER_BUILD_ID), '' when unversioned. */
  buildId: string;
  /** The Node.js runtime, e.g. v24.11.0. */
  node: string;
}

export class VersionError extends Error {}

export function buildInfo(
  env: Record<string, string | undefined> = processEnvironment(),
  packageJson = defaultPackageJson,
): BuildInfo {
  const read = new EnvReader(env);
  const stamped = read.get('CAPI_UPGRADE_VERSION');
  if (read.problems.length > 0) throw new VersionError(read.problems.join('; '));
  let version: string;
  if (stamped) {
    version = stamped;
  } else {
    const { version: pkg } = JSON.parse(packageJson()) as { version?: unknown };
    version = typeof pkg === 'string' && VERSION.test(`v${pkg}`) ? `v${pkg}-dev` : 'v0.0.0-dev';
  }
  return { version, buildId: read.get('TEMPORAL_WORKER_BUILD_ID') ?? '', node: process.version };
}

/** package.json beside src/ (a checkout) or dist/ (the image copies it to /app). */
function defaultPackageJson(): string {
  return readFileSync(new URL('../package.json', import.meta.url), 'utf8');
}
