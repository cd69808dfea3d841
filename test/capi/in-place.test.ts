// Real Cluster API asks the extension for in-place updates: the MachineDeployment
// controller calls CanUpdateMachineSet, KCP calls CanUpdateMachine, and the
// Machine controller calls UpdateMachine until it answers done. CAPD's in-memory
// workload API server serves built-in kinds only, so the node-side executor
// cannot finish here: a worker goes up to the executor boundary (node cordoned
// and drained, the update waiting on its executor). Its control-plane "static
// pods" are plain pods without the mirror annotation a kubelet sets (and
// annotating them breaks CAPD's etcd emulation), so a control-plane drain refuses
// them as unmanaged: that shows what CAPI does with a failed UpdateMachine.
import { afterAll, describe, expect, it } from '@jest/globals';
import type { WorkflowExecutionDescription } from '@temporalio/client';
import { CapiTierClient, eventually, type KubeObject } from '../support/capi-cluster.ts';

const VERSION = 'v1.33.0';
const MINUTE = 60_000;
const CONTROL_PLANE_LABEL = 'cluster.x-k8s.io/control-plane';

const capi = new CapiTierClient();
afterAll(async () => await capi.close());

function condition(machine: KubeObject, type: string) {
  return machine.status?.conditions?.find((c) => c.type === type);
}

async function machineUpdateOf(machine: string): Promise<WorkflowExecutionDescription | undefined> {
  const client = await capi.temporal();
  for await (const wf of client.workflow.list({ query: `CapiMachineName = ${JSON.stringify(machine)}` })) {
    return await client.workflow.getHandle(wf.workflowId).describe();
  }
  return undefined;
}

describe('real Cluster API asks for in-place updates', () => {
  it(
    'a KubeadmConfig file change goes to CanUpdateMachineSet, CanUpdateMachine and UpdateMachine, up to the executor',
    async () => {
      const namespace = await capi.newNamespace('in-place');
      await capi.applyManifest(namespace, 'in-place-templates.yaml');
      await capi.createCluster({ namespace, name: 'c5', version: VERSION, controlPlaneReplicas: 3, workerReplicas: 2 });
      // Workers go in place only when the old MachineSet may scale down (maxUnavailable ≥ 1).
      await capi.kubectl([
        'patch',
        'cluster',
        '-n',
        namespace,
        'c5',
        '--type',
        'json',
        '-p',
        JSON.stringify([
          {
            op: 'add',
            path: '/spec/topology/workers/machineDeployments/0/rollout',
            value: { strategy: { type: 'RollingUpdate', rollingUpdate: { maxSurge: 0, maxUnavailable: 1 } } },
          },
        ]),
      ]);
      const ready = await eventually(
        '3 control-plane and 2 worker Machines running',
        () => capi.list('machines.cluster.x-k8s.io', namespace),
        (ms) => ms.length === 5 && ms.every((m) => m.status?.phase === 'Running'),
        5 * MINUTE,
      );
      const machinesBefore = ready.map((m) => m.metadata.name).sort();

      // Only files change: the new templates differ from the old by spec.files.
      await capi.kubectl([
        'patch',
        'clusterclass',
        '-n',
        namespace,
        'in-memory',
        '--type',
        'json',
        '-p',
        JSON.stringify([
          {
            op: 'replace',
            path: '/spec/workers/machineDeployments/0/bootstrap/templateRef/name',
            value: 'in-memory-default-worker-bootstraptemplate-in-place',
          },
          { op: 'replace', path: '/spec/controlPlane/templateRef/name', value: 'in-memory-control-plane-in-place' },
        ]),
      ]);

      const isControlPlane = (m: KubeObject) => m.metadata.labels?.[CONTROL_PLANE_LABEL] !== undefined;
      const machines = await eventually(
        'a worker updating in place and a control-plane update refused',
        () => capi.list('machines.cluster.x-k8s.io', namespace),
        (ms) =>
          // CAPI keeps an UpdateMachine message until the retryAfterSeconds we gave passed.
          ms.some((m) => !isControlPlane(m) && condition(m, 'Updating')?.message?.endsWith('(job executor)')) &&
          ms.some((m) => isControlPlane(m) && condition(m, 'Updating')?.reason === 'InPlaceUpdateFailed'),
        5 * MINUTE,
      );
      // In place: the same Machines, none created or deleted.
      expect(machines.map((m) => m.metadata.name).sort()).toEqual(machinesBefore);
      const calls = capi.hookCalls(namespace);
      expect(capi.rejectedRequests()).toEqual([]);
      expect(capi.refusedByChecks()).toEqual([]);
      expect(calls.filter((c) => c.hook === 'CanUpdateMachineSet').length).toBeGreaterThan(0);
      expect(calls.filter((c) => c.hook === 'CanUpdateMachine').length).toBeGreaterThan(0);
      expect(calls.filter((c) => c.hook.startsWith('CanUpdate')).every((c) => c.status === 'Success')).toBe(true);

      // Worker: CAPI accepted our patches, applied the desired KubeadmConfig to the same
      // Machine and shows our message while UpdateMachine answers "retry".
      const worker = machines.find(
        (m) => !isControlPlane(m) && condition(m, 'Updating')?.reason === 'InPlaceUpdating',
      )!;
      const workerNode = (worker.status as { nodeRef?: { name: string } }).nodeRef!.name;
      expect(condition(worker, 'Updating')).toMatchObject({
        status: 'True',
        message: `In-place update in progress: updating machine ${namespace}/${worker.metadata.name} to ${VERSION}: upgrading node ${workerNode} (job executor)`,
      });
      expect(
        calls.some((c) => c.hook === 'UpdateMachine' && c.subject === `${namespace}/${worker.metadata.name}`),
      ).toBe(true);
      const bootstrap = await capi.get(
        'kubeadmconfigs.bootstrap.cluster.x-k8s.io',
        namespace,
        (worker.spec as { bootstrap: { configRef: { name: string } } }).bootstrap.configRef.name,
      );
      expect((bootstrap?.spec as { files?: { path: string }[] }).files?.map((f) => f.path)).toContain(
        '/etc/capi-uo/in-place.conf',
      );
      // Our side: cordoned, drained, at the executor (CAPD's API server serves no Jobs).
      const workerUpdate = await machineUpdateOf(worker.metadata.name);
      expect(workerUpdate?.status.name).toBe('RUNNING');
      expect(workerUpdate?.memo?.machineUpdate).toMatchObject({ phase: 'Updating', step: 'UpgradeNode' });
      expect(
        await capi.workloadKubectl(namespace, 'c5', [
          'get',
          'node',
          workerNode,
          '-o',
          'jsonpath={.spec.unschedulable}',
        ]),
      ).toBe('true');

      // KCP's webhook allows maxSurge 0 (in place without a spare Machine) from 3 replicas only.
      const [kcp] = await capi.list('kubeadmcontrolplanes.controlplane.cluster.x-k8s.io', namespace);
      await expect(
        capi.kubectl([
          'patch',
          'kubeadmcontrolplane',
          '-n',
          namespace,
          kcp!.metadata.name,
          '--dry-run=server',
          '--type',
          'merge',
          '-p',
          JSON.stringify({ spec: { replicas: 1 } }),
        ]),
      ).rejects.toThrow('when KubeadmControlPlane is configured to scale-in, replica count needs to be at least 3');

      // Control plane: KCP takes one Machine at a time. Our Failure names the pods, but
      // CAPI does not copy a failed UpdateMachine's message anywhere: it points at its logs.
      const refused = machines.filter((m) => isControlPlane(m) && condition(m, 'Updating')?.status === 'True');
      expect(refused).toHaveLength(1);
      const cp = refused[0]!;
      expect(condition(cp, 'Updating')).toMatchObject({
        reason: 'InPlaceUpdateFailed',
        message: 'UpdateMachine hook failed: please check controller logs for errors',
      });
      const cpUpdate = await machineUpdateOf(cp.metadata.name);
      expect(cpUpdate?.memo?.machineUpdate).toMatchObject({ phase: 'Failed', step: 'Drain' });
      const answered = calls.filter(
        (c) => c.hook === 'UpdateMachine' && c.subject === `${namespace}/${cp.metadata.name}`,
      );
      expect(answered.at(-1)).toMatchObject({ status: 'Failure' });
      expect(answered.at(-1)?.message).toMatch(/failed at Drain: cannot drain node .*\(declares no controller\)/);
    },
    12 * MINUTE,
  );
});
