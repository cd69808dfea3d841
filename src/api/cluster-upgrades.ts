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
// The reads of a run are upgrade-runs.ts. Every write (start, update, signal)
// first passes the call's request check (request-checks.ts), once per call: an
// answer read from the view reads no Kubernetes. The other lifecycle hooks
// (create, control plane initialized, delete) are cluster-lifecycle.ts.
import {
  WorkflowExecutionAlreadyStartedError,
  WorkflowNotFoundError,
  WorkflowUpdateFailedError,
  type Client,
} from '@temporalio/client';
import { PolicyError } from '../domain/policy-keys.ts';
import { policyHash, resolveUpgradePolicy } from '../domain/upgrade-policy.ts';
import {
  DEFAULT_WAIT_RETRY_AFTER_MAX_SECONDS,
  firstGate,
  waitingRetryAfterSeconds,
  waitRetryAfterMaxSeconds,
} from '../domain/upgrade-schedule.ts';
import { tryParseVersion } from '../domain/versions.ts';
import {
  clusterUpgradeWorkflowId,
  gateKey,
  MAX_GATES_PER_UPGRADE,
  queuedGate,
  tooManyGatesMessage,
  type ClusterRef,
  type ClusterUpgradeInput,
  type ClusterUpgradeMemo,
  type Gate,
  type HookCall,
  type UpgradeHook,
  type UpgradePolicy,
} from '../model/cluster-upgrade.ts';
import { recordHookUpdate, updatePolicySignal } from '../workflows/messages.ts';
import { FLEET_ROLLOUT_ANNOTATION } from '../model/fleet-rollout.ts';
import {
  ClusterName,
  ClusterNamespace,
  FleetRollout,
  TargetVersion,
  UpgradePhase,
} from '../model/search-attributes.ts';
import { workflowTypes } from '../model/workflow-types.ts';
import { buildInfo } from '../version.ts';
import { BackgroundRecorder } from './background-recorder.ts';
import type { Cluster } from './contract.ts';
import { HookFailure } from './errors.ts';
import type { HookContext, HookImplementation } from './hook-route.ts';
import { clusterRef, createClusterLifecycleHandlers } from './cluster-lifecycle.ts';
import type { LifecycleHandlers } from './routes/lifecycle.ts';
import { grpcStatus } from '../platform/temporal/grpc-status.ts';
import { withinDeadline } from './temporal-calls.ts';
import { RecentKeys } from './recent-keys.ts';
import { clusterUpgradeRule, type RequestChecks } from './request-checks.ts';
import { describeUpgradeRun, internalErrorOf, listRunningUpgrades, withinHookDeadline } from './upgrade-runs.ts';
import { UpgradeViews, type RunView, type UpgradeViewsOptions } from './upgrade-views.ts';
import { clusterUpgradeMemo, memoValue } from '../platform/temporal/memo.ts';

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

/** The cluster an upgrade hook is about, and the fleet rollout that changed its version (if one did). */
type UpgradeTarget = Required<ClusterRef> & { rollout?: string };

export type ClusterUpgradeHandlers = LifecycleHandlers & { views: UpgradeViews };

type RetryResult = { status: 'Success' | 'Failure'; message?: string; retryAfterSeconds: number };

/**
 * A gate's answer. A Waiting gate answers retryAfterSeconds = the time left, at most `capSeconds`,
 * when it waits for a time it knows and `policy` is the one the run holds (the memo's hash is the
 * call's, or the run was just started with it); else the gate's own (10 s). The message is the
 * gate's: deterministic for a state, only the number changes from call to call.
 */
function answer(gate: Gate, wait?: { call: HookCall; capSeconds: number }): RetryResult {
  if (gate.state === 'Open') return { status: 'Success', message: gate.message, retryAfterSeconds: 0 };
  if (gate.state === 'Failed') return { status: 'Failure', message: gate.message, retryAfterSeconds: 0 };
  const retryAfterSeconds = wait
    ? waitingRetryAfterSeconds(
        wait.call.policy,
        { ...gate, hook: wait.call.hook, version: wait.call.version },
        Date.now(),
        wait.capSeconds,
      )
    : Math.max(1, gate.retryAfterSeconds);
  return { status: 'Success', message: gate.message, retryAfterSeconds };
}

/**
 * The gate as CAPI is told it. BeforeClusterUpgrade is the first step, so it is never queued behind
 * another: until the workflow's first task replaced the gate it recorded, it says what the upgrade
 * will wait for first ("queued behind the steps before it" would be wrong: there are none).
 */
function shown(gate: Gate, call: HookCall): Gate {
  return call.hook === 'BeforeClusterUpgrade' && gate.state === 'Waiting' && gate.message === queuedGate(call).message
    ? firstGate(call, Date.now())
    : gate;
}

const gateCount = (memo: ClusterUpgradeMemo): number => Object.keys(memo.gates).length;

const failure = (message: string): RetryResult => ({ status: 'Failure', message, retryAfterSeconds: 0 });

function requireVersion(field: string, value: string): string {
  if (!tryParseVersion(value).ok)
    throw new HookFailure(`${field} ${JSON.stringify(value)} is not a Kubernetes version`);
  return value;
}

function policyFor(request: { cluster: Cluster }, ctx: HookContext): UpgradePolicy {
  const resolved = resolveUpgradePolicy({
    settings: ctx.settings,
    annotations: request.cluster.metadata.annotations,
    namespace: request.cluster.metadata.namespace,
  });
  if (!resolved.ok) throw new HookFailure(resolved.message);
  return resolved.policy;
}

const targetOf = (cluster: Cluster, fallback: string): string =>
  requireVersion('cluster.spec.topology.version', cluster.spec?.topology?.version ?? fallback);
const steps = (list?: { version: string }[]) => (list ?? []).map((s) => s.version);

/** The fields of the upgrade hooks' requests (schema-validated: Before* carry from/to, After* a version). */
interface UpgradeHookRequest {
  cluster: Cluster;
  fromKubernetesVersion?: string;
  toKubernetesVersion?: string;
  kubernetesVersion?: string;
  controlPlaneUpgrades?: { version: string }[];
  workersUpgrades?: { version: string }[];
}

/** The call an upgrade hook's request records, and the cluster it is about (400 or Failure when unreadable). */
function hookCallOf(
  hook: UpgradeHook,
  r: UpgradeHookRequest,
  ctx: HookContext,
): { target: UpgradeTarget; call: HookCall } {
  const ref = clusterRef(r.cluster);
  const before = hook.startsWith('Before');
  const version = before
    ? requireVersion('toKubernetesVersion', r.toKubernetesVersion ?? '')
    : requireVersion('kubernetesVersion', r.kubernetesVersion ?? '');
  if (before) requireVersion('fromKubernetesVersion', r.fromKubernetesVersion ?? '');
  // The cluster-wide hooks name the whole upgrade's target; step hooks take it from the Cluster.
  const target =
    hook === 'BeforeClusterUpgrade' || hook === 'AfterClusterUpgrade' ? version : targetOf(r.cluster, version);
  const policy = policyFor(r, ctx);
  const call: HookCall = {
    hook,
    version,
    targetVersion: target,
    ...(before && r.fromKubernetesVersion ? { fromVersion: r.fromKubernetesVersion } : {}),
    controlPlaneUpgrades: steps(r.controlPlaneUpgrades),
    workersUpgrades: steps(r.workersUpgrades),
    policy,
    policyHash: policyHash(policy),
  };
  const rollout = r.cluster.metadata.annotations?.[FLEET_ROLLOUT_ANNOTATION];
  return { target: { ...ref, ...(rollout ? { rollout } : {}) }, call };
}

/** The cap of a known wait's retryAfterSeconds for this call (Failure naming a bad setting). */
function waitCapOf(ctx: HookContext, fallback: number): number {
  try {
    return waitRetryAfterMaxSeconds(ctx.settings, fallback);
  } catch (err) {
    if (err instanceof PolicyError) throw new HookFailure(err.message);
    throw err;
  }
}

/** How long a sent policy signal is remembered: well past the time a kept answer or a List can lag. */
const POLICY_SIGNAL_MEMORY_MS = 30_000;

/** The start memo field naming the build (version) of the api that started the run. */
export const BUILD_MEMO_KEY = 'build';

export function createClusterUpgradeHandlers(opts: ClusterUpgradeBackendOptions): ClusterUpgradeHandlers {
  const { client, taskQueue, checks } = opts;
  const log = opts.log ?? { warn: () => {}, error: () => {} };
  const recorder = opts.recorder ?? new BackgroundRecorder({ log });
  const version = opts.version ?? buildInfo().version;
  const waitCap = opts.waitRetryAfterMaxSeconds ?? DEFAULT_WAIT_RETRY_AFTER_MAX_SECONDS;

  const views = new UpgradeViews({
    describe: describeUpgradeRun(client),
    listRunning: listRunningUpgrades(client),
    log,
    ...opts.views,
  });
  /** The internal-error Failure when the run is running and its workflow task keeps failing, else undefined. */
  const internalError = async (workflowId: string, run: RunView | undefined): Promise<RetryResult | undefined> => {
    const message = await internalErrorOf(client, workflowId, run);
    return message === undefined ? undefined : failure(message);
  };
  const policySignals = new RecentKeys(POLICY_SIGNAL_MEMORY_MS);

  /**
   * Starts a run with this call as its first: one round trip that no worker has to answer (the run
   * records the call in its first task), answered "queued". `replacing` names a closed run this one
   * replaces; without it a closed run refuses the start (WorkflowExecutionAlreadyStartedError) and
   * the caller reads it. A run another replica started first is kept (this call comes again).
   */
  const start = async (
    target: UpgradeTarget,
    call: HookCall,
    checked: () => Promise<void>,
    replacing?: { previousRunId?: string },
  ): Promise<Gate> => {
    await checked();
    const { rollout, ...cluster } = target;
    const workflowId = clusterUpgradeWorkflowId(cluster);
    const input: ClusterUpgradeInput = {
      cluster,
      firstCall: call,
      ...(replacing?.previousRunId ? { previousRunId: replacing.previousRunId } : {}),
    };
    views.invalidate(workflowId);
    await client.workflow.start(workflowTypes.clusterUpgrade, {
      workflowId,
      taskQueue,
      args: [input],
      workflowIdConflictPolicy: 'USE_EXISTING',
      workflowIdReusePolicy: replacing ? 'ALLOW_DUPLICATE' : 'REJECT_DUPLICATE',
      memo: { [BUILD_MEMO_KEY]: version },
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
  };

  /** The answer once a write was refused as a repeat (another replica recorded the call first). */
  const answerFresh = async (workflowId: string, call: HookCall, capSeconds: number): Promise<RetryResult> => {
    const again = memoValue(clusterUpgradeMemo, (await views.fresh(workflowId))?.memo);
    // Another target's halt is the superseded run winding down (its abort), not this call's answer.
    if (again?.halted && again.targetVersion === call.targetVersion) return failure(again.halted);
    const gate = again?.gates[gateKey(call.hook, call.version)];
    // Refused because the upgrade holds all the gates it may: never "queued" for ever.
    if (!gate && again?.targetVersion === call.targetVersion && gateCount(again) >= MAX_GATES_PER_UPGRADE)
      return failure(tooManyGatesMessage(call));
    const wait = again?.policyHash === call.policyHash ? { call, capSeconds } : undefined;
    return answer(shown(gate ?? queuedGate(call), call), wait);
  };

  /** Answers from what is kept (`kept`) or from a describe made now (`fresh`). */
  const answerFrom = async (
    cluster: UpgradeTarget,
    call: HookCall,
    ctx: HookContext,
    read: 'kept' | 'fresh',
    checked: () => Promise<void>,
    capSeconds: number,
  ): Promise<RetryResult> => {
    const workflowId = clusterUpgradeWorkflowId(cluster);
    const key = gateKey(call.hook, call.version);
    // The run holds this call's policy: it started with it, or its memo carries the call's hash.
    const wait = { call, capSeconds };
    let run: RunView | undefined;
    try {
      // No run (kept: none the List of polled ids shows running, none seen here): most likely a new
      // upgrade, so start it; a closed run refuses the start and is read below.
      run = await withinHookDeadline(read === 'kept' ? views.get(workflowId) : views.fresh(workflowId), ctx);
      if (!run) return answer(await start(cluster, call, checked), wait);
    } catch (err) {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
      // A closed run (the List does not show those): read it and answer below.
      run = await withinHookDeadline(views.fresh(workflowId), ctx);
      if (!run) throw err;
    }
    const memo = memoValue(clusterUpgradeMemo, run.memo);
    if (!run.running) {
      if (run.status === 'COMPLETED' && memo?.phase === 'Upgraded' && memo.targetVersion === call.targetVersion)
        return { status: 'Success', message: `upgrade to ${memo.targetVersion} completed`, retryAfterSeconds: 0 };
      // A finished upgrade to another target is the past; any other close must not be answered from.
      const replaced = run.status === 'COMPLETED' && memo?.phase === 'Upgraded' ? undefined : run.runId;
      return answer(await start(cluster, call, checked, replaced ? { previousRunId: replaced } : {}), wait);
    }
    const broken = await internalError(workflowId, run);
    if (broken) return broken;
    if (memo && memo.targetVersion === call.targetVersion) {
      if (
        call.policyHash &&
        memo.policyHash &&
        call.policyHash !== memo.policyHash &&
        !policySignals.recent(`${run.runId}/${call.policyHash}`)
      ) {
        // Changed annotations or settings: one signal, then the memo carries the new hash. A memo
        // read before the workflow took it (a lagging List) does not send the same one again.
        await checked();
        views.invalidate(workflowId);
        await client.workflow
          .getHandle(workflowId, run.runId)
          .signal(updatePolicySignal, { policy: call.policy, policyHash: call.policyHash });
        policySignals.add(`${run.runId}/${call.policyHash}`);
      }
      if (memo.halted) return failure(memo.halted);
      const gate = memo.gates[key];
      if (gate) return answer(shown(gate, call), call.policyHash === memo.policyHash ? wait : undefined);
      // The workflow would refuse it (its validator): answer so without the round trip.
      if (gateCount(memo) >= MAX_GATES_PER_UPGRADE) return failure(tooManyGatesMessage(call));
    }
    await checked();
    try {
      views.invalidate(workflowId);
      const gate = await client.workflow.getHandle(workflowId).executeUpdate(recordHookUpdate, { args: [call] });
      return answer(shown(gate, call));
    } catch (err) {
      // Rejected as a repeat: another replica recorded it first. The memo has it (or soon will).
      if (err instanceof WorkflowUpdateFailedError) return await answerFresh(workflowId, call, capSeconds);
      // FAILED_PRECONDITION: the server takes no update while the workflow task is failing (a bug);
      // the kept answer did not know yet. Say so, as a describe would have.
      if (grpcStatus(err)?.code === 9) {
        const refused = await internalError(workflowId, await withinHookDeadline(views.fresh(workflowId), ctx));
        if (refused) return refused;
      }
      throw err;
    }
  };

  /**
   * A gate that still waits, answered from what is kept however old (no Temporal call), the view
   * read again behind the answer; undefined when the answer needs a read first: nothing kept, a run
   * that is not running or whose task keeps failing, another target, a halt or abort, a policy the
   * run does not hold yet (a signal to send), a gate not recorded, or one that is not Waiting (an
   * answer that lets CAPI go on is never given from a stale view).
   */
  const fromKept = (cluster: UpgradeTarget, call: HookCall, capSeconds: number): RetryResult | undefined => {
    const workflowId = clusterUpgradeWorkflowId(cluster);
    const run = views.kept(workflowId);
    const memo = memoValue(clusterUpgradeMemo, run?.memo);
    if (!run?.running || run.workflowTaskRetrying || !memo || memo.targetVersion !== call.targetVersion)
      return undefined;
    if (memo.halted || memo.abortRequested || !call.policyHash || call.policyHash !== memo.policyHash) return undefined;
    const gate = memo.gates[gateKey(call.hook, call.version)];
    if (gate?.state !== 'Waiting') return undefined;
    views.refreshBehind(workflowId);
    return answer(shown(gate, call), { call, capSeconds });
  };

  const upgradeHook = async (
    cluster: UpgradeTarget,
    call: HookCall,
    ctx: HookContext,
    capSeconds: number,
  ): Promise<RetryResult> => {
    const kept = fromKept(cluster, call, capSeconds);
    if (kept) return kept;
    const { rollout: _, ...ref } = cluster;
    const checked = checks.before(ctx, clusterUpgradeRule(ref, call.targetVersion));
    return await withinDeadline(client, ctx, async () => {
      try {
        return await answerFrom(cluster, call, ctx, 'kept', checked, capSeconds);
      } catch (err) {
        // What was kept is older than the run: it closed since (a signal or update found no run). Read again.
        if (!(err instanceof WorkflowNotFoundError)) throw err;
        return await answerFrom(cluster, call, ctx, 'fresh', checked, capSeconds);
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
