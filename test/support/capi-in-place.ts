// What the real-CAPI in-place scenarios (test/capi/in-place.test.ts) read and do:
// clusters ready for in-place updates (KCP maxSurge 0, MachineDeployment maxSurge 0 /
// maxUnavailable 1), what CAPI shows on Machines, KCP and MachineDeployments, and
// what the extension recorded (machine-update workflows, Events on Machines).
import type { WorkflowExecutionDescription } from '@temporalio/client';
import type { MachineUpdateMemo } from '../../src/model/machine-update.ts';
import {
  IN_MEMORY_CLASS,
  IN_PLACE_CONTROL_PLANE_PATCH,
  inPlaceWorkersArgs,
} from '../../src/local/in-memory-samples.ts';
import { eventually, type CapiTierClient, type Condition, type KubeObject } from './capi-cluster.ts';

export const MINUTE = 60_000;
const CONTROL_PLANE_LABEL = 'cluster.x-k8s.io/control-plane';
export const MACHINES = 'machines.cluster.x-k8s.io';
export const KCPS = 'kubeadmcontrolplanes.controlplane.cluster.x-k8s.io';
export const MACHINE_DEPLOYMENTS = 'machinedeployments.cluster.x-k8s.io';

export interface MachineView {
  name: string;
  uid: string;
  role: 'control-plane' | 'worker';
  version: string;
  kubelet?: string;
  node?: string;
  upToDate?: Condition;
  updating?: Condition;
  healthCheck?: Condition;
  deleting: boolean;
  annotations: Record<string, string>;
}

export function condition(o: KubeObject, type: string): Condition | undefined {
  return o.status?.conditions?.find((c) => c.type === type);
}

export function isControlPlane(m: KubeObject): boolean {
  return m.metadata.labels?.[CONTROL_PLANE_LABEL] !== undefined;
}

export function machineView(m: KubeObject): MachineView {
  const status = m.status as { nodeRef?: { name: string }; nodeInfo?: { kubeletVersion?: string } } | undefined;
  const upToDate = condition(m, 'UpToDate');
  const updating = condition(m, 'Updating');
  const healthCheck = condition(m, 'HealthCheckSucceeded');
  return {
    name: m.metadata.name,
    uid: m.metadata.uid,
    role: isControlPlane(m) ? 'control-plane' : 'worker',
    version: String((m.spec as { version?: string }).version),
    ...(status?.nodeInfo?.kubeletVersion ? { kubelet: status.nodeInfo.kubeletVersion } : {}),
    ...(status?.nodeRef?.name ? { node: status.nodeRef.name } : {}),
    ...(upToDate ? { upToDate } : {}),
    ...(updating ? { updating } : {}),
    ...(healthCheck ? { healthCheck } : {}),
    deleting: m.metadata.deletionTimestamp !== undefined,
    annotations: m.metadata.annotations ?? {},
  };
}

export async function machines(capi: CapiTierClient, namespace: string): Promise<MachineView[]> {
  return (await capi.list(MACHINES, namespace)).map(machineView).sort((a, b) => a.name.localeCompare(b.name));
}

/**
 * A namespace with the in-memory ClusterClass and the in-place templates; unless told otherwise
 * its control plane is ready for in-place updates (maxSurge 0, which KCP allows from 3 replicas).
 */
export async function inPlaceNamespace(
  capi: CapiTierClient,
  prefix: string,
  opts: { controlPlaneInPlace: boolean } = { controlPlaneInPlace: true },
): Promise<string> {
  const namespace = await capi.newNamespace(prefix);
  await capi.applyManifest(namespace, 'in-place-templates.yaml');
  if (opts.controlPlaneInPlace) await patchClass(capi, namespace, IN_PLACE_CONTROL_PLANE_PATCH);
  return namespace;
}

export async function patchClass(capi: CapiTierClient, namespace: string, ops: unknown[]): Promise<void> {
  await capi.kubectl([
    'patch',
    'clusterclass',
    '-n',
    namespace,
    IN_MEMORY_CLASS,
    '--type',
    'json',
    '-p',
    JSON.stringify(ops),
  ]);
}

/** A cluster whose Machines CAPI may update in place; resolves once every Machine runs on its Node. */
export async function createInPlaceCluster(
  capi: CapiTierClient,
  opts: {
    namespace: string;
    name: string;
    version: string;
    controlPlaneReplicas: number;
    workerReplicas: number;
    annotations?: Record<string, string>;
  },
): Promise<MachineView[]> {
  const { namespace, name } = opts;
  await capi.createCluster(opts);
  await capi.kubectl(inPlaceWorkersArgs(namespace, name));
  const count = opts.controlPlaneReplicas + opts.workerReplicas;
  return await eventually(
    `${count} Machines of ${namespace}/${name} running on their Nodes`,
    () => machines(capi, namespace),
    (ms) => ms.length === count && ms.every((m) => m.node !== undefined && m.upToDate?.status === 'True'),
    5 * MINUTE,
  );
}

/** KCP's and the MachineDeployment's metadata.generation: a change CAPI has to roll out raises them. */
export async function generations(capi: CapiTierClient, namespace: string): Promise<{ kcp: number; md: number }> {
  const [[kcp], [md]] = await Promise.all([capi.list(KCPS, namespace), capi.list(MACHINE_DEPLOYMENTS, namespace)]);
  return { kcp: kcp?.metadata.generation ?? 0, md: md?.metadata.generation ?? 0 };
}

/** The controller has seen the object's spec newer than `after` (a generation) and reports on it. */
function observedAfter(o: KubeObject, after: number | undefined): boolean {
  const generation = o.metadata.generation ?? 0;
  return (after === undefined || generation > after) && o.status?.observedGeneration === generation;
}

/**
 * Done from CAPI's side: KCP and the MachineDeployment saw the change (generation above
 * `after`), every Machine is at `version` on its kubelet, UpToDate and not updating, and
 * both report every replica up to date and no rollout.
 */
export async function waitRolledOut(
  capi: CapiTierClient,
  namespace: string,
  expect: { version: string; controlPlane: number; workers: number; after: { kcp?: number; md?: number } },
  timeoutMs: number,
): Promise<{ machines: MachineView[]; kcp: KubeObject; md: KubeObject }> {
  return await eventually(
    `every Machine of ${namespace} at ${expect.version}, up to date, KCP and MachineDeployment rolled out`,
    async () => {
      const [ms, [kcp], [md]] = await Promise.all([
        machines(capi, namespace),
        capi.list(KCPS, namespace),
        capi.list(MACHINE_DEPLOYMENTS, namespace),
      ]);
      return { machines: ms, kcp: kcp!, md: md! };
    },
    ({ machines: ms, kcp, md }) =>
      observedAfter(kcp, expect.after.kcp) &&
      observedAfter(md, expect.after.md) &&
      ms.length === expect.controlPlane + expect.workers &&
      ms.every(
        (m) =>
          !m.deleting &&
          m.version === expect.version &&
          m.kubelet === expect.version &&
          m.upToDate?.status === 'True' &&
          m.updating?.status === 'False',
      ) &&
      (kcp.status as { upToDateReplicas?: number }).upToDateReplicas === expect.controlPlane &&
      (md.status as { upToDateReplicas?: number }).upToDateReplicas === expect.workers &&
      condition(kcp, 'RollingOut')?.status === 'False' &&
      condition(md, 'RollingOut')?.status === 'False',
    timeoutMs,
  );
}

/**
 * Every distinct Updating message CAPI showed on a Machine while polled (what an operator saw),
 * and the Machines a MachineHealthCheck found unhealthy (HealthCheckSucceeded=False).
 */
export class UpdatingMessages {
  readonly seen = new Map<string, Set<string>>();
  readonly unhealthy = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private readonly capi: CapiTierClient;
  private readonly namespace: string;

  constructor(capi: CapiTierClient, namespace: string) {
    this.capi = capi;
    this.namespace = namespace;
  }

  start(): this {
    const poll = async () => {
      for (const m of await machines(this.capi, this.namespace).catch(() => [])) {
        if (m.healthCheck?.status === 'False') this.unhealthy.add(m.name);
        if (m.updating?.status !== 'True') continue;
        const set = this.seen.get(m.name) ?? new Set<string>();
        set.add(`${m.updating.reason}: ${m.updating.message ?? ''}`);
        this.seen.set(m.name, set);
      }
      if (!this.stopped) this.timer = setTimeout(() => void poll(), 1_000);
    };
    void poll();
    return this;
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  of(machine: string): string[] {
    return [...(this.seen.get(machine) ?? [])];
  }
}

/** The extension's machine-update runs for a namespace, newest first per machine. */
export async function machineUpdates(
  capi: CapiTierClient,
  namespace: string,
): Promise<{ machine: string; description: WorkflowExecutionDescription; memo?: MachineUpdateMemo }[]> {
  const client = await capi.temporal();
  const out: { machine: string; description: WorkflowExecutionDescription; memo?: MachineUpdateMemo }[] = [];
  const query = `WorkflowType = "machineUpdateWorkflow" AND CapiClusterNamespace = ${JSON.stringify(namespace)}`;
  for await (const wf of client.workflow.list({ query })) {
    const description = await client.workflow.getHandle(wf.workflowId, wf.runId).describe();
    const memo = description.memo?.machineUpdate as MachineUpdateMemo | undefined;
    out.push({ machine: wf.workflowId.split('/')[2] ?? '', description, ...(memo ? { memo } : {}) });
  }
  return out;
}

/** Reasons of the Events the extension recorded on each Machine, in time order. */
export async function machineEvents(
  capi: CapiTierClient,
  namespace: string,
  reasons = /^(MachineUpdate|Node(Drained|Upgraded))/,
): Promise<Map<string, string[]>> {
  const out = await capi.kubectl([
    'get',
    'events',
    '-n',
    namespace,
    '--field-selector',
    'involvedObject.kind=Machine',
    '-o',
    'json',
  ]);
  const items = (
    JSON.parse(out) as {
      items: {
        involvedObject: { name: string };
        reason: string;
        source?: { component?: string };
        reportingComponent?: string;
        eventTime?: string;
        firstTimestamp?: string;
      }[];
    }
  ).items
    .filter((e) => reasons.test(e.reason))
    .sort((a, b) => (a.eventTime ?? a.firstTimestamp ?? '').localeCompare(b.eventTime ?? b.firstTimestamp ?? ''));
  const byMachine = new Map<string, string[]>();
  for (const e of items)
    byMachine.set(e.involvedObject.name, [...(byMachine.get(e.involvedObject.name) ?? []), e.reason]);
  return byMachine;
}

/** The version an UpdateMachine answer is about (our messages say `… to <version>: …`). */
export function updateMachineVersion(message: string | undefined): string | undefined {
  return / to (v\d+\.\d+\.\d+[^\s:]*)/.exec(message ?? '')?.[1];
}

export function seconds(sinceMs: number): string {
  return ((Date.now() - sinceMs) / 1000).toFixed(0);
}
