// The health verdict of a cluster upgrade step: which nodes and pods of a
// cluster state are fine, as one deterministic summary (it reaches CAPI
// conditions) plus sorted findings and warnings. Pure: the activity in
// activities/cluster-health.ts reads the state, this decides.
import type { V1LabelSelector, V1Node, V1Pod, V1PodDisruptionBudget } from '@kubernetes/client-node';
import { compareIgnoringBuild, sameVersion, tryParseVersion } from './versions.ts';

export const CONTROL_PLANE_LABEL = 'node-role.kubernetes.io/control-plane';
/** How many names a summary lists before "+N more". */
const LIST_CAP = 5;

export type HealthScope = 'pre' | 'control-plane' | 'workers' | 'post';

/** What a health check asks of a cluster (the activity's input without the cluster). */
export interface HealthCriteria {
  scope: HealthScope;
  /** Kubelet version the nodes in scope must report (post-step checks). */
  version?: string;
  criticalNamespaces: string[];
  blockingPdbPolicy: 'fail' | 'warn';
}

export interface HealthReport {
  healthy: boolean;
  /** Deterministic one-line summary for the given cluster state (it reaches CAPI conditions). */
  summary: string;
  /** What is wrong, one line each, sorted. */
  findings: string[];
  /** What is worth knowing but does not fail the check, sorted. */
  warnings: string[];
}

/** Why `criteria` cannot be checked (every scope after `pre` checks a version), or undefined. */
export function invalidHealthCheck(criteria: HealthCriteria): string | undefined {
  return criteria.scope !== 'pre' && !criteria.version
    ? `health check scope ${criteria.scope} needs a version`
    : undefined;
}

/** A Cluster API Machine as the health check needs it. */
export interface MachineInfo {
  name: string;
  controlPlane: boolean;
  /** status.nodeRef.name: unset while the machine is provisioning. */
  nodeName?: string;
  /** spec.infrastructureRef.kind (the management executor's node upgraders serve a kind). */
  infrastructureKind?: string;
}

export interface ClusterState {
  /** The cluster's Machines: their nodes are the nodes checked. None: every node of the workload cluster. */
  machines: MachineInfo[];
  nodes: V1Node[];
  pods: V1Pod[];
  pdbs: V1PodDisruptionBudget[];
}

/**
 * The health verdict for a cluster state: pure and deterministic (no clock, sorted output).
 *
 * The nodes checked are the ones the cluster's Machines name in status.nodeRef (Cluster API
 * upgrades those; nodes it does not manage never reach the target version), or every node when
 * the cluster has no Machines. Control-plane nodes carry the node-role label or belong to a
 * control-plane Machine. A PodDisruptionBudget blocks drains when it allows no disruptions and
 * covers a pod running on a checked node.
 */
export function evaluateHealth(input: HealthCriteria, state: ClusterState): HealthReport {
  const { scope } = input;
  const invalid = invalidHealthCheck(input);
  if (invalid) throw new Error(invalid);
  // Shown canonical (`1.32.4` → `v1.32.4`) so the summary does not depend on how the version was spelled.
  const version = scope === 'pre' || !input.version ? undefined : displayVersion(input.version);
  const notes: Notes = { findings: [], warnings: [] };
  const nodes = checkNodes(scope, version, state, notes);
  const parts = [nodes.summary];
  if (scope === 'pre' || scope === 'post') parts.push(checkCriticalPods(input.criticalNamespaces, state.pods, notes));
  if (scope === 'pre') {
    const blocking = checkBlockingPdbs(input.blockingPdbPolicy, state, nodes.checked, notes);
    if (blocking) parts.push(blocking);
  }
  const { findings, warnings } = notes;
  findings.sort();
  warnings.sort();
  return { healthy: findings.length === 0, summary: parts.join('; '), findings, warnings };
}

/** What the checks found so far: findings fail the check, warnings do not. */
interface Notes {
  findings: string[];
  warnings: string[];
}

interface ExpectedNode {
  controlPlane: boolean;
  machine?: string;
}

/** Which nodes belong to the cluster, with their roles, and the Machines without a node yet. */
function expectedNodes(
  state: ClusterState,
  byName: Map<string, V1Node>,
  notes: Notes,
): { expected: Map<string, ExpectedNode>; nodeless: MachineInfo[] } {
  const expected = new Map<string, ExpectedNode>();
  const nodeless: MachineInfo[] = [];
  if (state.machines.length === 0) {
    notes.warnings.push('the cluster has no Machines: every node of the workload cluster is checked');
    for (const name of byName.keys()) expected.set(name, { controlPlane: false });
  }
  for (const m of state.machines) {
    if (m.nodeName) expected.set(m.nodeName, { controlPlane: m.controlPlane, machine: m.name });
    else nodeless.push(m);
  }
  return { expected, nodeless };
}

/** Why a node is not fine (not Ready, or its kubelet not at `version`), or undefined. */
function nodeProblem(node: V1Node, version: string | undefined): string | undefined {
  const reasons: string[] = [];
  const ready = node.status?.conditions?.find((c) => c.type === 'Ready');
  if (!ready) reasons.push('no Ready condition');
  else if (ready.status === 'Unknown') reasons.push('Ready Unknown');
  else if (ready.status !== 'True') reasons.push('NotReady');
  const kubelet = node.status?.nodeInfo?.kubeletVersion ?? '';
  if (version && !kubeletMatches(kubelet, version)) reasons.push(`kubelet ${kubelet || 'unknown'}`);
  return reasons.length > 0 ? reasons.join(' and ') : undefined;
}

/** The nodes in scope: their summary, and the names of the nodes found (the PodDisruptionBudgets' pods run there). */
function checkNodes(
  scope: HealthScope,
  version: string | undefined,
  state: ClusterState,
  notes: Notes,
): { summary: string; checked: Set<string> } {
  const byName = new Map(state.nodes.map((n) => [n.metadata?.name ?? '', n]));
  const { expected, nodeless } = expectedNodes(state, byName, notes);
  const isControlPlane = (name: string): boolean =>
    (expected.get(name)?.controlPlane ?? false) ||
    byName.get(name)?.metadata?.labels?.[CONTROL_PLANE_LABEL] !== undefined;
  const inScope = (controlPlane: boolean): boolean =>
    scope === 'control-plane' ? controlPlane : scope === 'workers' ? !controlPlane : true;
  const noun = scope === 'control-plane' ? 'control-plane nodes' : scope === 'workers' ? 'worker nodes' : 'nodes';

  const checked = new Set<string>();
  const nodeProblems: [string, string][] = [];
  let total = 0;
  for (const [name, { machine }] of expected) {
    if (!inScope(isControlPlane(name))) continue;
    total++;
    const node = byName.get(name);
    if (!node) {
      nodeProblems.push([name, `not found (Machine ${machine ?? '?'})`]);
      continue;
    }
    checked.add(name);
    const problem = nodeProblem(node, version);
    if (problem !== undefined) nodeProblems.push([name, problem]);
    if (node.spec?.unschedulable) notes.warnings.push(`node ${name}: cordoned`);
  }
  for (const m of nodeless) {
    if (!inScope(m.controlPlane)) continue;
    if (scope === 'pre') {
      notes.warnings.push(`Machine ${m.name}: no node yet`);
    } else {
      total++;
      nodeProblems.push([`Machine ${m.name}`, 'no node yet']);
    }
  }
  nodeProblems.sort(byFirst);
  for (const [name, why] of nodeProblems) {
    const subject = name.startsWith('Machine ') ? name : `node ${name}`;
    notes.findings.push(`${subject}: ${why}${version && why.includes('kubelet') ? `, want ${version}` : ''}`);
  }
  if (scope === 'control-plane' && total === 0) {
    // Hosted control planes have no control-plane nodes; CAPI checked the control plane's version already.
    notes.warnings.push('no control-plane nodes: nothing to check on the workload cluster');
  }
  const summary =
    `${total - nodeProblems.length} of ${total} ${noun} Ready${version ? ` at ${version}` : ''}` +
    details(nodeProblems);
  return { summary, checked };
}

/** The pods in the critical namespaces: their summary. */
function checkCriticalPods(criticalNamespaces: string[], allPods: V1Pod[], notes: Notes): string {
  const critical = new Set(criticalNamespaces);
  const podProblems: [string, string][] = [];
  let pods = 0;
  for (const pod of allPods) {
    const ns = pod.metadata?.namespace ?? '';
    if (!critical.has(ns)) continue;
    // Finished pods are fine; terminating ones are going away and their replacements count.
    if (pod.status?.phase === 'Succeeded' || pod.metadata?.deletionTimestamp) continue;
    pods++;
    const phase = pod.status?.phase ?? 'Unknown';
    const ready = pod.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;
    if (phase !== 'Running') podProblems.push([`${ns}/${pod.metadata?.name ?? ''}`, phase]);
    else if (!ready) podProblems.push([`${ns}/${pod.metadata?.name ?? ''}`, 'Running, not Ready']);
  }
  podProblems.sort(byFirst);
  for (const [name, why] of podProblems) notes.findings.push(`pod ${name}: ${why}`);
  return `${pods - podProblems.length} of ${pods} critical pods Ready${details(podProblems)}`;
}

/** The PodDisruptionBudgets that would block a drain of the `checked` nodes: their summary, or undefined for none. */
function checkBlockingPdbs(
  policy: HealthCriteria['blockingPdbPolicy'],
  state: ClusterState,
  checked: Set<string>,
  notes: Notes,
): string | undefined {
  const blocking: string[] = [];
  for (const pdb of state.pdbs) {
    if ((pdb.status?.disruptionsAllowed ?? 0) !== 0 || !pdb.spec?.selector) continue;
    const ns = pdb.metadata?.namespace ?? '';
    const covered = state.pods.filter(
      (p) =>
        p.metadata?.namespace === ns &&
        checked.has(p.spec?.nodeName ?? '') &&
        p.status?.phase !== 'Succeeded' &&
        p.status?.phase !== 'Failed' &&
        pdbSelectorMatches(pdb.spec?.selector, p.metadata?.labels ?? {}),
    ).length;
    if (covered === 0) continue;
    const name = `${ns}/${pdb.metadata?.name ?? ''}`;
    blocking.push(name);
    const line = `PodDisruptionBudget ${name} allows no disruptions (covers ${covered} ${covered === 1 ? 'pod' : 'pods'})`;
    (policy === 'fail' ? notes.findings : notes.warnings).push(line);
  }
  blocking.sort();
  if (blocking.length === 0) return undefined;
  const verb = blocking.length === 1 ? 'PodDisruptionBudget blocks' : 'PodDisruptionBudgets block';
  return `${blocking.length} ${verb} drains (${capList(blocking)})`;
}

function displayVersion(v: string): string {
  const parsed = tryParseVersion(v);
  return parsed.ok ? parsed.version.canonical : v;
}

/** The kubelet runs `want`: a leading `v` is optional; build metadata counts only when `want` has some. */
export function kubeletMatches(kubelet: string, want: string): boolean {
  const k = tryParseVersion(kubelet);
  const w = tryParseVersion(want);
  if (!k.ok || !w.ok) return kubelet.trim() === want.trim();
  return w.version.build.length > 0
    ? sameVersion(k.version, w.version)
    : compareIgnoringBuild(k.version, w.version) === 0;
}

/** A label selector as the API server applies it (policy/v1: an empty selector matches every pod). */
export function pdbSelectorMatches(selector: V1LabelSelector | undefined, labels: Record<string, string>): boolean {
  if (!selector) return false;
  for (const [k, v] of Object.entries(selector.matchLabels ?? {})) {
    if (labels[k] !== v) return false;
  }
  for (const e of selector.matchExpressions ?? []) {
    const has = Object.hasOwn(labels, e.key);
    const value = labels[e.key];
    const values = e.values ?? [];
    switch (e.operator) {
      case 'In':
        if (!has || !values.includes(value ?? '')) return false;
        break;
      case 'NotIn':
        if (has && values.includes(value ?? '')) return false;
        break;
      case 'Exists':
        if (!has) return false;
        break;
      case 'DoesNotExist':
        if (has) return false;
        break;
      default:
        return false;
    }
  }
  return true;
}

function byFirst(a: [string, string], b: [string, string]): number {
  return a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0;
}

function capList(items: string[]): string {
  const shown = items.slice(0, LIST_CAP);
  if (items.length > LIST_CAP) shown.push(`+${items.length - LIST_CAP} more`);
  return shown.join(', ');
}

function details(problems: [string, string][]): string {
  return problems.length === 0 ? '' : ` (${capList(problems.map(([n, why]) => `${n}: ${why}`))})`;
}
