// Bootstrap files are bounded before and while they are decoded:
// a KubeadmConfig file `contentFrom` a Secret holding 0.9 MB of gzip+base64 that
// inflates to 700 MB used to be inflated whole (RSS 507 MiB → 1.9 GiB, then a
// retried "Cannot create a string longer than 0x1fffffe8 characters"). The
// activity runs in a child process so its peak memory is its own.
import { execFile } from 'node:child_process';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { BatchV1Api } from '@kubernetes/client-node';
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';
import { MAX_BOOTSTRAP_FILES_BYTES } from '../../src/activities/executors/bootstrap-files.ts';
import { managementKubeConfig } from '../../src/platform/kube/clients.ts';
import { createMachineUpdateActivities } from '../../src/activities/machine-update.ts';
import type { NodeUpgradeInput } from '../../src/activities/machine-update-types.ts';
import type { ChildInput, ChildResult } from '../support/upgrade-node-child.ts';
import {
  createKubeadmConfig,
  createKubeconfigSecret,
  createNamespace,
  createWorkloadNamespace,
  deleteGroup,
  managementApi,
  testbed,
  testChecksumsFile,
  testGroup,
  workloadApi,
} from '../../support/testbed-fixtures.ts';

const group = testGroup('bf');
const g = group.name;
const wl = workloadApi();
const mg = managementApi();
const cluster = { namespace: g, name: 'wl' };
const VERSION = 'v1.32.4';
const checksumsFile = testChecksumsFile([VERSION]);
const MiB = 1024 * 1024;

const input = (name: string, bootstrapConfig: string): NodeUpgradeInput => ({
  cluster,
  machine: { namespace: g, name: `m-${name}` },
  nodeName: `${g}-node`,
  version: VERSION,
  bootstrapConfig: { namespace: g, name: bootstrapConfig },
  executor: 'job',
  requestName: name,
  timeoutMs: 60_000,
});

/** gzip of `mib` MiB of zeros: one 1 MiB member (~1 KB) repeated (gunzip reads concatenated members). */
function zerosGzip(mib: number): Buffer {
  const member = gzipSync(Buffer.alloc(MiB), { level: 9 });
  return Buffer.concat(Array.from({ length: mib }, () => member));
}

function runChild(childInput: ChildInput): Promise<ChildResult> {
  const script = new URL('../support/upgrade-node-child.ts', import.meta.url).pathname;
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      ['--disable-warning=ExperimentalWarning', script, JSON.stringify(childInput)],
      { maxBuffer: MiB, timeout: 120_000 },
      (err, stdout, stderr) => {
        if (err) reject(new Error(`child failed: ${err.message}\n${stderr}`));
        else resolve(JSON.parse(stdout.trim().split('\n').at(-1) ?? '{}') as ChildResult);
      },
    );
  });
}

beforeAll(async () => {
  await Promise.all([createWorkloadNamespace(wl, g), createNamespace(mg.core, g)]);
  await createKubeconfigSecret(mg.core, g, cluster.name);
});

afterAll(async () => {
  await deleteGroup(wl, group);
  await mg.core.deleteNamespace({ name: g }).catch(() => undefined);
});

describe('bootstrap files: bounded decompression', () => {
  it('a 0.9 MB gzip+base64 file that inflates to 700 MB fails the update non-retryably, naming the file and the cap; peak RSS grows < 100 MiB', async () => {
    const bomb = zerosGzip(700).toString('base64');
    expect(bomb.length).toBeLessThan(MiB); // fits a Secret
    await mg.core.createNamespacedSecret({ namespace: g, body: { metadata: { name: 'bomb' }, stringData: { bomb } } });
    await createKubeadmConfig(mg, g, 'kc-bomb', [
      { path: '/etc/kubernetes/bomb', encoding: 'gzip+base64', contentFrom: { secret: { name: 'bomb', key: 'bomb' } } },
    ]);
    const result = await runChild({
      managementKubeconfig: testbed().workerKubeconfig,
      workloadNamespace: g,
      checksumsFile,
      input: input(`${g}-bomb`, 'kc-bomb'),
    });
    const growthMiB = (result.hwmAfterKiB - result.hwmBeforeKiB) / 1024;
    console.log(
      `gzip bomb: ${(bomb.length / 1e6).toFixed(2)} MB of gzip+base64 (700 MiB inflated); ` +
        `the activity's process peak RSS ${(result.hwmBeforeKiB / 1024).toFixed(0)} → ${(result.hwmAfterKiB / 1024).toFixed(0)} MiB (+${growthMiB.toFixed(1)} MiB)`,
    );
    expect(result.failure).toEqual({
      type: 'NodeUpgradeRefused',
      nonRetryable: true,
      message:
        `bootstrap file /etc/kubernetes/bomb: over the ${MAX_BOOTSTRAP_FILES_BYTES}-byte limit for all bootstrap files ` +
        'of an update (they travel in one Secret, which Kubernetes caps at 1 MiB)',
    });
    expect(growthMiB).toBeLessThan(100);
    // Refused before the executor: no Job.
    await expect(
      wl.kc.makeApiClient(BatchV1Api).readNamespacedJob({ name: `${g}-bomb`, namespace: g }),
    ).rejects.toMatchObject({ code: 404 });
  });

  it('counts all files of an update together: the one that goes over the cap is named', async () => {
    const activities = createMachineUpdateActivities({
      management: managementKubeConfig(testbed().workerKubeconfig),
      workloadNamespace: g,
      job: { checksumsFile },
    });
    const run = (i: NodeUpgradeInput) =>
      new MockActivityEnvironment(undefined, { logger: new DefaultLogger('ERROR') }).run(activities.upgradeNode, i);
    // (CAPI's CRD caps inline content at 10240 bytes: large files come from Secrets.)
    const half = 'x'.repeat(600 * 1024);
    for (const [name, value] of [
      ['one', half],
      ['two', Buffer.from(half).toString('base64')],
    ] as const)
      await mg.core.createNamespacedSecret({ namespace: g, body: { metadata: { name }, stringData: { value } } });
    await createKubeadmConfig(mg, g, 'kc-two', [
      { path: '/etc/one', contentFrom: { secret: { name: 'one', key: 'value' } } },
      { path: '/etc/two', encoding: 'base64', contentFrom: { secret: { name: 'two', key: 'value' } } },
    ]);
    await expect(run(input(`${g}-two`, 'kc-two'))).rejects.toMatchObject({
      nonRetryable: true,
      message: expect.stringMatching(/^bootstrap file \/etc\/two: over the 983040-byte limit/),
    });
  });
});
