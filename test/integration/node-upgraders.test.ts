// CanUpdateMachine / CanUpdateMachineSet under the management executor over
// HTTPS, with the api's real node upgrader check reading Leases in the test
// bed's management cluster as the api's own identity (config/rbac: a Role on
// Leases in the upgrader namespace): no in-place claim unless the upgrader of
// the infrastructure kind renews its Lease, and then only what it declares.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { CoordinationV1Api } from '@kubernetes/client-node';
import { defaultHandlerName, HOOKS_API_VERSION } from '../../src/api/hooks/contract.ts';
import { hookPath } from '../../src/api/hooks/hook-route.ts';
import {
  createNodeUpgraderCheck,
  IN_PLACE_PATHS_ANNOTATION,
  nodeUpgraderLeaseName,
} from '../../src/platform/kube/node-upgraders.ts';
import { DEFAULT_NODE_UPGRADER_NAMESPACE } from '../../src/model/machine-update.ts';
import { decodeJsonPatch, type JsonPatch } from '../../src/domain/in-place.ts';
import { managementKubeConfig } from '../../src/platform/kube/clients.ts';
import { callHook } from '../../support/capi-client.ts';
import { infrastructureMachine, kubeadmConfig, machine, machineSet, template } from '../../support/capi-fixtures.ts';
import { managementApi, testbed, testGroup } from '../../support/testbed-fixtures.ts';
import { startTestHookServer, type TestHookServer } from '../support/hook-server.ts';

const group = testGroup('upgraders');
const g = group.name;
const mg = managementApi();
const leases = mg.kc.makeApiClient(CoordinationV1Api);
const NS = DEFAULT_NODE_UPGRADER_NAMESPACE;
/** A kind of this file's own: Leases are per kind, in one namespace. */
const KIND = `Dev${g.replace(/[^a-z0-9]/g, '')}Machine`;
const LEASE = nodeUpgraderLeaseName(KIND);
const settings = { nodeUpgradeExecutor: 'management' };

type Answer = {
  status: string;
  message?: string;
  machinePatch?: JsonPatch;
  bootstrapConfigPatch?: JsonPatch;
  machineSetPatch?: JsonPatch;
};

/** A version change (and, with `files`, a KubeadmConfig files change) of a Machine of infrastructure KIND. */
function canUpdateMachine(files = false) {
  const infra = { ...infrastructureMachine('m-0', g), kind: KIND };
  const config = (content: string) => kubeadmConfig('m-0', g, files ? [{ path: '/etc/x', content }] : []);
  return {
    apiVersion: HOOKS_API_VERSION,
    kind: 'CanUpdateMachineRequest',
    settings,
    current: { machine: machine('m-0', g, 'v1.33.0'), infrastructureMachine: infra, bootstrapConfig: config('a') },
    desired: { machine: machine('m-0', g, 'v1.33.1'), infrastructureMachine: infra, bootstrapConfig: config('b') },
  };
}

function canUpdateMachineSet() {
  const infra = template(`${KIND}Template`, 'infrastructure.cluster.x-k8s.io', {}, undefined, g);
  return {
    apiVersion: HOOKS_API_VERSION,
    kind: 'CanUpdateMachineSetRequest',
    settings,
    current: { machineSet: machineSet('v1.33.0', undefined, g), infrastructureMachineTemplate: infra },
    desired: { machineSet: machineSet('v1.33.1', undefined, g), infrastructureMachineTemplate: infra },
  };
}

async function writeLease(renewedSecondsAgo: number, paths?: string): Promise<void> {
  const body = {
    metadata: { name: LEASE, namespace: NS, ...(paths ? { annotations: { [IN_PLACE_PATHS_ANNOTATION]: paths } } : {}) },
    spec: {
      holderIdentity: 'stand-in-upgrader',
      leaseDurationSeconds: 40,
      // A MicroTime: six fractional digits on the wire.
      renewTime: new Date(Date.now() - renewedSecondsAgo * 1000)
        .toISOString()
        .replace(/\.(\d{3})Z$/, '.$1000Z') as unknown as Date,
    },
  };
  await leases.deleteNamespacedLease({ name: LEASE, namespace: NS }).catch(() => undefined);
  await leases.createNamespacedLease({ namespace: NS, body });
}

let hooks: TestHookServer;
beforeAll(async () => {
  hooks = await startTestHookServer({
    nodeUpgraders: createNodeUpgraderCheck({
      management: managementKubeConfig(testbed().apiKubeconfig),
      namespace: NS,
      cacheMs: 0,
    }),
  });
});
afterAll(async () => {
  await hooks.close();
  await leases.deleteNamespacedLease({ name: LEASE, namespace: NS }).catch(() => undefined);
});

const call = async (hook: 'CanUpdateMachine' | 'CanUpdateMachineSet', body: unknown) =>
  (
    await callHook<Answer>(hooks.url, hookPath(hook, defaultHandlerName(hook)), body, {
      ca: hooks.ca.certPem,
      timeout: '10s',
    })
  ).body;

const noUpgrader = `not in place (rolled out instead): no node upgrader for ${KIND} (no fresh Lease ${NS}/${LEASE})`;

describe('CanUpdate* under the management executor', () => {
  it('claims nothing in place without a fresh upgrader Lease for the infrastructure kind, and names the Lease', async () => {
    expect(await call('CanUpdateMachine', canUpdateMachine())).toEqual({
      apiVersion: HOOKS_API_VERSION,
      kind: 'CanUpdateMachineResponse',
      status: 'Success',
      message: noUpgrader,
    });
    // CanUpdateMachineSet names the template kind: the upgrader serves the machines (`Template` cut).
    expect(await call('CanUpdateMachineSet', canUpdateMachineSet())).toEqual({
      apiVersion: HOOKS_API_VERSION,
      kind: 'CanUpdateMachineSetResponse',
      status: 'Success',
      message: noUpgrader,
    });
    // Renewed 5 minutes ago with a 40 s duration: the upgrader is gone.
    await writeLease(300);
    expect(await call('CanUpdateMachine', canUpdateMachine())).toEqual(
      expect.objectContaining({ message: noUpgrader }),
    );
    expect(await call('CanUpdateMachine', canUpdateMachine())).not.toHaveProperty('machinePatch');
  });

  it('claims the allow-list in place while the Lease is fresh (no annotation = defaults)', async () => {
    await writeLease(1);
    const answer = await call('CanUpdateMachine', canUpdateMachine(true));
    expect(answer.message).toBeUndefined();
    expect(decodeJsonPatch(answer.machinePatch!)).toEqual([{ op: 'replace', path: '/spec/version', value: 'v1.33.1' }]);
    expect(answer).toHaveProperty('bootstrapConfigPatch');
    expect(await call('CanUpdateMachineSet', canUpdateMachineSet())).toHaveProperty('machineSetPatch');
  });

  it('claims only what the upgrader declares, and says what it left out', async () => {
    await writeLease(1, 'KubeadmConfig:/spec/files');
    const answer = await call('CanUpdateMachine', canUpdateMachine(true));
    expect(answer).toHaveProperty('bootstrapConfigPatch');
    expect(answer).not.toHaveProperty('machinePatch');
    expect(answer.message).toBe(
      `not in place (rolled out instead): machine /spec/version: not among the paths the node upgrader for ${KIND} applies (Lease ${NS}/${LEASE})`,
    );
    expect(await call('CanUpdateMachineSet', canUpdateMachineSet())).toEqual({
      apiVersion: HOOKS_API_VERSION,
      kind: 'CanUpdateMachineSetResponse',
      status: 'Success',
      message: `not in place (rolled out instead): machineSet /spec/template/spec/version: not among the paths the node upgrader for ${KIND} applies (Lease ${NS}/${LEASE})`,
    });
  });

  it('claims nothing when the declared paths do not parse, and names the annotation', async () => {
    await writeLease(1, 'Machine:spec/version');
    expect(await call('CanUpdateMachine', canUpdateMachine())).toEqual({
      apiVersion: HOOKS_API_VERSION,
      kind: 'CanUpdateMachineResponse',
      status: 'Success',
      message:
        `not in place (rolled out instead): the node upgrader for ${KIND} declares no valid paths (invalid setting ` +
        `${IN_PLACE_PATHS_ANNOTATION} of Lease ${NS}/${LEASE} "Machine:spec/version": entry "Machine:spec/version": invalid JSON pointer "spec/version")`,
    });
  });
});
