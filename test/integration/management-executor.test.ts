// The `management` node-upgrade executor against the test bed: the worker (its
// least-privilege identity from config/rbac) writes the NodeUpgradeRequest into
// the management cluster, in the Machine's namespace and owned by the Machine,
// and a stand-in node upgrader (admin, as an infrastructure's upgrader would
// run) reports in its status. The CRD is in the management cluster as
// config/default installs it (scripts/testbed.sh applies config/crd).
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { CustomObjectsApi } from '@kubernetes/client-node';
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';
import { managementKubeConfig } from '../../src/platform/kube/clients.ts';
import {
  createMachineUpdateActivities,
  NODE_UPGRADE_GROUP,
  NODE_UPGRADE_PLURAL,
  NODE_UPGRADE_VERSION,
  type NodeUpgradeRequest,
} from '../../src/activities/machine-update.ts';
import type {
  NodeUpgradeInput,
  NodeUpgradeRef,
  NodeUpgradeStopped,
} from '../../src/activities/machine-update-types.ts';
import type { NodeUpgradeRequestStatus } from '../../src/activities/executors/node-upgrade-request-crd.ts';
import {
  capiMachine,
  createCapiObject,
  createKubeadmConfigWithSecretFile,
  createKubeconfigSecret,
  createNamespace,
  managementApi,
  sleep,
  testbed,
  testGroup,
} from '../../support/testbed-fixtures.ts';
import { startStandInStatus } from '../support/stand-in-status.ts';

const group = testGroup('mgmt-exec');
const g = group.name;
const mg = managementApi();
const custom = mg.kc.makeApiClient(CustomObjectsApi);
const nurRef = { group: NODE_UPGRADE_GROUP, version: NODE_UPGRADE_VERSION, plural: NODE_UPGRADE_PLURAL, namespace: g };
const activities = createMachineUpdateActivities({
  management: managementKubeConfig(testbed().workerKubeconfig),
  pollIntervalMs: 250,
});
const cluster = { namespace: g, name: 'wl' };
const NEW = 'v1.32.4';
const logger = new DefaultLogger('ERROR');
const node = (n: string) => `${g}-${n}`;
const refs = {
  infrastructureMachine: { apiVersion: 'infrastructure.cluster.x-k8s.io/v1beta2', kind: 'DevMachine', name: 'dm-ok' },
  bootstrapConfig: { apiVersion: 'bootstrap.cluster.x-k8s.io/v1beta2', kind: 'KubeadmConfig', name: 'kc-ok' },
};

async function inActivity<T>(fn: () => Promise<T>, attempt = 1): Promise<T> {
  return (await new MockActivityEnvironment({ attempt }, { logger }).run(fn)) as T;
}

const upgrade = (input: Partial<NodeUpgradeInput> & Pick<NodeUpgradeInput, 'nodeName' | 'requestName'>) =>
  inActivity(() =>
    activities.upgradeNode({
      cluster,
      machine: { namespace: g, name: `m-${input.nodeName}` },
      version: NEW,
      executor: 'management',
      timeoutMs: 30_000,
      ...input,
    }),
  );
const ref = (nodeName: string, requestName: string): NodeUpgradeRef => ({
  cluster,
  nodeName,
  executor: 'management',
  requestName,
});
const read = async (name: string) =>
  (await custom.getNamespacedCustomObject({ ...nurRef, name })) as NodeUpgradeRequest;

/**
 * A stand-in node upgrader: what it says for each node, once per generation; nodes it does not
 * know it leaves alone (no upgrader serves them).
 */
function startUpgrader(says: Record<string, NodeUpgradeRequestStatus>): { stop: () => Promise<void> } {
  return startStandInStatus(
    custom,
    g,
    (req) => (req.status?.observedGeneration === (req.metadata.generation ?? 0) ? undefined : says[req.spec.nodeName]),
    150,
  );
}

const [ok, bad, slow, none] = ['ok', 'bad', 'slow', 'none'].map(node) as [string, string, string, string];
let upgrader: { stop: () => Promise<void> };
const machineUids: Record<string, string> = {};

beforeAll(async () => {
  await createNamespace(mg.core, g);
  await createKubeconfigSecret(mg.core, g, cluster.name);
  for (const n of [ok, bad, slow, none]) {
    const created = await createCapiObject(mg.custom, capiMachine(`m-${n}`, g, { cluster: cluster.name, nodeName: n }));
    machineUids[n] = (created.metadata as { uid?: string }).uid ?? '';
  }
  upgrader = startUpgrader({
    [ok]: { phase: 'Succeeded', message: `node ${ok} upgraded to ${NEW}` },
    [bad]: {
      phase: 'Failed',
      message: 'upgrade failed',
      failureReason: 'ImagePullFailed',
      failureMessage: `could not pull registry.invalid/kubelet:${NEW}`,
    },
    [slow]: { phase: 'Running', message: 'writing files' },
  });
});

afterAll(async () => {
  await upgrader.stop();
  await mg.core.deleteNamespace({ name: g }).catch(() => undefined);
});

describe('upgradeNode (management)', () => {
  it('writes the request into the Machine namespace, owned by the Machine, with its refs and a files Secret; the upgrader Succeeded', async () => {
    await createKubeadmConfigWithSecretFile(mg, g, 'kc-ok', 'join-token', `token-${g}`);
    const input = {
      nodeName: ok,
      requestName: `${ok}-h1`,
      bootstrapConfig: { namespace: g, name: 'kc-ok' },
      objectRefs: refs,
    };
    expect(await upgrade(input)).toEqual({ message: `node ${ok} upgraded to ${NEW}` });
    const req = await read(`${ok}-h1`);
    expect(req.spec).toEqual({
      nodeName: ok,
      machineRef: { namespace: g, name: `m-${ok}` },
      kubernetesVersion: NEW,
      clusterName: cluster.name,
      infrastructureMachineRef: refs.infrastructureMachine,
      bootstrapConfigRef: refs.bootstrapConfig,
      bootstrapFilesSecretRef: { name: `${ok}-h1-files` },
    });
    expect(req.metadata.labels).toEqual({
      'app.kubernetes.io/managed-by': 'capi-upgrade-orchestrator',
      'upgrades.capi-orchestrator.io/node-name': ok,
      'cluster.x-k8s.io/cluster-name': cluster.name,
      'upgrades.capi-orchestrator.io/machine-name': `m-${ok}`,
    });
    expect(machineUids[ok]).toMatch(/./);
    expect(req.metadata.ownerReferences).toEqual([
      {
        apiVersion: 'cluster.x-k8s.io/v1beta2',
        kind: 'Machine',
        name: `m-${ok}`,
        uid: machineUids[ok],
        controller: false,
        blockOwnerDeletion: false,
      },
    ]);
    // The file contents are in a Secret owned by the request, never in its spec.
    expect(JSON.stringify(req)).not.toContain(`token-${g}`);
    const secret = await mg.core.readNamespacedSecret({ name: `${ok}-h1-files`, namespace: g });
    expect(secret.metadata?.ownerReferences).toEqual([
      expect.objectContaining({ kind: 'NodeUpgradeRequest', name: `${ok}-h1`, uid: req.metadata.uid }),
    ]);
    expect(Buffer.from(secret.data?.f1 ?? '', 'base64').toString('utf8')).toBe(`token-${g}`);
    // Idempotent: a retried attempt finds the finished request.
    expect(await upgrade(input)).toEqual({ message: `node ${ok} upgraded to ${NEW}` });
    expect((await read(`${ok}-h1`)).metadata.uid).toBe(req.metadata.uid);

    await inActivity(() => activities.cleanupNodeUpgrade(ref(ok, `${ok}-h1`)));
    await expect(read(`${ok}-h1`)).rejects.toMatchObject({ code: 404 });
    await inActivity(() => activities.cleanupNodeUpgrade(ref(ok, `${ok}-h1`)));
  });

  it('fails with `<failureReason>: <failureMessage>` when the upgrader reports Failed', async () => {
    await expect(upgrade({ nodeName: bad, requestName: `${bad}-h1` })).rejects.toMatchObject({
      nonRetryable: true,
      type: 'NodeAgentFailed',
      message: `ImagePullFailed: could not pull registry.invalid/kubelet:${NEW}`,
    });
  });

  it('fails early, as not taken (the node untouched), when no upgrader sets any status', async () => {
    await expect(
      upgrade({ nodeName: none, requestName: `${none}-h1`, agentPickupTimeoutMs: 1_000, timeoutMs: 60_000 }),
    ).rejects.toMatchObject({
      nonRetryable: true,
      type: 'NodeAgentMissing',
      message:
        `no node upgrader took NodeUpgradeRequest ${g}/${none}-h1 for node ${none} within 1s: ` +
        'is the node upgrader of this infrastructure running? (or use nodeUpgradeExecutor=job)',
    });
  });

  it('fails as MachineDeleted, writing nothing, when the Machine is gone', async () => {
    await expect(
      upgrade({ nodeName: none, requestName: `${none}-gone`, machine: { namespace: g, name: 'm-gone' } }),
    ).rejects.toMatchObject({ nonRetryable: true, type: 'MachineDeleted' });
    await expect(read(`${none}-gone`)).rejects.toMatchObject({ code: 404 });
  });
});

/** upgradeNode in an environment of its own, to cancel it as a workflow's abort does before it stops the executor. */
function startUpgrade(input: Partial<NodeUpgradeInput> & Pick<NodeUpgradeInput, 'nodeName' | 'requestName'>) {
  const env = new MockActivityEnvironment(undefined, { logger });
  const result = env
    .run(activities.upgradeNode, {
      cluster,
      machine: { namespace: g, name: `m-${input.nodeName}` },
      version: NEW,
      executor: 'management',
      timeoutMs: 60_000,
      agentPickupTimeoutMs: 60_000,
      ...input,
    } satisfies NodeUpgradeInput)
    .catch((err: unknown) => err);
  return { env, result };
}

describe('stopNodeUpgrade (management)', () => {
  it('keeps the upgrader status, then deletes the request (stop now); a request nobody took leaves the node untouched', async () => {
    const taken = startUpgrade({ nodeName: slow, requestName: `${slow}-h1` });
    const untaken = startUpgrade({ nodeName: none, requestName: `${none}-h2` });
    for (;;) {
      const [a, b] = await Promise.all([
        read(`${slow}-h1`).catch(() => undefined),
        read(`${none}-h2`).catch(() => undefined),
      ]);
      if (a?.status?.phase === 'Running' && b) break;
      await sleep(100);
    }
    // The abort: the waits are cancelled first, then the executor is stopped.
    for (const { env, result } of [taken, untaken]) {
      env.cancel();
      await result;
    }
    const stop = (n: string, name: string, attempt = 1) =>
      inActivity(() => activities.stopNodeUpgrade(ref(n, name)), attempt) as Promise<NodeUpgradeStopped>;
    expect(await stop(slow, `${slow}-h1`)).toEqual({
      started: true,
      observed: `NodeUpgradeRequest ${g}/${slow}-h1: node upgrader reported Running: writing files`,
    });
    expect(await stop(none, `${none}-h2`)).toEqual({
      started: false,
      observed: `NodeUpgradeRequest ${g}/${none}-h2: no node upgrader took it`,
    });
    await expect(read(`${slow}-h1`)).rejects.toMatchObject({ code: 404 });
    await expect(read(`${none}-h2`)).rejects.toMatchObject({ code: 404 });
    // A retried stop cannot tell "deleted by my first attempt" from "never made": started.
    expect(await stop(slow, `${slow}-h1`, 2)).toMatchObject({ started: true });
  });
});
