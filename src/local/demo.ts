// `capi-upgrades demo`: the main job on `make dev`'s embedded management cluster.
// It creates a topology Cluster of CAPD's in-memory ClusterClass (1 control plane,
// 2 workers), upgrades it two minors through the extension with Cluster API's real
// controllers, then a second Cluster (3 control planes, 2 workers) whose Machines
// CAPI updates in place, and prints what to watch and how to abort and resume.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { withTemporal } from '../platform/temporal/session.ts';
import type { WorkflowPort } from '../platform/temporal/workflows.ts';
import type { DevState } from './dev-state.ts';
import {
  IN_MEMORY_CLASS,
  IN_PLACE_CONTROL_PLANE_PATCH,
  inMemoryCluster,
  inMemoryClusterClass,
  inPlaceWorkersArgs,
  patchArgs,
  upgradeArgs,
} from './in-memory-samples.ts';
import { policyKeys } from '../domain/policy-keys.ts';
import type { ClusterUpgradeMemo } from '../model/cluster-upgrade.ts';
import { CAPI_GROUP, CLUSTER_NAME_LABEL, CONTROL_PLANE_LABEL } from '../platform/kube/capi-api.ts';
import { clusterUpgradeMemo, readMemo } from '../platform/temporal/memo.ts';
import { abortSignal, resumeSignal } from '../workflows/messages.ts';

const run = promisify(execFile);

export interface DemoOptions {
  from: string;
  to: string;
  inPlace: boolean;
  timeoutMs: number;
  /** Where progress lines go (stdout). */
  write: (line: string) => void;
}

export interface DemoResult {
  namespace: string;
  clusters: Array<{
    name: string;
    workflowId: string;
    /** Machine names before and after: new ones by replacement, the same ones in place. */
    machinesBefore: string[];
    machines: string[];
    seconds: number;
  }>;
}

type Kube = (args: string[], stdin?: string) => Promise<string>;

interface Machine {
  metadata: { name: string; labels?: Record<string, string>; deletionTimestamp?: string };
  spec: { version?: string };
  status?: { nodeRef?: { name: string }; conditions?: Array<{ type: string; status: string }> };
}

/** A demo that cannot run as asked (bad flags, no embedded management cluster): said in one line, exit 2. */
export class DemoUsageError extends Error {}

const MINOR = /^v1\.(\d+)\.\d+$/;

/** The version flags: both v1.<minor>.<patch>, the target ahead of the start. */
export function checkDemoVersions(from: string, to: string): void {
  for (const [flag, v] of [
    ['--from', from],
    ['--to', to],
  ] as const)
    if (!MINOR.test(v)) throw new DemoUsageError(`${flag} ${v}: expected v1.<minor>.<patch>, e.g. v1.33.0`);
  if (Number(MINOR.exec(to)![1]) <= Number(MINOR.exec(from)![1]))
    throw new DemoUsageError(`--to ${to}: must be a later minor than --from ${from}`);
}

function kubectl(state: NonNullable<DevState['management']>): Kube {
  return async (args, stdin) => {
    const child = run(state.kubectl, ['--kubeconfig', state.kubeconfig, ...args], { maxBuffer: 64 << 20 });
    if (stdin !== undefined) child.child.stdin?.end(stdin);
    try {
      return (await child).stdout;
    } catch (err) {
      const e = err as { stderr?: string; message: string };
      throw new Error(`kubectl ${args.join(' ')}: ${e.stderr?.trim() || e.message}`);
    }
  };
}

/** Reads until `done`, writing what `show` makes of a read each time that changes. */
async function until<T>(
  what: string,
  deadline: number,
  read: () => Promise<T>,
  done: (v: T) => boolean,
  show: (v: T) => string,
  write: (line: string) => void,
): Promise<T> {
  let last = '';
  for (;;) {
    const v = await read();
    const shown = show(v);
    if (shown !== last) write(shown);
    last = shown;
    if (done(v)) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; last seen: ${shown}`);
    await new Promise((r) => setTimeout(r, 3_000));
  }
}

/** The gates an upgrade waits at now, in a word or two each (what the hooks answer CAPI). */
function waitingOn(memo: ClusterUpgradeMemo | undefined): string {
  if (!memo) return 'not started';
  const waiting = Object.values(memo.gates)
    .filter((g) => g.state === 'Waiting')
    .map((g) => g.message);
  return `${memo.phase}${memo.halted ? `: ${memo.halted}` : waiting.length ? `: ${waiting.join('; ')}` : ''}`;
}

async function machines(kube: Kube, namespace: string, cluster: string): Promise<Machine[]> {
  const out = await kube([
    'get',
    `machines.${CAPI_GROUP}`,
    '-n',
    namespace,
    '-l',
    `${CLUSTER_NAME_LABEL}=${cluster}`,
    '-o',
    'json',
  ]);
  return (JSON.parse(out) as { items: Machine[] }).items;
}

/** `cp v1.34.3 ×1, workers v1.33.0 ×2 (1 deleting)`: what CAPI's Machines run, for a progress line. */
export function machineSummary(list: Machine[]): string {
  const groups = new Map<string, number>();
  let deleting = 0;
  for (const m of list) {
    if (m.metadata.deletionTimestamp) {
      deleting++;
      continue;
    }
    const role = m.metadata.labels?.[CONTROL_PLANE_LABEL] !== undefined ? 'control plane' : 'workers';
    const key = `${role} ${m.spec.version ?? '?'}${m.status?.nodeRef ? '' : ' (provisioning)'}`;
    groups.set(key, (groups.get(key) ?? 0) + 1);
  }
  const parts = [...groups].sort(([a], [b]) => a.localeCompare(b)).map(([k, n]) => `${k} ×${n}`);
  return `${parts.join(', ')}${deleting ? ` (${deleting} deleting)` : ''}`;
}

function ready(list: Machine[], count: number, version: string): boolean {
  const live = list.filter((m) => !m.metadata.deletionTimestamp);
  return (
    list.length === count &&
    live.every(
      (m) =>
        m.spec.version === version &&
        m.status?.nodeRef !== undefined &&
        m.status.conditions?.find((c) => c.type === 'UpToDate')?.status === 'True',
    )
  );
}

function watchHints(state: DevState, namespace: string, name: string, workflowId: string): string {
  const m = state.management!;
  const signal = (name: string, input?: string) =>
    `temporal workflow signal --address ${state.temporalAddress} --workflow-id '${workflowId}' --name ${name}${input ? ` --input '${input}'` : ''}`;
  return `
  watch it:
    Web UI             ${state.webUi ?? '(the Web UI is off)'}/namespaces/${state.temporalNamespace}/workflows?query=${encodeURIComponent(`CapiClusterNamespace="${namespace}"`)}
    capi-upgrades      capi-upgrades status ${namespace}/${name} --watch
    kubectl            kubectl --kubeconfig ${m.kubeconfig} get machines -n ${namespace} -w
  abort it (CAPI is held at its next hook call), then resume:
    ${signal(abortSignal.name, '{"reason":"trying the abort"}')}
    ${signal(resumeSignal.name)}
    (or: capi-upgrades abort ${namespace}/${name} --reason "trying the abort"; capi-upgrades resume ${namespace}/${name})
`;
}

async function createCluster(
  kube: Kube,
  state: NonNullable<DevState['management']>,
  opts: { namespace: string; name: string; version: string; controlPlanes: number; workers: number; inPlace: boolean },
): Promise<string> {
  const { namespace, name } = opts;
  await kube(
    ['apply', '-f', '-'],
    inMemoryCluster(state.samplesDir, {
      namespace,
      name,
      version: opts.version,
      controlPlaneReplicas: opts.controlPlanes,
      workerReplicas: opts.workers,
    }),
  );
  if (opts.inPlace) {
    // CAPI's minimal plan moves workers two minors at once, which CanUpdate* declines (they would
    // be replaced): the workers follow the control plane minor by minor instead.
    await kube(['annotate', 'cluster', '-n', namespace, name, `${policyKeys.workersStrategy.annotation}=every-minor`]);
    await kube(inPlaceWorkersArgs(namespace, name));
  }
  return (await kube(['get', 'cluster', '-n', namespace, name, '-o', 'jsonpath={.metadata.uid}'])).trim();
}

/** Creates one Cluster, waits until its Machines run, upgrades it to `to` and waits until every Machine runs `to`. */
async function upgradeOne(
  kube: Kube,
  workflows: WorkflowPort,
  state: DevState,
  opts: Omit<DemoOptions, 'inPlace'> & {
    namespace: string;
    name: string;
    controlPlanes: number;
    workers: number;
    inPlace: boolean;
    title: string;
  },
): Promise<DemoResult['clusters'][number]> {
  const m = state.management!;
  const { namespace, name, write } = opts;
  const count = opts.controlPlanes + opts.workers;
  const deadline = Date.now() + opts.timeoutMs;
  write(`\n== ${opts.title}`);
  const uid = await createCluster(kube, m, { ...opts, version: opts.from });
  const workflowId = `cluster-upgrade/${namespace}/${name}/${uid}`;
  write(
    `  creating ${namespace}/${name} at ${opts.from}: ${opts.controlPlanes} control plane, ${opts.workers} workers`,
  );
  const before = await until(
    `${count} Machines of ${namespace}/${name} at ${opts.from}`,
    deadline,
    () => machines(kube, namespace, name),
    (l) => ready(l, count, opts.from),
    (l) => `  ${name}: ${machineSummary(l) || 'no Machines yet'}`,
    write,
  );
  write(`  upgrading ${namespace}/${name} ${opts.from} → ${opts.to} (workflow ${workflowId})`);
  write(watchHints(state, namespace, name, workflowId));
  const started = Date.now();
  await kube(upgradeArgs(namespace, name, opts.to));
  // Done when every Machine runs the target and the workflow says Upgraded (CAPI's last hook,
  // AfterClusterUpgrade, comes after the Machines).
  const memo = async () =>
    readMemo(clusterUpgradeMemo, (await workflows.describe(workflowId).catch(() => undefined))?.memo);
  const done = await until(
    `every Machine of ${namespace}/${name} at ${opts.to} and its upgrade Upgraded`,
    deadline,
    async () => ({ list: await machines(kube, namespace, name), memo: await memo() }),
    (v) => ready(v.list, count, opts.to) && v.memo?.phase === 'Upgraded',
    (v) => `  ${name}: ${machineSummary(v.list)} | upgrade ${waitingOn(v.memo)}`,
    write,
  );
  const seconds = Math.round((Date.now() - started) / 1000);
  write(`  ${namespace}/${name} upgraded to ${opts.to} in ${seconds} s`);
  const names = (list: Machine[]) => list.map((x) => x.metadata.name).sort();
  return { name, workflowId, machinesBefore: names(before), machines: names(done.list), seconds };
}

/** Runs the demo against the `make dev` whose state is given. */
export async function runDemo(state: DevState, opts: DemoOptions): Promise<DemoResult> {
  const m = state.management;
  if (!m)
    throw new DemoUsageError(
      'the demo needs make dev’s own management cluster: start `make dev` without MANAGEMENT=none or MANAGEMENT_KUBECONFIG',
    );
  checkDemoVersions(opts.from, opts.to);
  const kube = kubectl(m);
  return withTemporal({ address: state.temporalAddress, namespace: state.temporalNamespace }, (temporal) =>
    demo(kube, temporal.workflows, state, opts),
  );
}

async function demo(kube: Kube, workflows: WorkflowPort, state: DevState, opts: DemoOptions): Promise<DemoResult> {
  const begun = Date.now();
  const m = state.management!;
  const namespace = `demo-${randomBytes(2).toString('hex')}`;
  await kube(['create', 'namespace', namespace]);
  await kube(['apply', '-n', namespace, '-f', '-'], inMemoryClusterClass(m.samplesDir, m.extensionName));
  await kube(['apply', '-n', namespace, '-f', join(m.samplesDir, 'in-place-templates.yaml')]);
  opts.write(`namespace ${namespace}: the in-memory ClusterClass, its upgrade plan from our GenerateUpgradePlan`);
  const clusters = [
    await upgradeOne(kube, workflows, state, {
      ...opts,
      namespace,
      name: 'rolling',
      controlPlanes: 1,
      workers: 2,
      inPlace: false,
      title: `a chained upgrade ${opts.from} → ${opts.to}: CAPI replaces each Machine, the extension gates every step and drains each node`,
    }),
  ];
  if (opts.inPlace) {
    // In place: the control plane template with maxSurge 0 (KCP allows it from 3 replicas), and
    // workers that may go one at a time; the extension's node upgrader updates each Machine.
    await kube(patchArgs('clusterclass', namespace, IN_MEMORY_CLASS, 'json', IN_PLACE_CONTROL_PLANE_PATCH));
    clusters.push(
      await upgradeOne(kube, workflows, state, {
        ...opts,
        namespace,
        name: 'in-place',
        controlPlanes: 3,
        workers: 2,
        inPlace: true,
        title: `the same upgrade in place: CAPI asks the extension to update each Machine where it runs`,
      }),
    );
  }
  opts.write(
    `\ndone in ${Math.round((Date.now() - begun) / 1000)} s: upgrades ${clusters.map((c) => `${namespace}/${c.name} in ${c.seconds} s`).join(', ')}`,
  );
  opts.write(`clean up: kubectl --kubeconfig ${m.kubeconfig} delete namespace ${namespace}`);
  return { namespace, clusters };
}
