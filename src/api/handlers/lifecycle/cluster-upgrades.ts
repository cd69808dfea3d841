// The upgrade hooks, backed by the cluster upgrade workflow. A call reads the
// upgrade's run from UpgradeViews (kept per process for the upgrades polled
// here, read by a List of the polled ids or a shared describe; no history, no
// worker needed) and answers from what it finds:
//   - a running run: its memo (halted → Failure; a gate → its answer); only a
//     call that brings something new reaches the workflow, as a `recordHook`
//     update whose validator rejects repeats, and a changed policy as one
//     `updatePolicy` signal;
//   - a run whose workflow task keeps failing (a bug): Failure naming the run;
//   - a closed run: completed for this target → Success; closed any other way
//     (terminated, failed, timed out, cancelled, ended by a deletion) or gone
//     (past retention) → a fresh run for this call, recording the old run id;
//   - no run: one start (no describe first when the List of polled ids did not show it running).
// The reads of a run are upgrade-runs.ts; reading a request into a call and a gate
// into an answer is upgrade-hook-calls.ts. Every write (start, update, signal)
// first passes the call's request check (request-checks.ts), once per call: an
// answer read from the view reads no Kubernetes. The other lifecycle hooks
// (create, control plane initialized, delete) are cluster-lifecycle.ts.
import {
  WorkflowExecutionAlreadyStartedError,
  WorkflowNotFoundError,
  WorkflowUpdateFailedError,
  type Client,
} from '@temporalio/client';
import { DEFAULT_WAIT_RETRY_AFTER_MAX_SECONDS, firstGate } from '../../../domain/upgrade-schedule.ts';
import {
  clusterUpgradeWorkflowId,
  gateKey,
  MAX_GATES_PER_UPGRADE,
  queuedGate,
  tooManyGatesMessage,
  type ClusterUpgradeInput,
  type ClusterUpgradeMemo,
  type Gate,
  type HookCall,
  type UpgradeHook,
} from '../../../model/cluster-upgrade.ts';
import { recordHookUpdate, updatePolicySignal } from '../../../workflows/messages.ts';
import {
  ClusterName,
  ClusterNamespace,
  FleetRollout,
  TargetVersion,
  UpgradePhase,
} from '../../../model/search-attributes.ts';
import { workflowTypes } from '../../../model/workflow-types.ts';
import { buildInfo } from '../../../version.ts';
import { BackgroundRecorder } from '../../hooks/background-recorder.ts';
import type { HookContext, HookImplementation } from '../../hooks/hook-route.ts';
import { createClusterLifecycleHandlers } from './cluster-lifecycle.ts';
import type { LifecycleHandlers } from './routes.ts';
import { grpcStatus } from '../../../platform/temporal/grpc-status.ts';
import { withinDeadline } from '../temporal-calls.ts';
import { RecentKeys } from './recent-keys.ts';
import { clusterUpgradeRule, type RequestChecks } from '../request-checks.ts';
import {
  answer,
  failure,
  gateCount,
  hookCallOf,
  shown,
  waitCapOf,
  type RetryResult,
  type UpgradeHookRequest,
  type UpgradeTarget,
} from './upgrade-hook-calls.ts';
import { describeUpgradeRun, internalErrorOf, listRunningUpgrades, withinHookDeadline } from './upgrade-runs.ts';
import { UpgradeViews, type RunView, type UpgradeViewsOptions } from './upgrade-views.ts';
import { clusterUpgradeMemo, memoValue } from '../../../platform/temporal/memo.ts';

export interface ClusterUpgradeBackendOptions {
  client: Client;
  taskQueue: string;
  /** Checked against the management cluster before anything starts or is signalled (or explicitly off). */
  checks: RequestChecks;
  /**
   * The build that starts each run, kept in its start memo (`build`): a start field, not a
   * workflow command, so the AUTO_UPGRADE workflow needs no patch (default: src/version.ts).
   */
  version?: string;
  /** Where BeforeClusterCreate / AfterControlPlaneInitialized are recorded (default: one of our own). */
  recorder?: BackgroundRecorder;
  /**
   * Most retryAfterSeconds of a gate that waits for a time it knows (HOOK_WAIT_RETRY_AFTER_MAX_SECONDS;
   * the setting waitRetryAfterMax wins): default 60.
   */
  waitRetryAfterMaxSeconds?: number;
  /** Tuning of the per-process answer cache (tests); main.ts closes it through `views`. */
  views?: Partial<Omit<UpgradeViewsOptions, 'describe' | 'listRunning' | 'log'>>;
  log?: ConstructorParameters<typeof BackgroundRecorder>[0]['log'];
}

export type ClusterUpgradeHandlers = LifecycleHandlers & { views: UpgradeViews };

/** How long a sent policy signal is remembered: well past the time a kept answer or a List can lag. */
const POLICY_SIGNAL_MEMORY_MS = 30_000;

/** The start memo field naming the build (version) of the api that started the run. */
export const BUILD_MEMO_KEY = 'build';

/** What the upgrade hooks of one api process share. */
interface Backend {
  client: Client;
  taskQueue: string;
  /** The build that starts each run. */
  version: string;
  views: UpgradeViews;
  /** Policy signals sent lately, by run and policy hash. */
  policySignals: RecentKeys;
}

/** One hook call being answered: the upgrade, the call, its request check and its wait cap. */
interface Answering {
  cluster: UpgradeTarget;
  call: HookCall;
  ctx: HookContext;
  /** The call's request check, passed before the first write (once per call). */
  checked: () => Promise<void>;
  capSeconds: number;
}

/** The internal-error Failure when the run is running and its workflow task keeps failing, else undefined. */
async function internalError(
  b: Backend,
  workflowId: string,
  run: RunView | undefined,
): Promise<RetryResult | undefined> {
  const message = await internalErrorOf(b.client, workflowId, run);
  return message === undefined ? undefined : failure(message);
}

/**
 * Starts a run with this call as its first: one round trip that no worker has to answer (the run
 * records the call in its first task), answered "queued". `replacing` names a closed run this one
 * replaces; without it a closed run refuses the start (WorkflowExecutionAlreadyStartedError) and
 * the caller reads it. A run another replica started first is kept (this call comes again).
 */
async function start(b: Backend, a: Answering, replacing?: { previousRunId?: string }): Promise<Gate> {
  await a.checked();
  const { rollout, ...cluster } = a.cluster;
  const { call } = a;
  const workflowId = clusterUpgradeWorkflowId(cluster);
  const input: ClusterUpgradeInput = {
    cluster,
    firstCall: call,
    ...(replacing?.previousRunId ? { previousRunId: replacing.previousRunId } : {}),
  };
  b.views.invalidate(workflowId);
  await b.client.workflow.start(workflowTypes.clusterUpgrade, {
    workflowId,
    taskQueue: b.taskQueue,
    args: [input],
    workflowIdConflictPolicy: 'USE_EXISTING',
    workflowIdReusePolicy: replacing ? 'ALLOW_DUPLICATE' : 'REJECT_DUPLICATE',
    memo: { [BUILD_MEMO_KEY]: b.version },
    typedSearchAttributes: [
      { key: ClusterNamespace, value: cluster.namespace },
      { key: ClusterName, value: cluster.name },
      { key: TargetVersion, value: call.targetVersion },
      { key: UpgradePhase, value: 'Pending' },
      // Started by a fleet rollout's version change: findable with the rollout.
      ...(rollout ? [{ key: FleetRollout, value: rollout }] : []),
    ],
  });
  // What it will wait for first, as the workflow will say it (not "queued": nothing is before it).
  return firstGate(call, Date.now());
}

/** The answer once a write was refused as a repeat (another replica recorded the call first). */
async function answerFresh(b: Backend, workflowId: string, call: HookCall, capSeconds: number): Promise<RetryResult> {
  const again = memoValue(clusterUpgradeMemo, (await b.views.fresh(workflowId))?.memo);
  // Another target's halt is the superseded run winding down (its abort), not this call's answer.
  if (again?.halted && again.targetVersion === call.targetVersion) return failure(again.halted);
  const gate = again?.gates[gateKey(call.hook, call.version)];
  // Refused because the upgrade holds all the gates it may: never "queued" for ever.
  if (!gate && again?.targetVersion === call.targetVersion && gateCount(again) >= MAX_GATES_PER_UPGRADE)
    return failure(tooManyGatesMessage(call));
  const wait = again?.policyHash === call.policyHash ? { call, capSeconds } : undefined;
  return answer(shown(gate ?? queuedGate(call), call), wait);
}

/**
 * The run to answer from (kept: what is kept or a List row; fresh: a describe made now), or the
 * answer when there is none and this call started one.
 */
async function runOrStart(b: Backend, a: Answering, read: 'kept' | 'fresh'): Promise<RunView | RetryResult> {
  const workflowId = clusterUpgradeWorkflowId(a.cluster);
  // The run holds this call's policy: it started with it, or its memo carries the call's hash.
  const wait = { call: a.call, capSeconds: a.capSeconds };
  try {
    // No run (kept: none the List of polled ids shows running, none seen here): most likely a new
    // upgrade, so start it; a closed run refuses the start and is read below.
    const run = await withinHookDeadline(read === 'kept' ? b.views.get(workflowId) : b.views.fresh(workflowId), a.ctx);
    return run ?? answer(await start(b, a), wait);
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    // A closed run (the List does not show those): read it and answer below.
    const run = await withinHookDeadline(b.views.fresh(workflowId), a.ctx);
    if (!run) throw err;
    return run;
  }
}

/** A closed run: Success when it completed this target, else a fresh run replaces it. */
async function answerClosed(b: Backend, a: Answering, run: RunView): Promise<RetryResult> {
  const memo = memoValue(clusterUpgradeMemo, run.memo);
  if (run.status === 'COMPLETED' && memo?.phase === 'Upgraded' && memo.targetVersion === a.call.targetVersion)
    return { status: 'Success', message: `upgrade to ${memo.targetVersion} completed`, retryAfterSeconds: 0 };
  // A finished upgrade to another target is the past; any other close must not be answered from.
  const replaced = run.status === 'COMPLETED' && memo?.phase === 'Upgraded' ? undefined : run.runId;
  const gate = await start(b, a, replaced ? { previousRunId: replaced } : {});
  return answer(gate, { call: a.call, capSeconds: a.capSeconds });
}

/**
 * Changed annotations or settings: one signal, then the memo carries the new hash. A memo read
 * before the workflow took it (a lagging List) does not send the same one again.
 */
async function signalChangedPolicy(b: Backend, a: Answering, run: RunView, memo: ClusterUpgradeMemo): Promise<void> {
  const { call } = a;
  if (!call.policyHash || !memo.policyHash || call.policyHash === memo.policyHash) return;
  if (b.policySignals.recent(`${run.runId}/${call.policyHash}`)) return;
  await a.checked();
  const workflowId = clusterUpgradeWorkflowId(a.cluster);
  b.views.invalidate(workflowId);
  await b.client.workflow
    .getHandle(workflowId, run.runId)
    .signal(updatePolicySignal, { policy: call.policy, policyHash: call.policyHash });
  b.policySignals.add(`${run.runId}/${call.policyHash}`);
}

/** Records the call in the running workflow (a `recordHook` update) and answers with its gate. */
async function recordCall(b: Backend, a: Answering): Promise<RetryResult> {
  const workflowId = clusterUpgradeWorkflowId(a.cluster);
  await a.checked();
  try {
    b.views.invalidate(workflowId);
    const gate = await b.client.workflow.getHandle(workflowId).executeUpdate(recordHookUpdate, { args: [a.call] });
    return answer(shown(gate, a.call));
  } catch (err) {
    // Rejected as a repeat: another replica recorded it first. The memo has it (or soon will).
    if (err instanceof WorkflowUpdateFailedError) return await answerFresh(b, workflowId, a.call, a.capSeconds);
    // FAILED_PRECONDITION: the server takes no update while the workflow task is failing (a bug);
    // the kept answer did not know yet. Say so, as a describe would have.
    if (grpcStatus(err)?.code === 9) {
      const refused = await internalError(b, workflowId, await withinHookDeadline(b.views.fresh(workflowId), a.ctx));
      if (refused) return refused;
    }
    throw err;
  }
}

/** Answers from what is kept (`kept`) or from a describe made now (`fresh`). */
async function answerFrom(b: Backend, a: Answering, read: 'kept' | 'fresh'): Promise<RetryResult> {
  const { call } = a;
  const run = await runOrStart(b, a, read);
  // Not a run but an answer: there was none, and this call started one.
  if (!('runId' in run)) return run;
  if (!run.running) return await answerClosed(b, a, run);
  const broken = await internalError(b, clusterUpgradeWorkflowId(a.cluster), run);
  if (broken) return broken;
  const memo = memoValue(clusterUpgradeMemo, run.memo);
  if (memo && memo.targetVersion === call.targetVersion) {
    await signalChangedPolicy(b, a, run, memo);
    if (memo.halted) return failure(memo.halted);
    const gate = memo.gates[gateKey(call.hook, call.version)];
    if (gate)
      return answer(
        shown(gate, call),
        call.policyHash === memo.policyHash ? { call, capSeconds: a.capSeconds } : undefined,
      );
    // The workflow would refuse it (its validator): answer so without the round trip.
    if (gateCount(memo) >= MAX_GATES_PER_UPGRADE) return failure(tooManyGatesMessage(call));
  }
  return await recordCall(b, a);
}

/**
 * A gate that still waits, answered from what is kept however old (no Temporal call), the view
 * read again behind the answer; undefined when the answer needs a read first: nothing kept, a run
 * that is not running or whose task keeps failing, another target, a halt or abort, a policy the
 * run does not hold yet (a signal to send), a gate not recorded, or one that is not Waiting (an
 * answer that lets CAPI go on is never given from a stale view).
 */
function fromKept(
  views: UpgradeViews,
  cluster: UpgradeTarget,
  call: HookCall,
  capSeconds: number,
): RetryResult | undefined {
  const workflowId = clusterUpgradeWorkflowId(cluster);
  const run = views.kept(workflowId);
  const memo = memoValue(clusterUpgradeMemo, run?.memo);
  if (!run?.running || run.workflowTaskRetrying || !memo || memo.targetVersion !== call.targetVersion) return undefined;
  if (memo.halted || memo.abortRequested || !call.policyHash || call.policyHash !== memo.policyHash) return undefined;
  const gate = memo.gates[gateKey(call.hook, call.version)];
  if (gate?.state !== 'Waiting') return undefined;
  views.refreshBehind(workflowId);
  return answer(shown(gate, call), { call, capSeconds });
}

export function createClusterUpgradeHandlers(opts: ClusterUpgradeBackendOptions): ClusterUpgradeHandlers {
  const { client, taskQueue, checks } = opts;
  const log = opts.log ?? { warn: () => {}, error: () => {} };
  const recorder = opts.recorder ?? new BackgroundRecorder({ log });
  const waitCap = opts.waitRetryAfterMaxSeconds ?? DEFAULT_WAIT_RETRY_AFTER_MAX_SECONDS;
  const views = new UpgradeViews({
    describe: describeUpgradeRun(client),
    listRunning: listRunningUpgrades(client),
    log,
    ...opts.views,
  });
  const b: Backend = {
    client,
    taskQueue,
    version: opts.version ?? buildInfo().version,
    views,
    policySignals: new RecentKeys(POLICY_SIGNAL_MEMORY_MS),
  };

  const upgradeHook = async (cluster: UpgradeTarget, call: HookCall, ctx: HookContext, capSeconds: number) => {
    const kept = fromKept(views, cluster, call, capSeconds);
    if (kept) return kept;
    const { rollout: _, ...ref } = cluster;
    const checked = checks.before(ctx, clusterUpgradeRule(ref, call.targetVersion));
    const a: Answering = { cluster, call, ctx, checked, capSeconds };
    return await withinDeadline(client, ctx, async () => {
      try {
        return await answerFrom(b, a, 'kept');
      } catch (err) {
        // What was kept is older than the run: it closed since (a signal or update found no run). Read again.
        if (!(err instanceof WorkflowNotFoundError)) throw err;
        return await answerFrom(b, a, 'fresh');
      }
    });
  };

  const upgradeHookHandler =
    <H extends UpgradeHook>(hook: H): HookImplementation<H> =>
    async (request, ctx) => {
      const { target, call } = hookCallOf(hook, request as unknown as UpgradeHookRequest, ctx);
      const capSeconds = waitCapOf(ctx, waitCap);
      return (await upgradeHook(target, call, ctx, capSeconds)) as Awaited<ReturnType<HookImplementation<H>>>;
    };

  return {
    views,
    ...createClusterLifecycleHandlers({ client, taskQueue, checks, recorder, views }),
    BeforeClusterUpgrade: upgradeHookHandler('BeforeClusterUpgrade'),
    BeforeControlPlaneUpgrade: upgradeHookHandler('BeforeControlPlaneUpgrade'),
    AfterControlPlaneUpgrade: upgradeHookHandler('AfterControlPlaneUpgrade'),
    BeforeWorkersUpgrade: upgradeHookHandler('BeforeWorkersUpgrade'),
    AfterWorkersUpgrade: upgradeHookHandler('AfterWorkersUpgrade'),
    AfterClusterUpgrade: upgradeHookHandler('AfterClusterUpgrade'),
  };
}
