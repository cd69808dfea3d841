// What must hold when a chaos run has converged, each a named check that fails the run.
// Each returns the broken cases as plain lines (empty = holds).
import { BatchV1Api, CustomObjectsApi, type V1Node } from '@kubernetes/client-node';
import { type Client, WorkflowNotFoundError } from '@temporalio/client';
import proto from '@temporalio/proto';
import { MANAGED_BY_SELECTOR } from '../../src/activities/machine-update-common.ts';
import {
  NODE_UPGRADE_GROUP,
  NODE_UPGRADE_PLURAL,
  NODE_UPGRADE_VERSION,
} from '../../src/activities/executors/node-upgrade-request.ts';
import type { MachineUpdateStatus } from '../../src/model/machine-update.ts';
import type { WorkloadApi } from '../testbed-fixtures.ts';
import type { HookAnswer } from './capi-player.ts';

const EventType = proto.temporal.api.enums.v1.EventType;
const UNHANDLED_COMMAND =
  proto.temporal.api.enums.v1.WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_COMMAND;
/** How stale a hook answer may be against the run's own record: CAPI acts on it, so it must hold within 10 s. */
export const ANSWER_TRUTH_MS = 10_000;
export const MAX_HISTORY_EVENTS = 2_000;

export interface InvariantInput {
  client: Client;
  wl: WorkloadApi;
  nodes: string[];
  /** Each machine's last desired version. */
  targets: string[];
  limit: number;
  /** The most updates past the queue seen at once (slots query holders), and the agent's most open requests. */
  maxHolders: number;
  maxOpenRequests: number;
  /** NodeUpgradeRequests by `<node>@<version>` (uids), and the keys the agent answered Failed. */
  requests: Map<string, Set<string>>;
  agentFailed: string[];
  answers: HookAnswer[];
  /** Machines whose spec an abort or a newer spec ended (Failure "aborted" is true for those). */
  aborted: Set<string>;
}

export type Invariants = Record<string, string[]>;

const UPDATE_FAILED_ANNOTATION = 'upgrades.capi-orchestrator.io/update-failed';

async function resultOf(client: Client, workflowId: string): Promise<MachineUpdateStatus | string> {
  try {
    const handle = client.workflow.getHandle(workflowId);
    const d = await handle.describe();
    if (d.status.name !== 'COMPLETED') return d.status.name;
    return (await handle.result()) as MachineUpdateStatus;
  } catch (err) {
    return err instanceof WorkflowNotFoundError ? 'NOT_FOUND' : String(err).split('\n')[0]!;
  }
}

/**
 * The answers CAPI got that the runs' own record contradicts (by more than ANSWER_TRUTH_MS):
 * `results` is each run's final status, or its Temporal status name when it did not complete.
 */
export function untrueAnswers(
  answers: HookAnswer[],
  results: Map<string, MachineUpdateStatus | string>,
  aborted: Set<string>,
): string[] {
  const lies: string[] = [];
  for (const a of answers) {
    if (a.status === 'error') continue;
    const r = results.get(a.workflowId)!;
    const at = new Date(a.answeredAt).toISOString();
    const doneAt =
      typeof r === 'string' || r.phase !== 'Succeeded' ? undefined : Date.parse(r.steps.at(-1)?.completeTime ?? '');
    if (/internal error/i.test(a.message)) lies.push(`${at} ${a.workflowId}: ${a.status} "${a.message}"`);
    else if (a.status === 'Success' && a.retryAfterSeconds === 0) {
      if (doneAt === undefined)
        lies.push(`${at} ${a.workflowId}: done, but the run is ${typeof r === 'string' ? r : r.phase}`);
      else if (doneAt > a.answeredAt + ANSWER_TRUTH_MS)
        lies.push(`${at} ${a.workflowId}: done ${doneAt - a.answeredAt} ms before the run's last step ended`);
    } else if (a.status === 'Success' && doneAt !== undefined && a.sentAt > doneAt + ANSWER_TRUTH_MS)
      lies.push(`${at} ${a.workflowId}: "${a.message}" ${a.sentAt - doneAt} ms after the run succeeded`);
    else if (a.status === 'Failure' && /aborted/.test(a.message) && !aborted.has(a.workflowId))
      lies.push(`${at} ${a.workflowId}: "${a.message}" but nobody aborted it`);
  }
  return lies;
}

export async function checkInvariants(o: InvariantInput): Promise<Invariants> {
  const out: Invariants = {};
  const nodes = new Map<string, V1Node>();
  for (const name of o.nodes) nodes.set(name, await o.wl.core.readNode({ name }));

  out['nodes at their target version'] = o.nodes
    .map((n, i) => ({ n, at: nodes.get(n)!.status?.nodeInfo?.kubeletVersion, want: o.targets[i] }))
    .filter((x) => x.at !== x.want)
    .map((x) => `${x.n}: kubelet ${x.at}, desired ${x.want}`);

  out['nothing we cordoned left cordoned'] = o.nodes
    .filter((n) => nodes.get(n)!.spec?.unschedulable || nodes.get(n)!.metadata?.annotations?.[UPDATE_FAILED_ANNOTATION])
    .map(
      (n) =>
        `${n}: unschedulable ${nodes.get(n)!.spec?.unschedulable ?? false}, annotations ${JSON.stringify(nodes.get(n)!.metadata?.annotations ?? {})}`,
    );

  // One NodeUpgradeRequest per node and desired spec, plus one per failure the agent was told to answer.
  out['no node upgraded twice for one desired spec'] = [...o.requests]
    .filter(([key, uids]) => uids.size > 1 + o.agentFailed.filter((k) => k === key).length)
    .map(
      ([key, uids]) =>
        `${key}: ${uids.size} requests, ${o.agentFailed.filter((k) => k === key).length} failed by the agent`,
    );

  out['never more than the limit past the queue'] = [
    ...(o.maxHolders > o.limit ? [`slots workflow held ${o.maxHolders} places at once (limit ${o.limit})`] : []),
    ...(o.maxOpenRequests > o.limit ? [`${o.maxOpenRequests} node upgrades open at once (limit ${o.limit})`] : []),
  ];

  // Hook answers against the runs' own record: a `done` is a Succeeded run whose last step ended
  // before it (within 10 s); a `still running` never comes more than 10 s after the run succeeded;
  // no answer is an internal error; `aborted` only for a spec an abort or a newer spec ended.
  const results = new Map<string, MachineUpdateStatus | string>();
  for (const id of new Set(o.answers.map((a) => a.workflowId))) results.set(id, await resultOf(o.client, id));
  out['hook answers true to the state within 10 s'] = untrueAnswers(o.answers, results, o.aborted);

  // Every run closed, or the slots workflow waiting with nobody in line; no failed workflow task; short histories.
  const unsettled: string[] = [];
  const taskFailures: string[] = [];
  const long: string[] = [];
  for await (const w of o.client.workflow.list()) {
    const isSlots = w.workflowId.startsWith('machine-update-slots/');
    if (w.status.name === 'RUNNING' && !isSlots) unsettled.push(`${w.workflowId} (${w.runId}) still running`);
    if (w.status.name !== 'RUNNING' && w.status.name !== 'COMPLETED' && w.status.name !== 'CONTINUED_AS_NEW')
      unsettled.push(`${w.workflowId} (${w.runId}) ${w.status.name}`);
    const history = await o.client.workflow.getHandle(w.workflowId, w.runId).fetchHistory();
    const events = history.events ?? [];
    if (events.length > MAX_HISTORY_EVENTS) long.push(`${w.workflowId} (${w.runId}): ${events.length} events`);
    // UnhandledCommand is Temporal's race of a signal arriving while the task completes or continues
    // as new: the server refuses that task and the next one carries the signal (not a stuck task).
    const failed = events.filter(
      (e) =>
        e.eventType === EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED &&
        e.workflowTaskFailedEventAttributes?.cause !== UNHANDLED_COMMAND,
    );
    if (failed.length > 0)
      taskFailures.push(
        `${w.workflowId} (${w.runId}): ${failed.length} failed workflow task(s), first: ${failed[0]!.workflowTaskFailedEventAttributes?.failure?.message}`,
      );
  }
  out['every workflow closed or waiting on purpose'] = unsettled;
  out['no failing workflow task'] = taskFailures;
  out[`no history over ${MAX_HISTORY_EVENTS} events`] = long;

  // A succeeded update's request (and Job, for its TTL) stays as its record; anything else is left behind.
  const custom = o.wl.kc.makeApiClient(CustomObjectsApi);
  const jobs = await o.wl.kc.makeApiClient(BatchV1Api).listJobForAllNamespaces({ labelSelector: MANAGED_BY_SELECTOR });
  const requests = (await custom.listClusterCustomObject({
    group: NODE_UPGRADE_GROUP,
    version: NODE_UPGRADE_VERSION,
    plural: NODE_UPGRADE_PLURAL,
  })) as { items: { metadata: { namespace: string; name: string; uid: string }; status?: { phase?: string } }[] };
  const owners = new Set([...requests.items.map((r) => r.metadata.uid), ...jobs.items.map((j) => j.metadata?.uid)]);
  const secrets = await o.wl.core.listSecretForAllNamespaces({ labelSelector: MANAGED_BY_SELECTOR });
  out['no Job, NodeUpgradeRequest or files Secret left'] = [
    ...jobs.items
      .filter((j) => !j.status?.succeeded)
      .map((j) => `Job ${j.metadata?.namespace}/${j.metadata?.name} (not succeeded)`),
    ...requests.items
      .filter((r) => r.status?.phase !== 'Succeeded')
      .map((r) => `NodeUpgradeRequest ${r.metadata.namespace}/${r.metadata.name} (${r.status?.phase ?? 'no status'})`),
    ...secrets.items
      .filter((x) => !(x.metadata?.ownerReferences ?? []).some((ref) => owners.has(ref.uid)))
      .map((x) => `Secret ${x.metadata?.namespace}/${x.metadata?.name} (no Job or request owns it)`),
  ];
  return out;
}

export const broken = (inv: Invariants) => Object.entries(inv).filter(([, cases]) => cases.length > 0);
