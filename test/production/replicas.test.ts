// Production-shaped: the Temporal server's services on PostgreSQL, two api and
// two worker processes as the image runs them (`node src/main.ts`, ROLE=api /
// ROLE=worker), HTTPS hook calls shaped like CAPI's spread over both apis as a
// Service would spread them, and the real activities against the tier's own
// test bed. One api and one worker are SIGKILLed mid-upgrade; the upgrade
// still completes, each step once.
import './../support/production-temporal.ts';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Client } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { defaultHandlerName, HOOKS_API_VERSION, type HookName } from '../../src/api/contract.ts';
import { hookPath } from '../../src/api/hook-route.ts';
import { clusterUpgradeWorkflowId } from '../../src/model/cluster-upgrade.ts';
import { callHook } from '../support/capi-client.ts';
import { cluster as clusterRequest } from '../support/capi-fixtures.ts';
import { startExtensionProcess, type ExtensionProcess } from '../support/extension-process.ts';
import {
  capiCluster,
  capiMachine,
  type CapiObject,
  createCapiObject,
  createKubeconfigSecret,
  createNamespace,
  createNodes,
  kwokNode,
  managementApi,
  setKubeletVersion,
  testbed,
  testGroup,
  workloadApi,
} from '../support/fixtures.ts';
import { testPki } from '../support/pki.ts';
import { requireEnv } from '../support/services.ts';
import { temporalCli, temporalSignal } from '../support/temporal-cli.ts';
import { testClient } from '../support/temporal.ts';
import { waitFor } from '../support/wait.ts';

const group = testGroup('prod');
const ns = group.name;
const mg = managementApi();
const wl = workloadApi();
const FROM = 'v1.30.5';
const STEPS = ['v1.31.14', 'v1.32.13', 'v1.33.0'];
const TARGET = STEPS[STEPS.length - 1]!;
const EventType = temporal.api.enums.v1.EventType;
/** BeforeClusterUpgrade's fields for the chained upgrade FROM → TARGET. */
const bcu = {
  fromKubernetesVersion: FROM,
  toKubernetesVersion: TARGET,
  controlPlaneUpgrades: STEPS.map((version) => ({ version })),
  workersUpgrades: [{ version: TARGET }],
};

interface Answer {
  status: string;
  message?: string;
  retryAfterSeconds?: number;
}

/** A workload cluster of one control-plane and two worker nodes, with Machines naming them. */
async function createCluster(name: string): Promise<{ uid: string; cp: string[]; workers: string[] }> {
  const cp = [`${ns}-${name}-cp0`];
  const workers = [`${ns}-${name}-w0`, `${ns}-${name}-w1`];
  await createNodes(wl.core, [
    ...cp.map((n) => kwokNode(group, n, { kubeletVersion: FROM, role: 'control-plane' })),
    ...workers.map((n) => kwokNode(group, n, { kubeletVersion: FROM })),
  ]);
  const created = (await createCapiObject(mg.custom, capiCluster(name, ns, { version: FROM }))) as CapiObject & {
    metadata: { uid: string };
  };
  await createKubeconfigSecret(mg.core, ns, name);
  for (const [i, node] of cp.entries())
    await createCapiObject(
      mg.custom,
      capiMachine(`${name}-cp${i}`, ns, { cluster: name, controlPlane: true, nodeName: node }),
    );
  for (const [i, node] of workers.entries())
    await createCapiObject(mg.custom, capiMachine(`${name}-w${i}`, ns, { cluster: name, nodeName: node }));
  return { uid: created.metadata.uid, cp, workers };
}

/** The process that ran the last attempt of a pending activity: its identity is `<pid>@<host>`. */
function pidOf(identity: string | null | undefined): number | undefined {
  const pid = Number(/^(\d+)@/.exec(identity ?? '')?.[1]);
  return Number.isFinite(pid) ? pid : undefined;
}

describe('two apis and two workers on the production-shaped Temporal', () => {
  const taskQueue = `production-${randomUUID()}`;
  const apis: ExtensionProcess[] = [];
  const workers: ExtensionProcess[] = [];
  let client: Client;
  let closeClient: () => Promise<void>;
  let turn = 0;

  /** One hook call, to the next live api in turn (a Service spreads CAPI's calls). */
  const call = async (name: string, uid: string, hook: HookName, fields: Record<string, unknown>) => {
    const live = apis.filter((a) => a.child.exitCode === null && a.child.signalCode === null);
    const api = live[turn++ % live.length]!;
    const c = clusterRequest(name, ns, TARGET);
    c.metadata.uid = uid;
    const res = await callHook<Answer>(
      api.hookUrl,
      hookPath(hook, defaultHandlerName(hook)),
      { apiVersion: HOOKS_API_VERSION, kind: `${hook}Request`, cluster: c, ...fields },
      { ca: testPki().ca.certPem, timeout: '10s' },
    );
    expect(res.statusCode).toBe(200);
    return res.body;
  };
  /** CAPI's loop: call until the hook stops asking to be called again; a Failure ends it. */
  const until = async (name: string, uid: string, hook: HookName, fields: Record<string, unknown>) =>
    await waitFor(
      () => call(name, uid, hook, fields),
      (a) => a.status === 'Failure' || a.retryAfterSeconds === 0,
      120_000,
    );

  beforeAll(async () => {
    await createNamespace(mg.core, ns);
    ({ client, close: closeClient } = await testClient());
    const common = {
      TEMPORAL_ADDRESS: requireEnv('PRODUCTION_TEMPORAL_ADDRESS'),
      TEMPORAL_NAMESPACE: requireEnv('PRODUCTION_TEMPORAL_NAMESPACE'),
      TEMPORAL_TASK_QUEUE: taskQueue,
      WORKFLOW_BUNDLE_PATH: requireEnv('TEST_WORKFLOW_BUNDLE'),
    };
    const started = await Promise.all([
      startExtensionProcess({ ...common, ROLE: 'api' }),
      startExtensionProcess({ ...common, ROLE: 'api' }),
      startExtensionProcess({ ...common, ROLE: 'worker', MANAGEMENT_KUBECONFIG: testbed().workerKubeconfig }),
      startExtensionProcess({ ...common, ROLE: 'worker', MANAGEMENT_KUBECONFIG: testbed().workerKubeconfig }),
    ]);
    apis.push(started[0], started[1]);
    workers.push(started[2], started[3]);
    await Promise.all(started.map((p) => p.ready(60_000)));
  });

  afterAll(async () => {
    for (const p of [...apis, ...workers]) p.kill();
    await Promise.all([...apis, ...workers].map((p) => p.exited()));
    await closeClient?.();
    await mg.core.deleteNamespace({ name: ns }).catch(() => undefined);
  });

  it('is found by its search attributes, aborted and resumed with the temporal CLI, whichever api answers', async () => {
    const name = 'abort';
    const { uid } = await createCluster(name);
    const workflowId = clusterUpgradeWorkflowId({ namespace: ns, name, uid });
    expect(await until(name, uid, 'BeforeClusterUpgrade', bcu)).toMatchObject({
      status: 'Success',
      retryAfterSeconds: 0,
    });
    const found = await waitFor(
      () =>
        temporalCli(['workflow', 'list', '--query', `CapiClusterName = '${name}' AND CapiClusterNamespace = '${ns}'`]),
      (out) => out.includes(workflowId),
      30_000,
    );
    expect(found).toContain(workflowId);

    await temporalSignal(workflowId, 'abort', '{"reason":"change freeze"}');
    const message = `upgrade to ${TARGET} aborted: change freeze; signal "resume" to continue`;
    const gate = {
      fromKubernetesVersion: FROM,
      toKubernetesVersion: STEPS[0],
      controlPlaneUpgrades: bcu.controlPlaneUpgrades,
    };
    // Both apis answer the abort (each reads the run, neither keeps an older answer).
    for (let i = 0; i < 2; i++)
      expect(
        await waitFor(
          () => call(name, uid, 'BeforeControlPlaneUpgrade', gate),
          (a) => a.status === 'Failure',
          20_000,
        ),
      ).toMatchObject({ status: 'Failure', message });
    await temporalSignal(workflowId, 'resume');
    // An api may answer from its view for up to its staleness bound after a signal it did not send.
    expect(
      await waitFor(
        () => call(name, uid, 'BeforeControlPlaneUpgrade', gate),
        (a) => a.status === 'Success' && a.retryAfterSeconds === 0,
        30_000,
      ),
    ).toMatchObject({ status: 'Success', retryAfterSeconds: 0 });
  });

  it('completes a chained upgrade driven through both apis although one api and one worker are SIGKILLed mid-upgrade, each step once', async () => {
    const name = 'chained';
    const { uid, cp, workers: workerNodes } = await createCluster(name);
    const workflowId = clusterUpgradeWorkflowId({ namespace: ns, name, uid });
    expect(await until(name, uid, 'BeforeClusterUpgrade', bcu)).toMatchObject({ status: 'Success' });

    let from = FROM;
    let killed: { api: number; worker: number } | undefined;
    for (const [i, version] of STEPS.entries()) {
      const remaining = STEPS.slice(i + 1).map((v) => ({ version: v }));
      const gate = await until(name, uid, 'BeforeControlPlaneUpgrade', {
        fromKubernetesVersion: from,
        toKubernetesVersion: version,
        controlPlaneUpgrades: STEPS.slice(i).map((v) => ({ version: v })),
        workersUpgrades: [{ version: TARGET }],
      });
      expect(gate).toMatchObject({ status: 'Success', retryAfterSeconds: 0 });
      // CAPI calls AfterControlPlaneUpgrade once the control plane runs `version`; here the
      // call comes first, so the post-step health check is in flight, waiting for the kubelet.
      const after = {
        kubernetesVersion: version,
        controlPlaneUpgrades: remaining,
        workersUpgrades: [{ version: TARGET }],
      };
      expect(await call(name, uid, 'AfterControlPlaneUpgrade', after)).toMatchObject({ status: 'Success' });
      if (i === 1) {
        // Mid-upgrade: the worker running the health check, and one api.
        const pending = await waitFor(
          async () => (await client.workflow.getHandle(workflowId).describe()).raw.pendingActivities ?? [],
          (p) => p.some((a) => pidOf(a.lastWorkerIdentity) !== undefined),
          60_000,
        );
        const pid = pending.map((a) => pidOf(a.lastWorkerIdentity)).find((p) => p !== undefined)!;
        const victim = workers.find((w) => w.child.pid === pid);
        expect(victim).toBeDefined();
        victim!.child.kill('SIGKILL');
        apis[0]!.child.kill('SIGKILL');
        killed = { api: apis[0]!.child.pid!, worker: pid };
        await Promise.all([victim!.exited(), apis[0]!.exited()]);
      }
      for (const node of cp) await setKubeletVersion(wl.core, node, version);
      expect(await until(name, uid, 'AfterControlPlaneUpgrade', after)).toMatchObject({
        status: 'Success',
        retryAfterSeconds: 0,
      });
      from = version;
    }
    expect(killed).toBeDefined();

    expect(
      await until(name, uid, 'BeforeWorkersUpgrade', {
        fromKubernetesVersion: FROM,
        toKubernetesVersion: TARGET,
        workersUpgrades: [{ version: TARGET }],
      }),
    ).toMatchObject({ status: 'Success', retryAfterSeconds: 0 });
    for (const node of workerNodes) await setKubeletVersion(wl.core, node, TARGET);
    expect(await until(name, uid, 'AfterWorkersUpgrade', { kubernetesVersion: TARGET })).toMatchObject({
      status: 'Success',
      retryAfterSeconds: 0,
    });
    expect(await until(name, uid, 'AfterClusterUpgrade', { kubernetesVersion: TARGET })).toMatchObject({
      status: 'Success',
      retryAfterSeconds: 0,
    });

    // Each step once: one gate opened per step, in order, and no activity scheduled twice
    // for the same input (a retry after the kill is an attempt of the same activity).
    const history = await client.workflow.getHandle(workflowId).fetchHistory();
    const events = history.events ?? [];
    const scheduled = events
      .filter((e) => e.eventType === EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED)
      .map((e) => e.activityTaskScheduledEventAttributes!);
    const keys = scheduled.map(
      (a) => `${a.activityType?.name}:${Buffer.from(a.input?.payloads?.[0]?.data ?? new Uint8Array()).toString()}`,
    );
    console.log(`activities scheduled: ${keys.length}\n${keys.join('\n')}`);
    const opened = scheduled
      .filter((a) => a.activityType?.name === 'recordClusterEvent')
      .map(
        (a) => JSON.parse(Buffer.from(a.input!.payloads![0]!.data!).toString()) as { reason: string; message: string },
      )
      .filter((e) => e.reason === 'UpgradeStepOpened')
      .map((e) => e.message);
    expect(opened).toEqual([
      `BeforeClusterUpgrade ${TARGET}: done`,
      ...STEPS.flatMap((v) => [`BeforeControlPlaneUpgrade ${v}: done`, `AfterControlPlaneUpgrade ${v}: done`]),
      `BeforeWorkersUpgrade ${TARGET}: done`,
      `AfterWorkersUpgrade ${TARGET}: done`,
    ]);
    // Nothing but the (read-only) health check was scheduled twice with the same input.
    const writes = keys.filter((k) => !k.startsWith('checkClusterHealth:'));
    expect(new Set(writes).size).toBe(writes.length);
    const retried = events.filter(
      (e) =>
        e.eventType === EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED &&
        (e.activityTaskStartedEventAttributes?.attempt ?? 1) > 1,
    );
    console.log(`activity attempts after the first: ${retried.length}; killed ${JSON.stringify(killed)}`);
    const described = await client.workflow.getHandle(workflowId).describe();
    expect(described.status.name).toBe('COMPLETED');
  });
});
