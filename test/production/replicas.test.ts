// Production-shaped: the Temporal server's services on PostgreSQL, two api and
// two worker processes as the image runs them (`node src/main.ts`, ROLE=api /
// ROLE=worker), HTTPS hook calls shaped like CAPI's spread over both apis as a
// Service would spread them, and the real activities against the tier's own
// test bed. One api and one worker are SIGKILLed mid-upgrade; the upgrade
// still completes, each step once.
import './../support/production-temporal.ts';
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Client } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { defaultHandlerName, HOOKS_API_VERSION, type HookName } from '../../src/api/hooks/contract.ts';
import { hookPath } from '../../src/api/hooks/hook-route.ts';
import { clusterUpgradeWorkflowId } from '../../src/model/cluster-upgrade.ts';
import { callHook } from '../../support/capi-client.ts';
import { Watch } from '@kubernetes/client-node';
import { machineUpdateWorkflowId } from '../../src/model/machine-update.ts';
import { specHash } from '../../src/domain/in-place.ts';
import {
  cluster as clusterRequest,
  infrastructureMachine,
  machine as machineObject,
} from '../../support/capi-fixtures.ts';
import { startStandInAgent } from '../../support/machine-update-rig.ts';
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
  GROUP_LABEL,
  testbed,
  testGroup,
  workloadApi,
} from '../../support/testbed-fixtures.ts';
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
/** The workers' Worker Deployment build (a replacement runs the same image, so the same build). */
const BUILD_ID = 'production-tier-a';
const execFileAsync = promisify(execFile);
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
  /** Every process started, killed or not: afterAll stops them even after a failed start. */
  const all: ExtensionProcess[] = [];
  let client: Client;
  let closeClient: () => Promise<void>;
  let turn = 0;
  let env: Record<string, string>;

  const start = async (role: 'api' | 'worker'): Promise<ExtensionProcess> => {
    const proc = await startExtensionProcess({
      ...env,
      ROLE: role,
      ...(role === 'worker'
        ? { MANAGEMENT_KUBECONFIG: testbed().workerKubeconfig, TEMPORAL_WORKER_BUILD_ID: BUILD_ID }
        : {}),
    });
    all.push(proc);
    // Generous: four processes start at once, on a machine the other tiers keep busy.
    await proc.ready(150_000);
    return proc;
  };
  /** SIGKILL, then a new process in its place, as a Deployment's controller would start one. */
  const replace = async (victim: ExtensionProcess): Promise<void> => {
    const list = apis.includes(victim) ? apis : workers;
    victim.child.kill('SIGKILL');
    await victim.exited();
    list.splice(list.indexOf(victim), 1);
    list.push(await start(list === apis ? 'api' : 'worker'));
  };
  /** The worker whose pid ran the last attempt of one of the run's pending activities. */
  const workerRunning = async (workflowId: string): Promise<ExtensionProcess> => {
    const pending = await waitFor(
      async () => (await client.workflow.getHandle(workflowId).describe()).raw.pendingActivities ?? [],
      (p) => p.some((a) => workers.some((w) => w.child.pid === pidOf(a.lastWorkerIdentity))),
      60_000,
    );
    const pids = pending.map((a) => pidOf(a.lastWorkerIdentity));
    return workers.find((w) => pids.includes(w.child.pid))!;
  };

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
    env = {
      TEMPORAL_ADDRESS: requireEnv('PRODUCTION_TEMPORAL_ADDRESS'),
      TEMPORAL_NAMESPACE: requireEnv('PRODUCTION_TEMPORAL_NAMESPACE'),
      TEMPORAL_TASK_QUEUE: taskQueue,
      WORKFLOW_BUNDLE_PATH: requireEnv('TEST_WORKFLOW_BUNDLE'),
    };
    const started = await Promise.all([start('api'), start('api'), start('worker'), start('worker')]);
    apis.push(started[0], started[1]);
    workers.push(started[2], started[3]);
    // The workers are versioned as in production: the rollout Job's own program makes their build current.
    const promoted = await execFileAsync(
      process.execPath,
      ['--disable-warning=ExperimentalWarning', 'src/ops/promote-worker-version.ts', '2m'],
      { env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env, TEMPORAL_WORKER_BUILD_ID: BUILD_ID } },
    );
    expect(`${promoted.stdout}${promoted.stderr}`).toContain(BUILD_ID);
  }, 320_000);

  afterAll(async () => {
    for (const p of all) p.kill();
    await Promise.all(all.map((p) => p.exited()));
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
  }, 300_000);

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
        // Mid-upgrade: the worker running the health check, and one api; both replaced.
        const victim = await workerRunning(workflowId);
        killed = { api: apis[0]!.child.pid!, worker: victim.child.pid! };
        await Promise.all([replace(victim), replace(apis[0]!)]);
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

    // The run ends once its Events are recorded: one recorded by the killed worker holds the
    // chain of later ones until its attempt times out (Events are best effort, in order).
    await waitFor(
      async () => (await client.workflow.getHandle(workflowId).describe()).status.name,
      (status) => status !== 'RUNNING',
      120_000,
    );
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
      `AfterClusterUpgrade ${TARGET}: done`,
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
    // It ran on the versioned build, auto-upgrade (a long cluster upgrade follows the current build).
    const versioning = described.raw.workflowExecutionInfo?.versioningInfo;
    expect(JSON.stringify(versioning)).toContain(BUILD_ID);
    expect(versioning?.behavior).toBe(temporal.api.enums.v1.VersioningBehavior.VERSIONING_BEHAVIOR_AUTO_UPGRADE);
  }, 300_000);

  it('updates machines in place through both apis with a worker SIGKILLed mid-update: no node cordoned or upgraded twice', async () => {
    const name = 'inplace';
    const from = 'v1.33.0';
    const to = 'v1.33.1';
    const nodes = [0, 1, 2, 3].map((i) => `${ns}-${name}-n${i}`);
    const machines = nodes.map((_, i) => `${name}-m${i}`);
    await createNodes(
      wl.core,
      nodes.map((n) => kwokNode(group, n, { kubeletVersion: from })),
    );
    await createCapiObject(mg.custom, capiCluster(name, ns, { version: from }));
    await createKubeconfigSecret(mg.core, ns, name);
    for (const [i, node] of nodes.entries())
      await createCapiObject(
        mg.custom,
        capiMachine(machines[i]!, ns, { cluster: name, nodeName: node, version: from }),
      );

    // Every time a node goes from schedulable to cordoned.
    const cordoned = new Map<string, number>();
    const last = new Map<string, boolean>();
    const nodeWatch = await new Watch(wl.kc).watch(
      '/api/v1/nodes',
      { labelSelector: `${GROUP_LABEL}=${group.name}` },
      (_type: string, node: { metadata: { name: string }; spec?: { unschedulable?: boolean } }) => {
        const now = node.spec?.unschedulable === true;
        if (now && last.get(node.metadata.name) !== true)
          cordoned.set(node.metadata.name, (cordoned.get(node.metadata.name) ?? 0) + 1);
        last.set(node.metadata.name, now);
      },
      () => undefined,
    );
    // The node agent answers each request 5 s after it first sees it: long enough to kill mid-update.
    const agent = startStandInAgent('kube-system', (firstSeen) => Date.now() - firstSeen > 5_000);
    const settings = { nodeUpgradeExecutor: 'delegate', maxConcurrentMachineUpdates: '2' };
    const request = (i: number) => {
      const m = machineObject(machines[i]!, ns, to);
      m.metadata.labels['cluster.x-k8s.io/cluster-name'] = name;
      m.spec.clusterName = name;
      const { bootstrap: _bootstrap, ...spec } = m.spec;
      const desired = { machine: { ...m, spec }, infrastructureMachine: infrastructureMachine(machines[i]!, ns) };
      return { apiVersion: HOOKS_API_VERSION, kind: 'UpdateMachineRequest', settings, desired };
    };
    const update = async (i: number): Promise<Answer> => {
      const live = apis.filter((a) => a.child.exitCode === null && a.child.signalCode === null);
      const res = await callHook<Answer>(
        live[turn++ % live.length]!.hookUrl,
        hookPath('UpdateMachine', defaultHandlerName('UpdateMachine')),
        request(i),
        { ca: testPki().ca.certPem, timeout: '10s' },
      );
      expect(res.statusCode).toBe(200);
      return res.body;
    };
    try {
      for (const i of machines.keys()) expect(await update(i)).toMatchObject({ status: 'Success' });
      // Mid-update: a request is out and waiting for the agent; kill the worker on that run.
      await waitFor(
        async () => agent.seen.size,
        (n) => n > 0,
        60_000,
      );
      const first = [...agent.byNode.keys()][0]!;
      const running = machineUpdateWorkflowId(
        { namespace: ns, name: machines[nodes.indexOf(first)]! },
        specHash(request(nodes.indexOf(first)).desired),
      );
      await replace(await workerRunning(running));
      const answers = await Promise.all(
        machines.map((_, i) =>
          waitFor(
            () => update(i),
            (a) => a.status === 'Failure' || a.retryAfterSeconds === 0,
            180_000,
          ),
        ),
      );
      for (const a of answers) expect(a).toMatchObject({ status: 'Success', retryAfterSeconds: 0 });
    } finally {
      await agent.stop();
      nodeWatch.abort();
    }
    for (const node of nodes) {
      expect({ node, requests: agent.byNode.get(node)?.size }).toEqual({ node, requests: 1 });
      expect({ node, cordoned: cordoned.get(node) }).toEqual({ node, cordoned: 1 });
      const n = await wl.core.readNode({ name: node });
      expect({
        node,
        kubelet: n.status?.nodeInfo?.kubeletVersion,
        unschedulable: n.spec?.unschedulable ?? false,
      }).toEqual({
        node,
        kubelet: to,
        unschedulable: false,
      });
    }
  }, 300_000);
});
