// skip-remediation on the Machine while its node updates in place (so that a
// MachineHealthCheck does not replace a Machine for the update's downtime),
// against the test bed's real API server, as the worker's identity:
// set with our marker, idempotent, removed only when the marker says we set it
// (a person's skip-remediation stays), safe against concurrent writers, and
// nothing for a Machine that is gone.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { managementKubeConfig } from '../../src/platform/kube/clients.ts';
import {
  createMachineUpdateActivities,
  SKIP_REMEDIATION_ANNOTATION,
  SKIP_REMEDIATION_SET_BY_ANNOTATION,
} from '../../src/activities/machine-update.ts';
import {
  capiMachine,
  createCapiObject,
  createNamespace,
  managementApi,
  mergePatch,
  testbed,
  testGroup,
} from '../../support/testbed-fixtures.ts';

const group = testGroup('skiprem');
const g = group.name;
const mg = managementApi();
const activities = createMachineUpdateActivities({ management: managementKubeConfig(testbed().workerKubeconfig) });
const ref = { group: 'cluster.x-k8s.io', version: 'v1beta2', plural: 'machines', namespace: g };
const machine = (name: string) => ({ namespace: g, name });

async function meta(name: string): Promise<{ annotations: Record<string, string>; resourceVersion?: string }> {
  const m = (await mg.custom.getNamespacedCustomObject({ ...ref, name })) as {
    metadata: { annotations?: Record<string, string>; resourceVersion?: string };
  };
  return { annotations: m.metadata.annotations ?? {}, resourceVersion: m.metadata.resourceVersion };
}

const annotate = (name: string, annotations: Record<string, string | null>) =>
  mg.custom.patchNamespacedCustomObject({ ...ref, name, body: { metadata: { annotations } } }, mergePatch);

beforeAll(async () => {
  await createNamespace(mg.core, g);
  await Promise.all(
    ['m-ours', 'm-theirs', 'm-busy'].map((name) =>
      createCapiObject(mg.custom, capiMachine(name, g, { cluster: 'wl' })),
    ),
  );
});

afterAll(async () => {
  await mg.core.deleteNamespace({ name: g }).catch(() => undefined);
});

describe('holdRemediation / releaseRemediation', () => {
  it('sets skip-remediation with our marker once, and removes both', async () => {
    await annotate('m-ours', { 'example.com/keep': 'yes' });
    expect(await activities.holdRemediation({ machine: machine('m-ours') })).toEqual({
      message: `Machine ${g}/m-ours: ${SKIP_REMEDIATION_ANNOTATION} set while the node updates`,
    });
    const held = await meta('m-ours');
    expect(held.annotations).toEqual({
      'example.com/keep': 'yes',
      [SKIP_REMEDIATION_ANNOTATION]: '',
      [SKIP_REMEDIATION_SET_BY_ANNOTATION]: 'machine-update',
    });
    // A retried hold writes nothing.
    expect(await activities.holdRemediation({ machine: machine('m-ours') })).toEqual({
      message: `Machine ${g}/m-ours already carries ${SKIP_REMEDIATION_ANNOTATION}, set by this update`,
    });
    expect((await meta('m-ours')).resourceVersion).toBe(held.resourceVersion);

    await activities.releaseRemediation({ machine: machine('m-ours') });
    const released = await meta('m-ours');
    expect(released.annotations).toEqual({ 'example.com/keep': 'yes' });
    // A retried release writes nothing.
    await activities.releaseRemediation({ machine: machine('m-ours') });
    expect((await meta('m-ours')).resourceVersion).toBe(released.resourceVersion);
  });

  it('never claims or removes a skip-remediation someone else set', async () => {
    await annotate('m-theirs', { [SKIP_REMEDIATION_ANNOTATION]: 'investigating disk' });
    expect(await activities.holdRemediation({ machine: machine('m-theirs') })).toEqual({
      message: `Machine ${g}/m-theirs already carries ${SKIP_REMEDIATION_ANNOTATION}, not set by us: left alone`,
    });
    await activities.releaseRemediation({ machine: machine('m-theirs') });
    expect((await meta('m-theirs')).annotations).toEqual({ [SKIP_REMEDIATION_ANNOTATION]: 'investigating disk' });
  });

  it('keeps what concurrent writers add to the Machine (conflicts are retried, never overwritten)', async () => {
    // Four writers: at most four conflicts, within the five tries a patch gets.
    const writers = Array.from({ length: 4 }, (_, i) => annotate('m-busy', { [`example.com/w${i}`]: 'x' }));
    await Promise.all([activities.holdRemediation({ machine: machine('m-busy') }), ...writers]);
    const held = (await meta('m-busy')).annotations;
    expect(held[SKIP_REMEDIATION_SET_BY_ANNOTATION]).toBe('machine-update');
    expect(Object.keys(held).filter((k) => k.startsWith('example.com/'))).toHaveLength(4);
    const more = Array.from({ length: 4 }, (_, i) => annotate('m-busy', { [`example.com/v${i}`]: 'y' }));
    await Promise.all([activities.releaseRemediation({ machine: machine('m-busy') }), ...more]);
    const released = (await meta('m-busy')).annotations;
    expect(released[SKIP_REMEDIATION_ANNOTATION]).toBeUndefined();
    expect(released[SKIP_REMEDIATION_SET_BY_ANNOTATION]).toBeUndefined();
    expect(Object.keys(released).filter((k) => k.startsWith('example.com/'))).toHaveLength(8);
  });

  it('does nothing for a Machine that is gone', async () => {
    expect(await activities.holdRemediation({ machine: machine('m-absent') })).toEqual({
      message: `Machine ${g}/m-absent not found: nothing to hold`,
    });
    await expect(activities.releaseRemediation({ machine: machine('m-absent') })).resolves.toBeUndefined();
  });
});
