// `make dev`, then `capi-upgrades demo`, as a new user runs them: make dev
// brings up its own management cluster with Cluster API's real managers
// (src/local/embedded-management.ts) beside Temporal and the extension, the demo
// upgrades two in-memory Clusters two minors through them (one by replacement,
// one in place), Ctrl-C leaves nothing running, and the next `make dev` resumes
// with the clusters and workflows it held. Its own stack: the tier's managers are
// not shared, because what is tested is that make dev starts them.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Client, Connection } from '@temporalio/client';
import { CLUSTER_UPGRADE_MEMO_KEY, type ClusterUpgradeMemo } from '../../src/model/cluster-upgrade.ts';
import type { DemoResult } from '../../src/local/demo.ts';
import type { DevState } from '../../src/local/dev-state.ts';
import { FREE_PORTS } from '../support/capi-tier.ts';

const run = promisify(execFile);
const ROOT = new URL('../../', import.meta.url).pathname;
const MINUTE = 60_000;
const FROM = 'v1.33.0';
const TARGET = 'v1.35.0';

/** Processes whose command line names `dir`: every one make dev starts does (data dir, state dirs). */
function processesUnder(dir: string): string[] {
  const found: string[] = [];
  // Lines `<pid> <command line>`.
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    if (Number(pid) === process.pid) continue;
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
      if (cmd.includes(dir)) found.push(`${pid} ${cmd.slice(0, 160)}`);
    } catch {
      // Gone meanwhile.
    }
  }
  return found;
}

class MakeDev {
  readonly child: ChildProcess;
  output = '';

  constructor(dir: string) {
    // As a terminal runs it: its own process group, so that Ctrl-C (SIGINT to the group) reaches
    // make and everything in the foreground as it would.
    this.child = spawn('make', ['-s', 'dev'], {
      cwd: ROOT,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        ...process.env,
        CAPI_UO_DATA_DIR: dir,
        // The tier's own stack runs beside this one.
        ...FREE_PORTS,
      },
    });
    for (const stream of [this.child.stdout!, this.child.stderr!])
      stream.on('data', (chunk: Buffer) => (this.output += chunk.toString()));
  }

  async banner(timeoutMs: number): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    while (!this.output.includes('capi-upgrade-orchestrator is running')) {
      if (this.child.exitCode !== null || Date.now() > deadline)
        throw new Error(`make dev did not start (exit ${this.child.exitCode}); its output:\n${this.output}`);
      await new Promise((r) => setTimeout(r, 500));
    }
    return this.output;
  }

  /**
   * Ctrl-C: SIGINT to the group; resolves once make exited. make re-raises the signal after its
   * recipe ended, so how make dev itself stopped is read from its output.
   */
  async interrupt(timeoutMs = 3 * MINUTE): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = new Promise((r) => this.child.once('exit', r));
    process.kill(-this.child.pid!, 'SIGINT');
    const timer = setTimeout(() => process.kill(-this.child.pid!, 'SIGKILL'), timeoutMs);
    await exited;
    clearTimeout(timer);
  }

  /** What make dev said while stopping: an error stopping any part shows here. */
  stopping(): string {
    return this.output.slice(this.output.indexOf('[dev] SIGINT received'));
  }
}

describe('make dev runs an upgrade through Cluster API on its own, and the demo shows it', () => {
  let dir: string;
  let dev: MakeDev | undefined;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'capi-uo-makedev-'));
  });
  afterAll(async () => {
    await dev?.interrupt();
    // Whatever a failed run left: the scripts' own teardown.
    await run('bash', [join(ROOT, 'scripts/capi.sh'), 'down', join(dir, 'management/capi')]).catch(() => undefined);
    await run('bash', [join(ROOT, 'scripts/testbed.sh'), 'down', join(dir, 'management/testbed')]).catch(
      () => undefined,
    );
    // And any process a failed run left that names the dir (the Temporal dev server has a group of its own).
    for (const line of processesUnder(dir)) {
      try {
        process.kill(Number(line.split(' ')[0]), 'SIGKILL');
      } catch {
        // gone meanwhile
      }
    }
    rmSync(dir, { recursive: true, force: true });
  });

  it(
    `brings up Cluster API, upgrades two clusters ${FROM} → ${TARGET} through the extension (by replacement and in place), stops clean on Ctrl-C and resumes on a restart`,
    async () => {
      dev = new MakeDev(dir);
      const banner = await dev.banner(15 * MINUTE);
      expect(banner).toMatch(/Management cluster embedded: Cluster API v1\.\d+\.\d+ with CAPD's in-memory machines/);
      expect(banner).toContain('capi-upgrades demo');
      const state = JSON.parse(readFileSync(join(dir, 'dev.json'), 'utf8')) as DevState;
      expect(state.management?.extensionName).toBe('capi-upgrade-orchestrator');
      const kubectl = async (args: string[]) =>
        (await run(state.management!.kubectl, ['--kubeconfig', state.management!.kubeconfig, ...args])).stdout;
      // CAPI discovered the extension, over mutual TLS with its client certificates.
      const handlers = await kubectl([
        'get',
        'extensionconfig',
        'capi-upgrade-orchestrator',
        '-o',
        'jsonpath={.status.handlers[*].name}',
      ]);
      expect(handlers.split(' ')).toEqual(
        expect.arrayContaining([
          'generate-upgrade-plan.capi-upgrade-orchestrator',
          'before-cluster-upgrade.capi-upgrade-orchestrator',
          'update-machine.capi-upgrade-orchestrator',
        ]),
      );

      // The demo, as the banner says, from another shell.
      const started = Date.now();
      const demo = await run(join(ROOT, 'bin/capi-upgrades'), ['demo', '-o', 'json'], {
        cwd: ROOT,
        env: { ...process.env, CAPI_UO_DATA_DIR: dir, TEMPORAL_ADDRESS: state.temporalAddress },
        maxBuffer: 16 << 20,
        timeout: 40 * MINUTE,
      });
      console.log(`[make dev] demo: ${Math.round((Date.now() - started) / 1000)} s`);
      const result = JSON.parse(demo.stdout) as DemoResult;
      expect(demo.stderr).toContain('temporal workflow signal');
      expect(demo.stderr).toContain('--name abort');
      expect(result.clusters.map((c) => c.name)).toEqual(['rolling', 'in-place']);

      const connection = await Connection.connect({ address: state.temporalAddress });
      try {
        const client = new Client({ connection, namespace: state.temporalNamespace });
        for (const c of result.clusters) {
          const versions = await kubectl([
            'get',
            'machines.cluster.x-k8s.io',
            '-n',
            result.namespace,
            '-l',
            `cluster.x-k8s.io/cluster-name=${c.name}`,
            '-o',
            'jsonpath={.items[*].spec.version}',
          ]);
          expect(versions.split(' ')).toEqual(Array(c.name === 'rolling' ? 3 : 5).fill(TARGET));
          // The extension ran it: its workflow holds the chained upgrade, minor by minor.
          const memo = (await client.workflow.getHandle(c.workflowId).describe()).memo?.[CLUSTER_UPGRADE_MEMO_KEY] as
            ClusterUpgradeMemo | undefined;
          expect(memo).toMatchObject({ targetVersion: TARGET, phase: 'Upgraded' });
        }
        // In place: the same Machines, now at the target.
        const inPlace = result.clusters[1]!;
        expect(inPlace.machinesBefore).toEqual(inPlace.machines);
        const rolling = result.clusters[0]!;
        expect(rolling.machines).not.toEqual(rolling.machinesBefore);
      } finally {
        await connection.close();
      }

      // Ctrl-C: everything stops, nothing of this stack runs on.
      await dev.interrupt();
      expect(dev.output).toContain('[dev] SIGINT received: stopping everything');
      expect(dev.stopping()).not.toMatch(/\[dev\] stopping .*:|error/i);
      expect(processesUnder(dir)).toEqual([]);

      // The next make dev resumes: the same management cluster with the demo's Clusters.
      dev = new MakeDev(dir);
      const again = await dev.banner(10 * MINUTE);
      expect(again).toContain('starting the management cluster kept in');
      const clusters = await kubectl([
        'get',
        'clusters',
        '-n',
        result.namespace,
        '-o',
        'jsonpath={.items[*].metadata.name}',
      ]);
      expect(clusters.split(' ').sort()).toEqual(['in-place', 'rolling']);
      await dev.interrupt();
      expect(dev.stopping()).toContain('is stopped (its data is kept)');
      expect(dev.stopping()).not.toMatch(/\[dev\] stopping .*:|error/i);
      expect(processesUnder(dir)).toEqual([]);
    },
    60 * MINUTE,
  );
});
