// `make dev MANAGEMENT=none`, without a management cluster (the light mode), as a new user meets it: src/local/dev.ts with its own
// Temporal dev server. An upgrade cannot pass its health check there, which is expected: the log says so in one line
// per attempt, with no error-level line and no stack trace.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, openSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { callHook } from '../../support/capi-client.ts';
import { sampleRequest } from '../../support/capi-fixtures.ts';
import { FREE_PORTS } from '../support/capi-tier.ts';
import { stopDevProcess } from '../support/dev-process.ts';
import { waitFor } from '../support/wait.ts';

const ROOT = join(import.meta.dirname, '../..');
const NOT_CONFIGURED = 'ManagementClusterNotConfigured';

let child: ChildProcess;
let dir: string;
let logFile: string;
const output = () => readFileSync(logFile, 'utf8');
const printed = (label: string): string => {
  const value = new RegExp(`^\\s*${label}\\s+(\\S+)`, 'm').exec(output())?.[1];
  if (!value) throw new Error(`make dev did not print its ${label}; its output:\n${output()}`);
  return value;
};

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'capi-uo-dev-light-'));
  logFile = join(dir, 'dev.log');
  const out = openSync(logFile, 'a');
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    CAPI_UO_DATA_DIR: dir,
    MANAGEMENT: 'none',
    // The run's other stacks share this machine.
    ...FREE_PORTS,
  };
  delete env.MANAGEMENT_KUBECONFIG;
  delete env.KUBERNETES_SERVICE_HOST;
  child = spawn(process.execPath, ['--disable-warning=ExperimentalWarning', join(ROOT, 'src/local/dev.ts')], {
    cwd: ROOT,
    stdio: ['ignore', out, out],
    // Its own process group: stopping it stops its Temporal dev server too.
    detached: true,
    env,
  });
  await waitFor(
    async () => child.exitCode !== null || output().includes('capi-upgrade-orchestrator is running'),
    (done) => done,
    300_000,
  );
  if (child.exitCode !== null) throw new Error(`make dev exited with ${child.exitCode}:\n${output()}`);
}, 330_000);

afterAll(async () => {
  if (child?.pid) await stopDevProcess(child, dir);
}, 30_000);

describe('make dev without a management cluster', () => {
  it('logs a health check that cannot run as one warn line per attempt: no error level, no stack trace', async () => {
    const hookUrl = printed('Hook server');
    const ca = readFileSync(printed('Serving CA'), 'utf8');
    const answer = await callHook(
      hookUrl,
      '/hooks.runtime.cluster.x-k8s.io/v1alpha1/beforeclusterupgrade/before-cluster-upgrade',
      sampleRequest('BeforeClusterUpgrade'),
      { ca, timeout: '10s' },
    );
    expect(answer.statusCode).toBe(200);
    // The pre-upgrade health check runs at once, and again after 2 s.
    await waitFor(
      async () => output().split(NOT_CONFIGURED).length - 1,
      (n) => n >= 2,
      60_000,
    );
    const text = output();
    const lines = text.split('\n');
    expect(lines.filter((l) => /^\s+at \S/.test(l))).toEqual([]);
    const json = lines.filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(json.filter((l) => Number(l.level) >= 50)).toEqual([]);
    expect(lines.filter((l) => /\[ERROR\]/.test(l))).toEqual([]);
    const attempts = lines.filter((l) => l.includes(NOT_CONFIGURED));
    for (const line of attempts) {
      expect(JSON.parse(line)).toMatchObject({
        level: 40,
        msg: 'Activity failed',
        activityType: 'checkClusterHealth',
        error: { type: NOT_CONFIGURED, message: expect.stringContaining('no management cluster') as unknown },
      });
    }
  });

  it('prints its ops server in the banner: /metrics answers there', async () => {
    const ops = printed('Ops server');
    expect(ops).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const metrics = await fetch(`${ops}/metrics`);
    expect(metrics.status).toBe(200);
    expect(await metrics.text()).toMatch(/^capi_upgrade_build_info\{/m);
  });

  it("says how to get the tools the banner names (temporal, capi-upgrades) on this shell's PATH", () => {
    expect(output()).toMatch(/^ {2}Shell tools {8}eval "\$\(make env\)" .*temporal.*capi-upgrades/m);
  });
});
