// The processes as the image runs them (NODE_OPTIONS from the Dockerfile), with a
// tenant's kubeconfig Secret pointing at a hostile API server: the api (CanUpdate*
// under the delegate executor reads node agent Leases) and the worker's health
// check (nodes, PDBs, pods) stay up within the Deployments' memory limits through
// every hostile answer, and a 400 MiB one is answered with the limit that refused it.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { defaultHandlerName } from '../../src/api/hooks/contract.ts';
import { hookPath } from '../../src/api/hooks/hook-route.ts';
import { callHook } from '../../support/capi-client.ts';
import { delegateCanUpdateMachine } from '../../support/capi-fixtures.ts';
import { createNamespace, managementApi, testbed, testGroup } from '../../support/testbed-fixtures.ts';
import { startExtensionProcess, type ExtensionProcess } from '../support/extension-process.ts';
import { HOSTILE_ANSWERS, startHostileApiServer, type HostileApiServer } from '../support/hostile-apiserver.ts';
import { testPki } from '../support/pki.ts';

const MiB = 1024 * 1024;
const IMAGE_NODE_OPTIONS = '--max-semi-space-size=4 --max-old-space-size=256';
const group = testGroup('hostile-proc');
const g = group.name;
const mg = managementApi();
let hostile: HostileApiServer;
let api: ExtensionProcess;

/** A Deployment's memory limit (config/manager/<role>.yaml), in bytes. */
function memoryLimitBytes(role: 'api' | 'worker'): number {
  const yaml = readFileSync(new URL(`../../config/manager/${role}.yaml`, import.meta.url), 'utf8');
  const match = /limits:\s*\n\s*memory:\s*(\d+)Mi/.exec(yaml);
  if (!match) throw new Error(`config/manager/${role}.yaml: no memory limit found`);
  return Number(match[1]) * MiB;
}

/** Peak resident set size of a live process (VmHWM), in bytes. */
function peakRss(pid: number): number {
  const match = /^VmHWM:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!match) throw new Error(`/proc/${pid}/status: no VmHWM`);
  return Number(match[1]) * 1024;
}

/** The health check in a process of its own, as the worker's image runs it; exits 0 whatever the answer. */
async function healthCheckInChild(): Promise<{ result: { report?: unknown; failure?: string }; peak: number }> {
  const child = spawn(
    process.execPath,
    ['--disable-warning=ExperimentalWarning', 'test/support/health-check-child.ts', `${g}/tenant`],
    {
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        NODE_OPTIONS: IMAGE_NODE_OPTIONS,
        MALLOC_ARENA_MAX: '2',
        MANAGEMENT_KUBECONFIG: testbed().workerKubeconfig,
        // The trickle ends at the deadline: a short one keeps the test short.
        WORKLOAD_READ_TIMEOUT_SECONDS: '3',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let out = '';
  let err = '';
  let peak = 0;
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const sampler = setInterval(() => {
    try {
      peak = Math.max(peak, peakRss(child.pid!));
    } catch {
      // exited between two samples
    }
  }, 50);
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  clearInterval(sampler);
  expect({ code, err: err.slice(-500) }).toEqual({ code: 0, err: '' });
  return { result: JSON.parse(out) as { report?: unknown; failure?: string }, peak };
}

beforeAll(async () => {
  hostile = await startHostileApiServer();
  hostile.prepare();
  hostile.answer = 'huge';
  await createNamespace(mg.core, g);
  await mg.core.createNamespacedSecret({
    namespace: g,
    body: {
      metadata: { name: 'tenant-kubeconfig', namespace: g },
      type: 'cluster.x-k8s.io/secret',
      data: { value: Buffer.from(hostile.kubeconfig()).toString('base64') },
    },
  });
  api = await startExtensionProcess({
    ROLE: 'api',
    NODE_OPTIONS: IMAGE_NODE_OPTIONS,
    MALLOC_ARENA_MAX: '2',
    MANAGEMENT_KUBECONFIG: testbed().apiKubeconfig,
    TEMPORAL_ADDRESS: process.env.TEMPORAL_ADDRESS ?? '127.0.0.1:7233',
    TEMPORAL_NAMESPACE: process.env.TEMPORAL_NAMESPACE ?? 'default',
  });
  // Two cores shared with every other tier: a start can take a while.
  await api.ready(120_000);
}, 180_000);
afterAll(async () => {
  api?.kill();
  await hostile.close();
  await mg.core.deleteNamespace({ name: g }).catch(() => undefined);
});

describe('a tenant API server that answers 400 MiB', () => {
  it('the api answers CanUpdateMachine naming the limit, stays up and within its memory limit', async () => {
    const before = hostile.bytesSent();
    const answer = await callHook<{ status: string; message?: string }>(
      api.hookUrl,
      hookPath('CanUpdateMachine', defaultHandlerName('CanUpdateMachine')),
      delegateCanUpdateMachine(g, 'tenant', 'node-1'),
      { ca: testPki().ca.certPem, timeout: '10s' },
    );
    expect(answer.body.status).toBe('Success');
    expect(answer.body.message).toContain(`workload cluster ${g}/tenant: GET /apis/coordination.k8s.io/v1/namespaces/`);
    expect(answer.body.message).toContain('answer larger than 8388608 bytes (WORKLOAD_READ_MAX_BYTES)');
    expect(await api.exitedWithin(500)).toBe('still running');
    const pid = api.child.pid!;
    console.log(
      `api: peak RSS ${(peakRss(pid) / MiB).toFixed(0)} MiB, ${((hostile.bytesSent() - before) / MiB).toFixed(1)} MiB read of 400`,
    );
    expect(peakRss(pid)).toBeLessThan(memoryLimitBytes('api'));
  });

  it("the worker's health check fails naming the limit, in a process that stays within its memory limit", async () => {
    const { result, peak } = await healthCheckInChild();
    // The node list or the PDB list, whichever is refused first: both are the tenant's 400 MiB.
    expect(result.failure).toMatch(
      new RegExp(
        `^workload cluster ${g}/tenant: GET /(api/v1/nodes|apis/policy/v1/poddisruptionbudgets): answer larger than 8388608 bytes \\(WORKLOAD_READ_MAX_BYTES\\)$`,
      ),
    );
    console.log(`health check: peak RSS ${(peak / MiB).toFixed(0)} MiB`);
    expect(peak).toBeLessThan(memoryLimitBytes('worker'));
  });
});

describe.each(HOSTILE_ANSWERS)('a tenant API server answering %s', (answer) => {
  beforeAll(() => {
    hostile.answer = answer;
  });
  afterAll(() => {
    hostile.answer = 'huge';
  });

  it('the api stays up within its memory limit and blames the workload cluster, not Temporal', async () => {
    const reply = await callHook<{ status: string; message?: string }>(
      api.hookUrl,
      hookPath('CanUpdateMachine', defaultHandlerName('CanUpdateMachine')),
      delegateCanUpdateMachine(g, 'tenant', 'node-1'),
      { ca: testPki().ca.certPem, timeout: '10s' },
    );
    expect(reply.statusCode).toBe(200);
    expect(reply.body.status).toBe('Success');
    expect(reply.body.message ?? '').not.toMatch(/orchestrator unavailable|workflow service|Unexpected token/);
    expect(await api.exitedWithin(100)).toBe('still running');
    expect(peakRss(api.child.pid!)).toBeLessThan(memoryLimitBytes('api'));
  });

  it("the worker's health check ends in its process, within its memory limit", async () => {
    const { result, peak } = await healthCheckInChild();
    expect(result.report ?? result.failure).toBeDefined();
    expect(result.failure ?? '').not.toMatch(/Unexpected token|is not valid JSON/);
    expect(peak).toBeLessThan(memoryLimitBytes('worker'));
  });
});
