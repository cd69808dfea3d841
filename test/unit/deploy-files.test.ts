// docker-compose.yml and the Dockerfile cannot run here (no Docker engine);
// keep them valid and consistent with the code.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { parse } from 'yaml';
import { imageMemoryEnv, imageNodeOptions } from '../../support/image-env.ts';
import { parseConfig } from '../../src/config/index.ts';
import { PROMOTE_IMAGE_VARIABLE } from '../../scripts/release.ts';

interface ComposeService {
  image?: string;
  build?: { context: string; dockerfile: string };
  environment?: Record<string, string>;
  ports?: string[];
  depends_on?: Record<string, unknown> | string[];
}

const compose = parse(readFileSync('docker-compose.yml', 'utf8')) as { services: Record<string, ComposeService> };
const dockerfile = readFileSync('Dockerfile', 'utf8');

describe('docker-compose.yml', () => {
  it('runs Temporal on PostgreSQL, the Web UI and this service', () => {
    expect(Object.keys(compose.services).sort()).toEqual(['orchestrator', 'postgresql', 'temporal', 'temporal-ui']);
    expect(compose.services.temporal?.environment?.DB).toBe('postgres12');
    expect(compose.services['temporal-ui']?.ports).toContain('8233:8080');
    expect(compose.services.orchestrator?.build).toEqual({ context: '.', dockerfile: 'Dockerfile' });
    expect(compose.services.orchestrator?.ports).toContain('9443:9443');
  });

  it("gives the service an environment the service's own config parser accepts", () => {
    const env = compose.services.orchestrator?.environment ?? {};
    const config = parseConfig(env);
    expect(config.temporal.address).toBe('temporal:7233');
    expect(config.server.host).toBe('0.0.0.0');
    expect(config.server.certFile).toBe('/tmp/k8s-webhook-server/serving-certs/tls.crt');
  });

  it('pins the Temporal server and PostgreSQL the production tier tests (scripts/env.sh)', () => {
    const envSh = readFileSync('scripts/env.sh', 'utf8');
    const server = /^TEMPORAL_SERVER_VERSION=v(\S+)$/m.exec(envSh)?.[1];
    const postgres = /^POSTGRES_MAJOR=(\S+)$/m.exec(envSh)?.[1];
    expect(server).toMatch(/^\d+\.\d+\.\d+$/);
    expect(compose.services.temporal?.image).toBe(`temporalio/auto-setup:${server}`);
    expect(compose.services.postgresql?.image).toBe(`postgres:${postgres}`);
  });

  it('only depends on services it defines', () => {
    for (const service of Object.values(compose.services)) {
      const deps = Array.isArray(service.depends_on) ? service.depends_on : Object.keys(service.depends_on ?? {});
      for (const dep of deps) expect(Object.keys(compose.services)).toContain(dep);
    }
  });
});

describe('Dockerfile', () => {
  it('sizes V8 for a container: the NODE_OPTIONS the benchmarks run the worker with', () => {
    expect(imageNodeOptions()).toEqual(['--max-semi-space-size=4', '--max-old-space-size=256']);
  });

  it("caps glibc's malloc arenas: the environment the benchmarks run both processes with", () => {
    expect(imageMemoryEnv()).toEqual({ MALLOC_ARENA_MAX: '2' });
  });

  it('is multi-stage, runs as a non-root user and starts from the prebuilt bundle', () => {
    expect(dockerfile.match(/^FROM /gm)?.length).toBeGreaterThanOrEqual(2);
    // Numeric: the kubelet refuses runAsNonRoot for a user it cannot resolve to a UID.
    expect(dockerfile).toMatch(/^USER 1000:1000$/m);
    expect(dockerfile).toMatch(/WORKFLOW_BUNDLE_PATH=\/app\/dist\/workflow-bundle\.js/);
    expect(dockerfile).toMatch(/FROM node:24/);
    const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as { engines: { node: string } };
    expect(pkg.engines.node).toBe('>=24');
  });

  it('leaves the dev-only code (src/local) out of the build, and nothing the image runs imports it', () => {
    const build = JSON.parse(readFileSync('tsconfig.build.json', 'utf8').replace(/^\s*\/\/.*$/gm, '')) as {
      exclude?: string[];
    };
    expect(build.exclude).toContain('src/local');
    const importers = readdirSync('src', { recursive: true, encoding: 'utf8' })
      .filter((f) => f.endsWith('.ts') && !f.startsWith('local/'))
      .filter((f) => /from '(\.\.?\/)+local\//.test(readFileSync(join('src', f), 'utf8')));
    expect(importers).toEqual([]);
  });

  it('documents every clusterctl variable of the release in docs/release.md', () => {
    const inRelease = new Set(
      readdirSync('config/release')
        .flatMap((f) => [...readFileSync(join('config/release', f), 'utf8').matchAll(/\$\{(CAPI_UPGRADE_[A-Z_]+):=/g)])
        .map((m) => m[1]),
    );
    // The promote Job's image variable is written by scripts/release.ts, not a file of config/release.
    inRelease.add(PROMOTE_IMAGE_VARIABLE);
    const documented = new Set(
      [...readFileSync('docs/release.md', 'utf8').matchAll(/^\| `(CAPI_UPGRADE_[A-Z_]+)` /gm)].map((m) => m[1]),
    );
    expect(inRelease.size).toBeGreaterThan(8);
    expect([...inRelease].sort()).toEqual([...documented].sort());
  });

  it('stamps the release and the worker build into the image (docs/release.md, docs/worker-versioning.md)', () => {
    // The processes read these variables for /version, capi_upgrade_build_info, the memo and Worker Versioning.
    expect(dockerfile).toMatch(/^ARG VERSION=""$/m);
    expect(dockerfile).toMatch(/^ENV CAPI_UPGRADE_VERSION=\$\{VERSION\}$/m);
    expect(dockerfile).toMatch(/^ARG BUILD_ID=""$/m);
    expect(dockerfile).toMatch(/^ENV TEMPORAL_WORKER_BUILD_ID=\$\{BUILD_ID\}$/m);
    expect(dockerfile).toMatch(/org\.opencontainers\.image\.version="\$\{VERSION\}"/);
    // ...and the variables are the ones the code reads.
    const read = ['CAPI_UPGRADE_VERSION', 'TEMPORAL_WORKER_BUILD_ID'].filter((name) =>
      readdirSync('src', { recursive: true, encoding: 'utf8' })
        .filter((f) => f.endsWith('.ts'))
        .some((f) => readFileSync(join('src', f), 'utf8').includes(`'${name}'`)),
    );
    expect(read).toEqual(['CAPI_UPGRADE_VERSION', 'TEMPORAL_WORKER_BUILD_ID']);
  });

  it('ships the node upgrade script where the compiled job executor reads it', () => {
    // src/activities/executors/job.ts → dist/activities/executors/job.js reads ./upgrade-node.sh.
    expect(dockerfile).toMatch(
      /^COPY --from=build .*\/app\/src\/activities\/executors\/upgrade-node\.sh \.\/dist\/activities\/executors\/$/m,
    );
    expect(existsSync('src/activities/executors/upgrade-node.sh')).toBe(true);
  });
});
