// Real Cluster API drives the extension: CAPI's topology, KCP and MachineSet
// controllers with CAPD's in-memory backend call our hooks on their own
// schedule. Each scenario has a namespace and a cluster of its own and they
// run concurrently (a chained upgrade takes CAPI minutes of re-polling).
// Services: test/support/capi-tier.ts (started once by the global setup).
import { afterAll, describe, expect, it } from '@jest/globals';
import { DEFAULT_WAIT_RETRY_AFTER_MAX_SECONDS } from '../../src/domain/upgrade-schedule.ts';
import { upgradeHooks, type ClusterUpgradeStatus } from '../../src/model/cluster-upgrade.ts';
import { clusterUpgradeStatusQuery } from '../../src/workflows/messages.ts';
import {
  CapiTierClient,
  eventually,
  hookSequence,
  type HookCallLog,
  type KubeObject,
} from '../support/capi-cluster.ts';

const FROM = 'v1.33.0';
const TARGET = 'v1.35.0';
/** The minor in between, at whatever patch our plan picks. */
const INTERMEDIATE = /^v1\.34\.\d+$/;
const LIFECYCLE: readonly string[] = upgradeHooks;
const MINUTE = 60_000;

const capi = new CapiTierClient();
afterAll(async () => await capi.close());

async function createAvailableCluster(
  namespace: string,
  name: string,
  annotations?: Record<string, string>,
  version = FROM,
) {
  await capi.createCluster({ namespace, name, version, ...(annotations ? { annotations } : {}) });
  await eventually(
    `cluster ${namespace}/${name} Available`,
    () => capi.condition(namespace, name, 'Available'),
    (c) => c?.status === 'True',
    // A minute or two alone; a first fleet-rollout cluster took over 4 beside make-dev-demo.test.ts's stack.
    8 * MINUTE,
  );
  const cluster = await capi.get('cluster', namespace, name);
  return { uid: cluster!.metadata.uid, workflowId: `cluster-upgrade/${namespace}/${name}/${cluster!.metadata.uid}` };
}

async function upgradeStatus(workflowId: string): Promise<ClusterUpgradeStatus> {
  return await (await capi.temporal()).workflow.getHandle(workflowId).query(clusterUpgradeStatusQuery);
}

/** Done from CAPI's side: every object at the target and no hook holding the topology back. */
async function waitUpgraded(namespace: string, name: string, timeoutMs: number) {
  return await eventually(
    `cluster ${namespace}/${name} upgraded to ${TARGET}`,
    async () => ({
      versions: await capi.versions(namespace),
      topology: await capi.condition(namespace, name, 'TopologyReconciled'),
    }),
    ({ versions, topology }) =>
      [...versions.controlPlane, ...versions.machineDeployments, ...versions.machines].every((v) => v === TARGET) &&
      topology?.status === 'True',
    timeoutMs,
  );
}

/** Hook calls the workflow recorded as updates: one per first sight of a hook and version after the first. */
async function recordedHookUpdates(workflowId: string): Promise<number> {
  const history = await (await capi.temporal()).workflow.getHandle(workflowId).fetchHistory();
  return (history.events ?? []).filter((e) => e.workflowExecutionUpdateAcceptedEventAttributes).length;
}

describe(`real Cluster API drives the extension`, () => {
  it.concurrent(
    'creating a cluster calls BeforeClusterCreate, then AfterControlPlaneInitialized, both recorded in Temporal',
    async () => {
      const namespace = await capi.newNamespace('create');
      const { uid } = await createAvailableCluster(namespace, 'c1');

      const calls = capi.hookCalls(namespace);
      expect(hookSequence(calls, ['BeforeClusterCreate', 'AfterControlPlaneInitialized'])).toEqual([
        'BeforeClusterCreate',
        'AfterControlPlaneInitialized',
      ]);
      expect(calls.filter((c) => c.hook === 'BeforeClusterCreate').map((c) => c.status)).not.toContain('Failure');
      // CAPI sends the cluster as it is: recorded off the request path, keyed by uid.
      const client = await capi.temporal();
      for (const hook of ['BeforeClusterCreate', 'AfterControlPlaneInitialized']) {
        const run = await eventually(
          `${hook} recorded`,
          () => client.workflow.getHandle(`cluster-event/${namespace}/c1/${hook}/${uid}`).describe(),
          (d) => d.status.name === 'COMPLETED',
          30_000,
          500,
        );
        expect(run.type).toBe('clusterEventWorkflow');
      }
      const versions = await capi.versions(namespace);
      expect(versions).toEqual({ controlPlane: [FROM], machineDeployments: [FROM], machines: [FROM, FROM] });
    },
    10 * MINUTE,
  );

  it.concurrent(
    `a chained upgrade ${FROM} → ${TARGET} goes through GenerateUpgradePlan and every lifecycle hook in CAPI's order`,
    async () => {
      const namespace = await capi.newNamespace('chained');
      const { workflowId } = await createAvailableCluster(namespace, 'c2');
      await capi.setVersion(namespace, 'c2', TARGET);
      await waitUpgraded(namespace, 'c2', 8 * MINUTE);

      const calls = capi.hookCalls(namespace);
      // CAPI sends v1beta2 Clusters without a Content-Type header: every call was taken.
      expect(capi.rejectedRequests()).toEqual([]);
      expect(capi.refusedByChecks()).toEqual([]);
      // CAPI asked us for the plan (the class names our handler) before any lifecycle hook.
      const plan = calls.filter((c) => c.hook === 'GenerateUpgradePlan');
      expect(plan.length).toBeGreaterThan(0);
      expect(plan.every((c) => c.status === 'Success' && c.version === TARGET)).toBe(true);
      expect(plan[0]!.seq).toBeLessThan(calls.find((c) => c.hook === 'BeforeClusterUpgrade')!.seq);

      const sequence = hookSequence(calls, LIFECYCLE);
      const intermediate = sequence[1]?.split(' ')[1] ?? '';
      expect(intermediate).toMatch(INTERMEDIATE);
      expect(sequence).toEqual([
        `BeforeClusterUpgrade ${TARGET}`,
        `BeforeControlPlaneUpgrade ${intermediate}`,
        `AfterControlPlaneUpgrade ${intermediate}`,
        `BeforeControlPlaneUpgrade ${TARGET}`,
        `AfterControlPlaneUpgrade ${TARGET}`,
        `BeforeWorkersUpgrade ${TARGET}`,
        `AfterWorkersUpgrade ${TARGET}`,
        `AfterClusterUpgrade ${TARGET}`,
      ]);
      // CAPI's workers roll only after the control plane reached the target.
      expect(calls.some((c) => c.hook === 'CanUpdateMachineSet')).toBe(true);

      const status = await upgradeStatus(workflowId);
      expect(status.phase).toBe('Upgraded');
      expect(status.history.map((h) => h.version)).toEqual([intermediate, TARGET]);
      // CAPI re-called the blocking hooks many times; only the 8 first sights are
      // history: the first started the workflow, each of the 7 others is one update.
      const lifecycleCalls = calls.filter((c) => LIFECYCLE.includes(c.hook)).length;
      expect(lifecycleCalls).toBeGreaterThan(8);
      expect(await recordedHookUpdates(workflowId)).toBe(7);
    },
    14 * MINUTE,
  );

  it.concurrent(
    "an abort between steps shows in CAPI's TopologyReconciled condition and nothing moves; resume completes",
    async () => {
      const namespace = await capi.newNamespace('abort');
      const { workflowId } = await createAvailableCluster(namespace, 'c3');
      await capi.setVersion(namespace, 'c3', TARGET);
      // Between steps: BeforeControlPlaneUpgrade for the intermediate minor passed, so
      // KCP is rolling its Machine; no step of ours runs until AfterControlPlaneUpgrade.
      const rolling = await eventually(
        'KCP rolling to the intermediate minor',
        () => capi.versions(namespace),
        (v) => INTERMEDIATE.test(v.controlPlane[0] ?? ''),
        6 * MINUTE,
        1_000,
      );
      const intermediate = rolling.controlPlane[0]!;
      expect(
        capi.hookCalls(namespace).some((c) => c.hook === 'AfterControlPlaneUpgrade' && c.status === 'Success'),
      ).toBe(false);
      // CAPI keeps asking and keeps being refused; the next minor never starts.
      const { topology } = await capi.abortUpgrade({
        namespace,
        cluster: 'c3',
        workflowId,
        target: TARGET,
        reason: 'capi tier: hold the fleet',
        conditionTimeoutMs: 3 * MINUTE,
      });
      expect(topology?.status).toBe('False');
      const held = await capi.versions(namespace);
      expect(held.controlPlane).toEqual([intermediate]);
      expect(held.machineDeployments).toEqual([FROM]);
      expect(
        capi.hookCalls(namespace).filter((c) => c.hook === 'BeforeControlPlaneUpgrade' && c.version === TARGET),
      ).toEqual([]);
      expect((await upgradeStatus(workflowId)).phase).toBe('Aborted');
      // Superseding the held upgrade with another target is not ours to handle: CAPI's
      // webhook refuses any version change until AfterClusterUpgrade has passed.
      await expect(capi.setVersion(namespace, 'c3', 'v1.36.0')).rejects.toThrow(
        'version cannot be changed when the "AfterClusterUpgrade" hook is still blocking',
      );

      await capi.temporalCli(['workflow', 'signal', '--workflow-id', workflowId, '--name', 'resume']);
      await waitUpgraded(namespace, 'c3', 8 * MINUTE);
      const status = await upgradeStatus(workflowId);
      expect(status.phase).toBe('Upgraded');
      expect(status.history.map((h) => h.version)).toEqual([intermediate, TARGET]);
    },
    14 * MINUTE,
  );

  it.concurrent(
    'a held upgrade is called once per capped retryAfterSeconds; deleting its cluster winds it down through BeforeClusterDelete',
    async () => {
      const namespace = await capi.newNamespace('delete');
      const { workflowId } = await createAvailableCluster(namespace, 'c4', {
        'upgrades.capi-orchestrator.io/upgrade-at': '2099-01-01T00:00:00Z',
      });
      await capi.setVersion(namespace, 'c4', TARGET);
      const held = await eventually(
        'TopologyReconciled showing BeforeClusterUpgrade held',
        () => capi.condition(namespace, 'c4', 'TopologyReconciled'),
        (c) => /BeforeClusterUpgrade: .*upgradeAt 2099-01-01T00:00:00/.test(c?.message ?? ''),
        3 * MINUTE,
      );
      expect(held?.status).toBe('False');

      // A wait for a known time answers the time left, capped (60 s by default), and CAPI's hook cache keeps
      // that answer until it has passed: three calls take two minutes, not 20 s as at the 10 s gate retry.
      const heldCalls = async (): Promise<HookCallLog[]> =>
        capi.hookCalls(namespace).filter((c) => c.hook === 'BeforeClusterUpgrade' && /upgradeAt/.test(c.message ?? ''));
      const waits = await eventually(
        'three held BeforeClusterUpgrade answers',
        heldCalls,
        (c) => c.length >= 3,
        4 * MINUTE,
      );
      expect(waits.map((c) => c.retryAfterSeconds)).toEqual(waits.map(() => DEFAULT_WAIT_RETRY_AFTER_MAX_SECONDS));
      const gaps = waits.slice(1).map((c, i) => (c.time - waits[i]!.time) / 1000);
      // CAPI calls again once the cached answer's retryAfterSeconds has passed (its requeue may add a second).
      expect(gaps.filter((g) => g < DEFAULT_WAIT_RETRY_AFTER_MAX_SECONDS - 1)).toEqual([]);

      await capi.kubectl(['delete', 'cluster', '-n', namespace, 'c4', '--wait=false']);
      await eventually(
        'the Cluster deleted',
        () => capi.get('cluster', namespace, 'c4'),
        (c: KubeObject | undefined) => c === undefined,
        4 * MINUTE,
      );
      const calls = capi.hookCalls(namespace);
      const deletes = calls.filter((c) => c.hook === 'BeforeClusterDelete');
      expect(deletes.length).toBeGreaterThan(0);
      // Success only once no upgrade workflow of the cluster runs any more.
      expect(deletes.at(-1)).toMatchObject({ status: 'Success', retryAfterSeconds: 0 });
      expect(deletes.slice(0, -1).every((c) => (c.retryAfterSeconds ?? 0) > 0)).toBe(true);
      // The held upgrade never moved anything.
      expect(calls.some((c) => c.hook === 'BeforeControlPlaneUpgrade')).toBe(false);
      const client = await capi.temporal();
      const description = await client.workflow.getHandle(workflowId).describe();
      expect(description.status.name).toBe('COMPLETED');
      const memo = description.memo?.upgrade as { phase?: string; reason?: string } | undefined;
      expect(memo).toMatchObject({ phase: 'Aborted', reason: 'cluster is being deleted' });
    },
    10 * MINUTE,
  );
});
