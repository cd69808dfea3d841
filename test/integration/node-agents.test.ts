// CanUpdateMachine / CanUpdateMachineSet under the delegate executor over HTTPS,
// with the api's real node agent check reading Leases in the test bed's
// workload cluster: no in-place claim unless an agent's Lease is fresh.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { CoordinationV1Api } from '@kubernetes/client-node';
import { defaultHandlerName, HOOKS_API_VERSION } from '../../src/api/hooks/contract.ts';
import { hookPath } from '../../src/api/hooks/hook-route.ts';
import { createNodeAgentCheck, nodeAgentLeaseName } from '../../src/platform/kube/node-agents.ts';
import { managementKubeConfig } from '../../src/platform/kube/clients.ts';
import { callHook } from '../../support/capi-client.ts';
import { delegateCanUpdateMachine, machineSet, template } from '../../support/capi-fixtures.ts';
import {
  createKubeconfigSecret,
  createNamespace,
  managementApi,
  testbed,
  testGroup,
  workloadApi,
  createWorkloadNamespace,
} from '../../support/testbed-fixtures.ts';
import { startTestHookServer, type TestHookServer } from '../support/hook-server.ts';

const group = testGroup('agents');
const g = group.name;
const wl = workloadApi();
const mg = managementApi();
const leases = wl.kc.makeApiClient(CoordinationV1Api);
const settings = { nodeUpgradeExecutor: 'delegate' };

type Answer = { status: string; message?: string; machinePatch?: unknown; machineSetPatch?: unknown };

function canUpdateMachine(nodeName: string) {
  return delegateCanUpdateMachine(g, 'wl', nodeName);
}

function canUpdateMachineSet() {
  const set = (version: string) => {
    const ms = machineSet(version, undefined, g);
    return { ...ms, spec: { ...ms.spec, clusterName: 'wl' } };
  };
  const infra = template('DockerMachineTemplate', 'infrastructure.cluster.x-k8s.io', {}, undefined, g);
  return {
    apiVersion: HOOKS_API_VERSION,
    kind: 'CanUpdateMachineSetRequest',
    settings,
    current: { machineSet: set('v1.33.0'), infrastructureMachineTemplate: infra },
    desired: { machineSet: set('v1.33.1'), infrastructureMachineTemplate: infra },
  };
}

async function writeLease(nodeName: string, renewedSecondsAgo: number): Promise<void> {
  const name = nodeAgentLeaseName(nodeName);
  const body = {
    metadata: { name, namespace: g },
    spec: {
      holderIdentity: nodeName,
      leaseDurationSeconds: 40,
      // A MicroTime: six fractional digits on the wire.
      renewTime: new Date(Date.now() - renewedSecondsAgo * 1000)
        .toISOString()
        .replace(/\.(\d{3})Z$/, '.$1000Z') as unknown as Date,
    },
  };
  await leases.deleteNamespacedLease({ name, namespace: g }).catch(() => undefined);
  await leases.createNamespacedLease({ namespace: g, body });
}

let hooks: TestHookServer;
beforeAll(async () => {
  await Promise.all([createWorkloadNamespace(wl, g), createNamespace(mg.core, g)]);
  await createKubeconfigSecret(mg.core, g, 'wl');
  hooks = await startTestHookServer({
    nodeAgents: createNodeAgentCheck({
      management: managementKubeConfig(testbed().apiKubeconfig),
      namespace: g,
      cacheMs: 0,
    }),
  });
});
afterAll(async () => {
  await hooks.close();
  await Promise.all([
    wl.core.deleteNamespace({ name: g }).catch(() => undefined),
    mg.core.deleteNamespace({ name: g }).catch(() => undefined),
  ]);
});

const call = async (hook: 'CanUpdateMachine' | 'CanUpdateMachineSet', body: unknown) =>
  (
    await callHook<Answer>(hooks.url, hookPath(hook, defaultHandlerName(hook)), body, {
      ca: hooks.ca.certPem,
      timeout: '10s',
    })
  ).body;

describe('CanUpdate* under the delegate executor', () => {
  it('claims nothing in place for a node without a fresh agent Lease, and names the Lease it looked for', async () => {
    expect(await call('CanUpdateMachine', canUpdateMachine(`${g}-n0`))).toEqual({
      apiVersion: HOOKS_API_VERSION,
      kind: 'CanUpdateMachineResponse',
      status: 'Success',
      message: `not in place (rolled out instead): no node agent serves node ${g}-n0 (no fresh Lease ${g}/node-upgrade-agent-${g}-n0)`,
    });
    // Renewed 5 minutes ago with a 40 s duration: the agent is gone.
    await writeLease(`${g}-n0`, 300);
    expect(await call('CanUpdateMachine', canUpdateMachine(`${g}-n0`))).not.toHaveProperty('machinePatch');
    expect(await call('CanUpdateMachineSet', canUpdateMachineSet())).toMatchObject({
      message: `not in place (rolled out instead): no node agent runs in cluster ${g}/wl (no fresh Lease ${g}/node-upgrade-agent-<node>)`,
    });
  });

  it('claims in place once the node agent renews its Lease', async () => {
    await writeLease(`${g}-n1`, 1);
    const answer = await call('CanUpdateMachine', canUpdateMachine(`${g}-n1`));
    expect(answer).toHaveProperty('machinePatch');
    expect(answer.message).toBeUndefined();
    expect(await call('CanUpdateMachineSet', canUpdateMachineSet())).toHaveProperty('machineSetPatch');
    // Another node of the same cluster without its own agent is still rolled out.
    expect(await call('CanUpdateMachine', canUpdateMachine(`${g}-n2`))).not.toHaveProperty('machinePatch');
  });

  it('says when it cannot check, without claiming anything', async () => {
    const body = canUpdateMachine(`${g}-n1`);
    body.current.machine.spec.clusterName = 'absent';
    body.desired.machine.spec.clusterName = 'absent';
    expect(await call('CanUpdateMachine', body)).toMatchObject({
      status: 'Success',
      message: `not in place (rolled out instead): cannot check for a node agent in cluster ${g}/absent (Secret ${g}/absent-kubeconfig not found: cannot reach workload cluster ${g}/absent)`,
    });
  });
});
