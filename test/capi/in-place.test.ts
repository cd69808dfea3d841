// Real Cluster API updates Machines in place through the extension, end to end:
// the MachineDeployment controller calls CanUpdateMachineSet, KCP calls
// CanUpdateMachine, the Machine controller calls UpdateMachine until it answers
// done, and the extension's `management` executor writes a NodeUpgradeRequest per
// node into the management cluster. A stand-in upgrader plays CAPD's in-memory
// nodes (src/local/in-memory-node-upgrader.ts): it reports Running, flips the Node's
// Ready off for a few seconds (the kubelet restarting), sets its kubeletVersion and
// reports Succeeded, or fails on request. The drain skips CAPD's fake static pods
// (plain pods, no mirror annotation) by label (setting drainSkipPodSelector).
// Three clusters run concurrently: a file change then a chained upgrade on one,
// a failed worker remediated by a MachineHealthCheck on another, an aborted and
// resumed control-plane upgrade on the third.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { ClusterUpgradeStatus } from '../../src/model/cluster-upgrade.ts';
import { upgradeHooks } from '../../src/model/cluster-upgrade.ts';
import { clusterUpgradeStatusQuery } from '../../src/workflows/messages.ts';
import { CapiTierClient, eventually, type HookCallLog } from '../support/capi-cluster.ts';
import {
  createInPlaceCluster,
  generations,
  inPlaceNamespace,
  machineEvents,
  machines,
  machineUpdates,
  MINUTE,
  patchClass,
  seconds,
  UpdatingMessages,
  updateMachineVersion,
  waitRolledOut,
  type MachineView,
} from '../support/capi-in-place.ts';
import { StandInUpgrader } from '../../src/local/in-memory-node-upgrader.ts';
import { requireEnv } from '../support/services.ts';

const FROM = 'v1.33.0';
const TARGET = 'v1.35.0';
const INTERMEDIATE = /^v1\.34\.\d+$/;
const WORKERS_EVERY_MINOR = { 'upgrades.capi-orchestrator.io/workers-upgrade-strategy': 'every-minor' };
const NEXT = 'v1.34.0';
/**
 * The workers' MachineHealthCheck (ClusterClass healthCheck): a Node marked InPlaceUpdateFailed
 * by the extension is remediated after 20 s (time for the test to see CAPI show InPlaceUpdateFailed;
 * docs/machine-health-checks.md recommends 60 s or more); a Node NotReady for more than 2 s too, so a
 * kubelet restart during an update would be remediated unless the update holds
 * cluster.x-k8s.io/skip-remediation on its Machine meanwhile.
 */
const WORKER_HEALTH_CHECK = {
  checks: {
    unhealthyNodeConditions: [
      { type: 'InPlaceUpdateFailed', status: 'True', timeoutSeconds: 20 },
      { type: 'Ready', status: 'False', timeoutSeconds: 2 },
      { type: 'Ready', status: 'Unknown', timeoutSeconds: 2 },
    ],
  },
};
const SUCCEEDED_EVENTS = ['MachineUpdateStarted', 'NodeDrained', 'NodeUpgraded', 'MachineUpdateSucceeded'];

const capi = new CapiTierClient();
const upgrader = new StandInUpgrader({
  managementKubeconfig: capi.state.managementKubeconfig,
  namespace: requireEnv('CAPI_TIER_UPGRADER_NAMESPACE'),
  restartMs: 3_000,
});
beforeAll(async () => await upgrader.start());
afterAll(async () => {
  await upgrader.stop();
  await capi.close();
  // Every request the stand-in took was served without an API error.
  expect(upgrader.errors).toEqual([]);
}, MINUTE);

/** Switches the class to templates that differ only by a KubeadmConfig file. */
async function changeFiles(namespace: string, which: { controlPlane: boolean; workers: boolean }) {
  await patchClass(capi, namespace, [
    ...(which.workers
      ? [
          {
            op: 'replace',
            path: '/spec/workers/machineDeployments/0/bootstrap/templateRef/name',
            value: 'in-memory-default-worker-bootstraptemplate-in-place',
          },
        ]
      : []),
    ...(which.controlPlane
      ? [{ op: 'replace', path: '/spec/controlPlane/templateRef/name', value: 'in-memory-control-plane-in-place' }]
      : []),
  ]);
}

const uids = (ms: MachineView[]) => ms.map((m) => `${m.name}/${m.uid}`).sort();

/**
 * The order CAPI moved in: each lifecycle hook where it passed (Success, no retry), each
 * Machine's first UpdateMachine call for a version (by role), repeats in a row collapsed.
 * (KCP reports a version once the kubelets run it, so AfterControlPlaneUpgrade may be called
 * while the last Machine's update still finishes: first calls say when each update began.)
 */
function interleaved(calls: HookCallLog[], roles: Map<string, string>): string[] {
  const order: string[] = [];
  const begun = new Set<string>();
  for (const c of calls) {
    let step: string | undefined;
    if (upgradeHooks.includes(c.hook as (typeof upgradeHooks)[number])) {
      if (c.status === 'Success' && (c.retryAfterSeconds ?? 0) === 0) step = `${c.hook} ${c.version}`;
    } else if (c.hook === 'UpdateMachine') {
      const version = updateMachineVersion(c.message);
      const key = `${c.subject} ${version}`;
      if (!begun.has(key)) step = `UpdateMachine ${roles.get(c.subject.split('/')[1] ?? '')} ${version}`;
      begun.add(key);
    }
    if (step && order.at(-1) !== step) order.push(step);
  }
  return order;
}

/** Our records of a run of updates: every machine update Succeeded, with its Events. */
async function expectUpdatesSucceeded(namespace: string, names: string[], version: string) {
  const runs = (await machineUpdates(capi, namespace)).filter((r) => r.memo && version === versionOf(r.memo.message));
  for (const name of names) {
    const run = runs.find((r) => r.machine === name);
    expect({ name, status: run?.description.status.name, phase: run?.memo?.phase, step: run?.memo?.step }).toEqual({
      name,
      status: 'COMPLETED',
      phase: 'Succeeded',
      step: 'Done',
    });
  }
  const events = await machineEvents(capi, namespace);
  for (const name of names) expect(events.get(name)).toEqual(expect.arrayContaining(SUCCEEDED_EVENTS));
  // The stand-in restarted each kubelet and upgraded each node once for this version.
  for (const name of names) {
    expect(upgrader.records.filter((r) => r.machine === `${namespace}/${name}` && r.version === version)).toEqual([
      expect.objectContaining({ outcome: 'Succeeded', restartedAt: expect.any(Number) }),
    ]);
  }
}

function versionOf(message: string): string | undefined {
  return updateMachineVersion(message);
}

describe('real Cluster API updates Machines in place through a management-cluster upgrader', () => {
  it.concurrent(
    `a KubeadmConfig file change, then a chained upgrade ${FROM} → ${TARGET}, both entirely in place on 3 control-plane and 2 worker Machines`,
    async () => {
      const namespace = await inPlaceNamespace(capi, 'in-place');
      const before = await createInPlaceCluster(capi, {
        namespace,
        name: 'c5',
        version: FROM,
        controlPlaneReplicas: 3,
        workerReplicas: 2,
        annotations: WORKERS_EVERY_MINOR,
      });
      const roles = new Map(before.map((m) => [m.name, m.role]));

      // (a) Only files change: CAPI asks us, then updates every Machine in place.
      let started = Date.now();
      const watched = new UpdatingMessages(capi, namespace).start();
      let after = await generations(capi, namespace);
      await changeFiles(namespace, { controlPlane: true, workers: true });
      const filesDone = await waitRolledOut(
        capi,
        namespace,
        { version: FROM, controlPlane: 3, workers: 2, after },
        10 * MINUTE,
      );
      watched.stop();
      console.log(`[capi in-place] (a) file change on 3+2 Machines in place: ${seconds(started)} s`);

      expect(uids(filesDone.machines)).toEqual(uids(before));
      expect(capi.rejectedRequests()).toEqual([]);
      expect(capi.refusedByChecks()).toEqual([]);
      const calls = capi.hookCalls(namespace);
      expect(calls.filter((c) => c.hook.startsWith('CanUpdate')).map((c) => c.status)).not.toContain('Failure');
      expect(new Set(calls.filter((c) => c.hook.startsWith('CanUpdate')).map((c) => c.hook))).toEqual(
        new Set(['CanUpdateMachine', 'CanUpdateMachineSet']),
      );
      for (const m of before) {
        // What an operator saw while CAPI waited on us, and our last answer.
        expect(watched.of(m.name)).toContainEqual(
          expect.stringMatching(
            new RegExp(
              `^InPlaceUpdating: In-place update in progress: updating machine ${namespace}/${m.name} to ${FROM}: `,
            ),
          ),
        );
        const answers = calls.filter((c) => c.hook === 'UpdateMachine' && c.subject === `${namespace}/${m.name}`);
        expect(answers.at(-1)).toMatchObject({ status: 'Success', retryAfterSeconds: 0 });
      }
      await expectUpdatesSucceeded(
        namespace,
        before.map((m) => m.name),
        FROM,
      );

      // (b) A chained upgrade, with workers following the control plane minor by minor.
      started = Date.now();
      const mark = calls.length;
      after = await generations(capi, namespace);
      await capi.setVersion(namespace, 'c5', TARGET);
      const upgraded = await waitRolledOut(
        capi,
        namespace,
        { version: TARGET, controlPlane: 3, workers: 2, after },
        15 * MINUTE,
      );
      await eventually(
        'TopologyReconciled after AfterClusterUpgrade',
        () => capi.condition(namespace, 'c5', 'TopologyReconciled'),
        (c) => c?.status === 'True',
        3 * MINUTE,
      );
      console.log(`[capi in-place] (b) chained upgrade ${FROM} → ${TARGET} in place: ${seconds(started)} s`);

      expect(uids(upgraded.machines)).toEqual(uids(before));
      const upgradeCalls = capi.hookCalls(namespace).slice(mark);
      const sequence = interleaved(upgradeCalls, roles);
      const intermediate = sequence[1]?.split(' ')[1] ?? '';
      expect(intermediate).toMatch(INTERMEDIATE);
      expect(sequence).toEqual([
        `BeforeClusterUpgrade ${TARGET}`,
        `BeforeControlPlaneUpgrade ${intermediate}`,
        `UpdateMachine control-plane ${intermediate}`,
        `AfterControlPlaneUpgrade ${intermediate}`,
        `BeforeWorkersUpgrade ${intermediate}`,
        `UpdateMachine worker ${intermediate}`,
        `AfterWorkersUpgrade ${intermediate}`,
        `BeforeControlPlaneUpgrade ${TARGET}`,
        `UpdateMachine control-plane ${TARGET}`,
        `AfterControlPlaneUpgrade ${TARGET}`,
        `BeforeWorkersUpgrade ${TARGET}`,
        `UpdateMachine worker ${TARGET}`,
        `AfterWorkersUpgrade ${TARGET}`,
        `AfterClusterUpgrade ${TARGET}`,
      ]);
      for (const version of [intermediate, TARGET])
        await expectUpdatesSucceeded(
          namespace,
          before.map((m) => m.name),
          version,
        );
      const cluster = await capi.get('cluster', namespace, 'c5');
      const status: ClusterUpgradeStatus = await (
        await capi.temporal()
      ).workflow
        .getHandle(`cluster-upgrade/${namespace}/c5/${cluster!.metadata.uid}`)
        .query(clusterUpgradeStatusQuery);
      expect(status.phase).toBe('Upgraded');
      expect(status.history.map((h) => h.version)).toEqual([intermediate, TARGET]);
      expect(await machines(capi, namespace)).toHaveLength(5);
    },
    30 * MINUTE,
  );

  it.concurrent(
    "one worker's update fails: InPlaceUpdateFailed, a MachineHealthCheck replaces that Machine and the MachineDeployment converges; the others are not remediated while their kubelets restart",
    async () => {
      const namespace = await inPlaceNamespace(capi, 'in-place-mhc', { controlPlaneInPlace: false });
      await patchClass(capi, namespace, [
        { op: 'replace', path: '/spec/workers/machineDeployments/0/healthCheck', value: WORKER_HEALTH_CHECK },
      ]);
      const before = await createInPlaceCluster(capi, {
        namespace,
        name: 'c6',
        version: FROM,
        controlPlaneReplicas: 1,
        workerReplicas: 3,
      });
      const workers = before.filter((m) => m.role === 'worker');
      const failing = workers[0]!;
      upgrader.failMachine(`${namespace}/${failing.name}`, 'ImagePullFailed', 'kubelet image not found in the mirror');

      const started = Date.now();
      const watched = new UpdatingMessages(capi, namespace).start();
      const after = await generations(capi, namespace);
      await changeFiles(namespace, { controlPlane: false, workers: true });
      // CAPI shows the failure on the Machine; we recorded why.
      const failedRun = await eventually(
        `the update of ${failing.name} failed`,
        async () => (await machineUpdates(capi, namespace)).find((r) => r.machine === failing.name),
        (r) => r?.memo?.phase === 'Failed',
        8 * MINUTE,
      );
      expect(failedRun?.memo).toMatchObject({ phase: 'Failed', step: 'UpgradeNode' });
      expect(failedRun?.memo?.reason).toContain('ImagePullFailed: kubelet image not found in the mirror');
      const done = await waitRolledOut(
        capi,
        namespace,
        { version: FROM, controlPlane: 1, workers: 3, after: { md: after.md } },
        12 * MINUTE,
      );
      watched.stop();
      console.log(`[capi in-place] (c) failed worker remediated, MachineDeployment converged: ${seconds(started)} s`);

      expect(watched.of(failing.name)).toContain(
        'InPlaceUpdateFailed: UpdateMachine hook failed: please check controller logs for errors',
      );
      const answers = capi
        .hookCalls(namespace)
        .filter((c) => c.hook === 'UpdateMachine' && c.subject === `${namespace}/${failing.name}`);
      expect(answers.some((c) => c.status === 'Failure' && c.message?.includes('ImagePullFailed'))).toBe(true);
      // The MachineHealthCheck replaced the failed Machine (a new one, made from the new template) ...
      // Marked unhealthy: seen polled, or (when remediation was quicker than a poll on a loaded
      // machine) told by the MHC's Event, which outlives the Machine.
      const marked = await machineEvents(capi, namespace, /^MachineMarkedUnhealthy$/);
      const unhealthy = new Set([...watched.unhealthy, ...marked.keys()]);
      expect(unhealthy).toContain(failing.name);
      const workersAfter = done.machines.filter((m) => m.role === 'worker');
      expect(workersAfter.map((m) => m.name)).not.toContain(failing.name);
      // ... and the other two were updated in place, kubelets restarted, never remediated.
      const others = workers.slice(1);
      for (const m of others) {
        expect(workersAfter.find((a) => a.name === m.name)?.uid).toBe(m.uid);
        expect(unhealthy.has(m.name)).toBe(false);
        expect(
          upgrader.records.filter((r) => r.machine === `${namespace}/${m.name}` && r.outcome === 'Succeeded'),
        ).toEqual([expect.objectContaining({ restartedAt: expect.any(Number) })]);
      }
      const events = await machineEvents(capi, namespace);
      expect(events.get(failing.name)).toEqual(expect.arrayContaining(['MachineUpdateStarted', 'MachineUpdateFailed']));
    },
    25 * MINUTE,
  );

  it.concurrent(
    'an abort of a control-plane upgrade done in place holds CAPI before the workers; resume finishes it in place',
    async () => {
      const namespace = await inPlaceNamespace(capi, 'in-place-abort');
      const before = await createInPlaceCluster(capi, {
        namespace,
        name: 'c7',
        version: FROM,
        controlPlaneReplicas: 3,
        workerReplicas: 1,
      });
      const cluster = await capi.get('cluster', namespace, 'c7');
      const workflowId = `cluster-upgrade/${namespace}/c7/${cluster!.metadata.uid}`;
      const started = Date.now();
      const after = await generations(capi, namespace);
      await capi.setVersion(namespace, 'c7', NEXT);
      // Mid-way: KCP updated one control-plane Machine in place, the others still wait.
      await eventually(
        'one control-plane Machine updated in place, another not yet',
        () => machines(capi, namespace),
        (ms) => {
          const cp = ms.filter((m) => m.role === 'control-plane');
          return cp.some((m) => m.kubelet === NEXT) && cp.some((m) => m.kubelet !== NEXT);
        },
        8 * MINUTE,
        1_000,
      );
      const { topology } = await capi.abortUpgrade({
        namespace,
        cluster: 'c7',
        workflowId,
        target: NEXT,
        reason: 'capi tier: hold the control plane',
        conditionTimeoutMs: 8 * MINUTE,
      });
      expect(topology?.status).toBe('False');
      // Held: the workers were not started (the control plane's in-place updates are KCP's, not the upgrade's).
      const held = await machines(capi, namespace);
      expect(held.filter((m) => m.role === 'worker').map((m) => m.version)).toEqual([FROM]);
      expect(capi.hookCalls(namespace).filter((c) => c.hook === 'BeforeWorkersUpgrade')).toEqual([]);
      const status = (): Promise<ClusterUpgradeStatus> =>
        capi.temporal().then((c) => c.workflow.getHandle(workflowId).query(clusterUpgradeStatusQuery));
      expect((await status()).phase).toBe('Aborted');

      await capi.temporalCli(['workflow', 'signal', '--workflow-id', workflowId, '--name', 'resume']);
      const done = await waitRolledOut(
        capi,
        namespace,
        { version: NEXT, controlPlane: 3, workers: 1, after },
        10 * MINUTE,
      );
      await eventually(
        'TopologyReconciled after resume',
        () => capi.condition(namespace, 'c7', 'TopologyReconciled'),
        (c) => c?.status === 'True',
        3 * MINUTE,
      );
      console.log(`[capi in-place] (d) control-plane upgrade aborted, held, resumed, in place: ${seconds(started)} s`);
      expect(uids(done.machines)).toEqual(uids(before));
      expect((await status()).phase).toBe('Upgraded');
      await expectUpdatesSucceeded(
        namespace,
        before.map((m) => m.name),
        NEXT,
      );
    },
    25 * MINUTE,
  );
});
