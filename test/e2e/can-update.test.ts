// CanUpdateMachine / CanUpdateMachineSet over HTTPS with CAPI-shaped requests.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { defaultHandlerName, HOOKS_API_VERSION } from '../../src/api/hooks/contract.ts';
import { hookPath } from '../../src/api/hooks/hook-route.ts';
import { callHook } from '../../support/capi-client.ts';
import { infrastructureMachine, kubeadmConfig, machine, machineSet, template } from '../../support/capi-fixtures.ts';
import { startTestHookServer, type TestHookServer } from '../support/hook-server.ts';

interface Patch {
  patchType: string;
  patch: string;
}
type Answer = Record<string, Patch | string | undefined> & { status: string; message?: string };

const decode = (p: Patch | string | undefined) =>
  JSON.parse(Buffer.from((p as Patch).patch, 'base64').toString('utf8')) as unknown;

function canUpdateMachine(
  opts: {
    to?: string;
    files?: { path: string; content: string }[];
    image?: string;
    settings?: Record<string, string>;
  } = {},
) {
  const desiredInfra = infrastructureMachine();
  if (opts.image) desiredInfra.spec.customImage = opts.image;
  return {
    apiVersion: HOOKS_API_VERSION,
    kind: 'CanUpdateMachineRequest',
    ...(opts.settings ? { settings: opts.settings } : {}),
    current: { machine: machine(), infrastructureMachine: infrastructureMachine(), bootstrapConfig: kubeadmConfig() },
    desired: {
      machine: machine(undefined, undefined, opts.to ?? 'v1.33.0'),
      infrastructureMachine: desiredInfra,
      bootstrapConfig: kubeadmConfig(undefined, undefined, opts.files ?? []),
    },
  };
}

describe('CanUpdateMachine / CanUpdateMachineSet over HTTPS', () => {
  let t: TestHookServer;
  beforeAll(async () => (t = await startTestHookServer()));
  afterAll(async () => t.close());
  const call = async (hook: 'CanUpdateMachine' | 'CanUpdateMachineSet', body: unknown) =>
    await callHook<Answer>(t.url, hookPath(hook, defaultHandlerName(hook)), body, { ca: t.ca.certPem, timeout: '10s' });

  it('declares a patch-level Kubernetes upgrade in place as a base64 JSON patch on the Machine', async () => {
    const res = await call('CanUpdateMachine', canUpdateMachine({ to: 'v1.33.1' }));
    expect(res.statusCode).toBe(200);
    expect(res.body.status).toBe('Success');
    expect((res.body.machinePatch as Patch).patchType).toBe('JSONPatch');
    expect(decode(res.body.machinePatch)).toEqual([{ op: 'replace', path: '/spec/version', value: 'v1.33.1' }]);
    expect(res.body).not.toHaveProperty('infrastructureMachinePatch');
    expect(res.body).not.toHaveProperty('bootstrapConfigPatch');
  });

  it('declares bootstrap file changes in place on the KubeadmConfig', async () => {
    const files = [{ path: '/etc/kubernetes/audit.yaml', content: 'rules: []' }];
    const res = await call('CanUpdateMachine', canUpdateMachine({ files }));
    expect(decode(res.body.bootstrapConfigPatch)).toEqual([{ op: 'replace', path: '/spec/files', value: files }]);
    expect(res.body).not.toHaveProperty('machinePatch');
  });

  it('leaves out what it cannot do in place (an infrastructure change, a two-minor jump)', async () => {
    const res = await call('CanUpdateMachine', canUpdateMachine({ to: 'v1.35.0', image: 'kindest/node:v1.35.0' }));
    expect(res.body.status).toBe('Success');
    expect(res.body).not.toHaveProperty('machinePatch');
    expect(res.body).not.toHaveProperty('infrastructureMachinePatch');
    expect(res.body.message).toContain('/spec/version');
  });

  it('never declares in place what the configured executor cannot apply on the node', async () => {
    // An infrastructure field added to the allow-list: a delegate agent may apply it, the job executor cannot.
    const settings = { inPlaceAllowedPaths: 'defaults,DockerMachine:/spec/customImage' };
    const request = (executor: string) =>
      canUpdateMachine({
        to: 'v1.33.1',
        image: 'kindest/node:v1.33.1',
        settings: { ...settings, nodeUpgradeExecutor: executor },
      });
    const job = await call('CanUpdateMachine', request('job'));
    expect(job.body).toHaveProperty('machinePatch');
    expect(job.body).not.toHaveProperty('infrastructureMachinePatch');
    const delegate = await call('CanUpdateMachine', request('delegate'));
    expect(decode(delegate.body.infrastructureMachinePatch)).toEqual([
      { op: 'replace', path: '/spec/customImage', value: 'kindest/node:v1.33.1' },
    ]);
  });

  it('declares nothing when in-place updates are switched off', async () => {
    const res = await call(
      'CanUpdateMachine',
      canUpdateMachine({ to: 'v1.33.1', settings: { inPlaceUpdates: 'false' } }),
    );
    expect(res.body).toEqual({ apiVersion: HOOKS_API_VERSION, kind: 'CanUpdateMachineResponse', status: 'Success' });
  });

  it('answers byte-identically for the same request', async () => {
    const body = canUpdateMachine({ to: 'v1.33.1', files: [{ path: '/a', content: 'b' }] });
    const [a, b] = [await call('CanUpdateMachine', body), await call('CanUpdateMachine', body)];
    expect(b.text).toBe(a.text);
  });

  it('patches a MachineSet template version under spec.template.spec', async () => {
    const body = {
      apiVersion: HOOKS_API_VERSION,
      kind: 'CanUpdateMachineSetRequest',
      current: {
        machineSet: machineSet('v1.33.0'),
        infrastructureMachineTemplate: template('DockerMachineTemplate', 'infrastructure.cluster.x-k8s.io'),
        bootstrapConfigTemplate: template('KubeadmConfigTemplate', 'bootstrap.cluster.x-k8s.io'),
      },
      desired: {
        machineSet: machineSet('v1.33.2'),
        infrastructureMachineTemplate: template('DockerMachineTemplate', 'infrastructure.cluster.x-k8s.io'),
        bootstrapConfigTemplate: template('KubeadmConfigTemplate', 'bootstrap.cluster.x-k8s.io'),
      },
    };
    const res = await call('CanUpdateMachineSet', body);
    expect(decode(res.body.machineSetPatch)).toEqual([
      { op: 'replace', path: '/spec/template/spec/version', value: 'v1.33.2' },
    ]);
  });

  it('answers a bad allow-list setting with a Failure naming it', async () => {
    const res = await call(
      'CanUpdateMachine',
      canUpdateMachine({ to: 'v1.33.1', settings: { inPlaceAllowedPaths: 'Machine:spec/version' } }),
    );
    expect(res.body.status).toBe('Failure');
    expect(res.body.message).toContain('inPlaceAllowedPaths');
  });

  it('answers a bad drainSkipPodSelector setting with a Failure naming it, the same every time', async () => {
    const body = canUpdateMachine({ to: 'v1.33.1', settings: { drainSkipPodSelector: 'tier in (control-plane' } });
    const [a, b] = [await call('CanUpdateMachine', body), await call('CanUpdateMachine', body)];
    expect(a.statusCode).toBe(200);
    expect(a.body).toEqual({
      apiVersion: HOOKS_API_VERSION,
      kind: 'CanUpdateMachineResponse',
      status: 'Failure',
      message:
        'setting drainSkipPodSelector="tier in (control-plane": not a usable label selector: ' +
        'expected a value, "," or ")" in the values of tier, found the end',
    });
    expect(b.text).toBe(a.text);
    const ok = await call(
      'CanUpdateMachine',
      canUpdateMachine({ to: 'v1.33.1', settings: { drainSkipPodSelector: 'tier=control-plane' } }),
    );
    expect(ok.body.status).toBe('Success');
  });
});
