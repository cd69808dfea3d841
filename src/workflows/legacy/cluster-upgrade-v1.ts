// The cluster upgrade workflow as it was before v2 (no `cluster-upgrade-v2`
// marker in history), kept verbatim so executions started by earlier releases
// replay and finish on the code that started them. Nothing new starts here.
// Delete it once visibility shows no open run without the v2 marker, e.g.
//   temporal workflow list --query 'WorkflowType="clusterUpgradeWorkflow" AND ExecutionStatus="Running" AND TemporalChangeVersion!="cluster-upgrade-v2"'
import {
  allHandlersFinished,
  condition,
  continueAsNew,
  proxyActivities,
  setHandler,
  upsertMemo,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { HealthReport, HealthScope, UpgradeActivities } from '../../activities/upgrade-types.ts';
import { formatDuration } from '../../domain/durations.ts';
import { parseMaintenanceWindow, windowState } from '../../domain/maintenance-window.ts';
import {
  CLUSTER_UPGRADE_MEMO_KEY,
  gateKey,
  MAX_GATES_PER_UPGRADE,
  tooManyGatesMessage,
  GATE_RETRY_AFTER_SECONDS,
  queuedGate,
  type ClusterUpgradeInput,
  type ClusterUpgradeMemo,
  type ClusterUpgradeStatus,
  type ConditionStatus,
  type Gate,
  type HookCall,
  type UpgradeCondition,
  type UpgradePhase,
  type VersionHistory,
} from '../../model/cluster-upgrade.ts';
import { abortSignal, clusterUpgradeStatusQuery, recordHookUpdate, resumeSignal } from '../messages.ts';
import { UpgradePhase as UpgradePhaseAttribute } from '../search-attributes.ts';

const { checkClusterHealth, reserveCapacity, releaseCapacity } = proxyActivities<UpgradeActivities>({
  startToCloseTimeout: '2 minutes',
  retry: { initialInterval: '2 seconds', backoffCoefficient: 2, maximumInterval: '1 minute', maximumAttempts: 20 },
});

/** How long a failed or aborted upgrade waits for `resume` before it ends. */
const HOLD_MS = 7 * 24 * 3_600_000;
const PROBE_INITIAL_MS = 2_000;
const PROBE_MAX_MS = 30_000;

const iso = (ms: number) => new Date(ms).toISOString();

export async function clusterUpgradeWorkflowV1(input: ClusterUpgradeInput): Promise<ClusterUpgradeStatus> {
  const first = input.firstCall;
  const status: ClusterUpgradeStatus = input.carried ?? {
    cluster: input.cluster,
    ...(first.fromVersion ? { fromVersion: first.fromVersion } : {}),
    targetVersion: first.targetVersion,
    phase: 'Pending',
    startTime: iso(Date.now()),
    conditions: [],
    history: [],
    gates: {},
    reservedCapacity: [],
    policy: first.policy,
  };
  /** Calls whose step has not run yet, in arrival order (kept so resume can replay them). */
  const queue: HookCall[] = [...(input.carriedQueue ?? [])];
  let abort: { reason: string; final: boolean } | undefined;
  let resumeRequested = false;
  let superseding: HookCall | undefined;
  let lastMemo = '';
  let lastPhase: UpgradePhase | undefined;

  // ---- state and what the outside sees ------------------------------------------------
  const publish = () => {
    const memo: ClusterUpgradeMemo = {
      targetVersion: status.targetVersion,
      phase: status.phase,
      ...(status.reason ? { reason: status.reason } : {}),
      ...(abort ? { abortRequested: abort.reason } : {}),
      gates: status.gates,
    };
    const text = JSON.stringify(memo);
    // Only real changes reach history: polling must not grow it.
    if (text !== lastMemo) {
      upsertMemo({ [CLUSTER_UPGRADE_MEMO_KEY]: memo });
      lastMemo = text;
    }
    if (status.phase !== lastPhase) {
      upsertSearchAttributes([{ key: UpgradePhaseAttribute, value: status.phase }]);
      lastPhase = status.phase;
    }
  };
  const setGate = (call: Pick<HookCall, 'hook' | 'version'>, state: Gate['state'], message: string) => {
    status.gates[gateKey(call.hook, call.version)] = {
      state,
      message,
      retryAfterSeconds: state === 'Waiting' ? GATE_RETRY_AFTER_SECONDS : 0,
    };
    publish();
  };
  const setCondition = (
    list: UpgradeCondition[],
    type: string,
    conditionStatus: ConditionStatus,
    reason: string,
    message: string,
    probe = false,
  ) => {
    const now = iso(Date.now());
    let c = list.find((x) => x.type === type);
    if (!c) {
      c = { type, status: conditionStatus, reason, message, startTime: now, lastTransitionTime: now };
      list.push(c);
    } else if (c.status !== conditionStatus) c.lastTransitionTime = now;
    c.status = conditionStatus;
    c.reason = reason;
    c.message = message;
    if (probe) c.lastProbeTime = now;
    if (conditionStatus === 'True') c.completeTime = now;
  };
  const versionEntry = (version: string): VersionHistory => {
    let e = status.history.find((h) => h.version === version);
    if (!e) {
      e = { version, phase: 'Upgrading', startTime: iso(Date.now()), conditions: [] };
      status.history.push(e);
    }
    return e;
  };
  const setPhase = (phase: UpgradePhase, reason?: string) => {
    status.phase = phase;
    if (reason === undefined) delete status.reason;
    else status.reason = reason;
    publish();
  };

  // ---- messages ----------------------------------------------------------------------
  const isNew = (call: HookCall): boolean => {
    if (call.targetVersion !== status.targetVersion) return superseding?.targetVersion !== call.targetVersion;
    return !(gateKey(call.hook, call.version) in status.gates);
  };
  const accept = (call: HookCall): Gate => {
    if (call.targetVersion !== status.targetVersion) {
      superseding = call;
      setGate(call, 'Waiting', `${call.hook} ${call.version}: superseding the upgrade to ${status.targetVersion}`);
    } else {
      status.policy = call.policy;
      queue.push(call);
      status.gates[gateKey(call.hook, call.version)] = queuedGate(call);
      publish();
    }
    return status.gates[gateKey(call.hook, call.version)] as Gate;
  };
  setHandler(recordHookUpdate, accept, {
    validator: (call: HookCall) => {
      // Rejected updates leave no trace in history: repeats cost nothing.
      if (!isNew(call)) throw new Error(`${call.hook} ${call.version} is already recorded`);
      if (call.targetVersion === status.targetVersion && Object.keys(status.gates).length >= MAX_GATES_PER_UPGRADE)
        throw new Error(tooManyGatesMessage(call));
    },
  });
  setHandler(abortSignal, (arg) => {
    const reason = arg?.reason?.trim() || 'aborted by operator';
    // A final abort (cluster deletion) is never downgraded by a later operator abort.
    if (!abort?.final) abort = { reason, final: arg?.final === true };
    publish();
  });
  setHandler(resumeSignal, () => {
    resumeRequested = true;
  });
  setHandler(clusterUpgradeStatusQuery, () => status);

  const interrupted = () => abort !== undefined || superseding !== undefined;
  // Read through a function: steps change the phase behind TypeScript's narrowing.
  const failed = () => status.phase === 'Failed';

  // ---- steps -------------------------------------------------------------------------
  const fail = (call: HookCall, reason: string) => {
    setCondition(status.conditions, 'Failed', 'True', 'StepFailed', reason);
    setPhase('Failed', reason);
    for (const [key, gate] of Object.entries(status.gates)) {
      if (gate.state === 'Waiting')
        status.gates[key] = {
          state: 'Failed',
          message: `upgrade to ${status.targetVersion} failed: ${reason}`,
          retryAfterSeconds: 0,
        };
    }
    queue.unshift(call);
    publish();
  };

  /** Waits until the maintenance window (if any) is open; false when interrupted. */
  const awaitWindow = async (call: HookCall): Promise<boolean> => {
    if (!status.policy.maintenanceWindow) return true;
    const parsed = parseMaintenanceWindow(status.policy.maintenanceWindow);
    if (!parsed.ok) return true; // validated by the api before it got here
    for (;;) {
      const state = windowState(Date.now(), parsed.window);
      if (state.open) return true;
      setGate(
        call,
        'Waiting',
        `${call.hook} ${call.version}: waiting for the maintenance window "${parsed.window.text}" (opens ${iso(state.opensAt)})`,
      );
      if (await condition(interrupted, state.opensAt - Date.now())) return false;
    }
  };

  /** Probes until healthy; false when it failed (the upgrade is then Failed) or was interrupted. */
  const probeUntilHealthy = async (
    call: HookCall,
    scope: HealthScope,
    conditions: UpgradeCondition[],
    type: string,
  ): Promise<boolean> => {
    const started = Date.now();
    let delay = PROBE_INITIAL_MS;
    const what =
      scope === 'pre'
        ? 'pre-upgrade health check'
        : `${scope === 'post' ? 'post-upgrade' : scope} health check at ${call.version}`;
    for (;;) {
      const report: HealthReport = await checkClusterHealth({
        cluster: status.cluster,
        scope,
        ...(scope === 'pre' ? {} : { version: call.version }),
        criticalNamespaces: status.policy.criticalNamespaces,
        blockingPdbPolicy: status.policy.blockingPdbPolicy,
      });
      if (report.healthy) {
        setCondition(
          conditions,
          type,
          'True',
          'Passed',
          report.warnings.length ? `passed with warnings: ${report.warnings.join('; ')}` : report.summary,
          true,
        );
        return true;
      }
      setCondition(conditions, type, 'False', 'Waiting', report.summary, true);
      if (Date.now() - started >= status.policy.healthCheckTimeoutMs) {
        fail(
          call,
          `${what} did not pass within ${formatDuration(status.policy.healthCheckTimeoutMs)}: ${report.summary}`,
        );
        return false;
      }
      setGate(call, 'Waiting', `${call.hook} ${call.version}: waiting for the ${what}: ${report.summary}`);
      if (await condition(interrupted, delay)) return false;
      delay = Math.min(delay * 2, PROBE_MAX_MS);
    }
  };

  /** Scheduled + PreHealthCheck: the gate of BeforeClusterUpgrade. */
  const beginUpgrade = async (call: HookCall): Promise<boolean> => {
    const firstSeen = Date.parse(status.startTime);
    const notBefore = status.policy.upgradeAtMs ?? firstSeen;
    const deadline =
      status.policy.commenceWithinMs !== undefined ? notBefore + status.policy.commenceWithinMs : undefined;
    const window = status.policy.maintenanceWindow
      ? parseMaintenanceWindow(status.policy.maintenanceWindow)
      : undefined;
    for (;;) {
      const now = Date.now();
      if (deadline !== undefined && now >= deadline) {
        fail(
          call,
          `the upgrade could not start within ${formatDuration(status.policy.commenceWithinMs ?? 0)} of ${iso(notBefore)}`,
        );
        setCondition(status.conditions, 'Scheduled', 'False', 'CommenceWithinExpired', status.reason ?? '');
        return false;
      }
      let waitUntil: number | undefined;
      let waitingFor = '';
      if (now < notBefore) {
        waitUntil = notBefore;
        waitingFor = `waiting for upgradeAt ${iso(notBefore)}`;
      } else if (window?.ok) {
        const state = windowState(now, window.window);
        if (!state.open) {
          waitUntil = state.opensAt;
          waitingFor = `waiting for the maintenance window "${window.window.text}" (opens ${iso(state.opensAt)})`;
        }
      }
      if (waitUntil === undefined) break;
      setCondition(status.conditions, 'Scheduled', 'False', 'Waiting', waitingFor);
      setGate(call, 'Waiting', `${call.hook} ${call.version}: ${waitingFor}`);
      const wake = Math.min(waitUntil, deadline ?? Infinity);
      if (await condition(interrupted, Math.max(1, wake - now))) return false;
    }
    setCondition(status.conditions, 'Scheduled', 'True', 'StartAllowed', `started at or after ${iso(notBefore)}`);
    setPhase('Upgrading');
    setGate(call, 'Waiting', `${call.hook} ${call.version}: running the pre-upgrade health check`);
    return await probeUntilHealthy(call, 'pre', status.conditions, 'PreHealthCheck');
  };

  const releaseReservedCapacity = async () => {
    if (status.reservedCapacity.length === 0) return;
    await releaseCapacity({ cluster: status.cluster });
    setCondition(
      status.conditions,
      'RemoveExtraNodes',
      'True',
      'Released',
      `released ${status.reservedCapacity.map((r) => `${r.machineDeployment} ${r.reservedReplicas}→${r.originalReplicas}`).join(', ')}`,
    );
    status.reservedCapacity = [];
  };

  /** Runs one call's step; true when its gate opened. */
  const runStep = async (call: HookCall): Promise<boolean> => {
    switch (call.hook) {
      case 'BeforeClusterUpgrade':
        if (!(await beginUpgrade(call))) return false;
        break;
      case 'BeforeControlPlaneUpgrade': {
        if (!(await awaitWindow(call))) return false;
        const entry = versionEntry(call.version);
        setCondition(
          entry.conditions,
          'ControlPlaneUpgraded',
          'Unknown',
          'Upgrading',
          `control plane upgrading to ${call.version}`,
        );
        break;
      }
      case 'AfterControlPlaneUpgrade': {
        const entry = versionEntry(call.version);
        if (!(await probeUntilHealthy(call, 'control-plane', entry.conditions, 'ControlPlaneUpgraded'))) return false;
        break;
      }
      case 'BeforeWorkersUpgrade': {
        if (!(await awaitWindow(call))) return false;
        if (status.policy.capacityReservation > 0 && status.reservedCapacity.length === 0) {
          setGate(
            call,
            'Waiting',
            `${call.hook} ${call.version}: scaling up MachineDeployments by ${status.policy.capacityReservation}`,
          );
          status.reservedCapacity = await reserveCapacity({
            cluster: status.cluster,
            count: status.policy.capacityReservation,
          });
          setCondition(
            status.conditions,
            'ScaleUpExtraNodes',
            'True',
            'Reserved',
            `reserved ${status.reservedCapacity.map((r) => `${r.machineDeployment} ${r.originalReplicas}→${r.reservedReplicas}`).join(', ') || 'nothing (no MachineDeployments)'}`,
          );
        }
        const entry = versionEntry(call.version);
        setCondition(
          entry.conditions,
          'WorkersUpgraded',
          'Unknown',
          'Upgrading',
          `workers upgrading to ${call.version}`,
        );
        break;
      }
      case 'AfterWorkersUpgrade': {
        const entry = versionEntry(call.version);
        if (!(await probeUntilHealthy(call, 'workers', entry.conditions, 'WorkersUpgraded'))) return false;
        break;
      }
      case 'AfterClusterUpgrade': {
        if (!(await probeUntilHealthy(call, 'post', status.conditions, 'PostHealthCheck'))) return false;
        await releaseReservedCapacity();
        const now = iso(Date.now());
        for (const e of status.history) {
          e.phase = 'Upgraded';
          e.completeTime ??= now;
        }
        status.completeTime = now;
        setPhase('Upgraded');
        break;
      }
    }
    setGate(call, 'Open', `${call.hook} ${call.version}: done`);
    return true;
  };

  /** Abort or failure: clean up, then wait for resume (or the end). Returns 'resume' or 'end'. */
  const hold = async (): Promise<'resume' | 'end'> => {
    if (abort) {
      await releaseReservedCapacity();
      setCondition(status.conditions, 'Aborted', 'True', 'Aborted', abort.reason);
      setPhase('Aborted', abort.reason);
      for (const [key, gate] of Object.entries(status.gates)) {
        if (gate.state === 'Waiting')
          status.gates[key] = {
            state: 'Failed',
            message: `upgrade to ${status.targetVersion} aborted: ${abort.reason}`,
            retryAfterSeconds: 0,
          };
      }
      publish();
      if (abort.final) return 'end';
    }
    resumeRequested = false;
    const woke = await condition(() => resumeRequested || superseding !== undefined || abort?.final === true, HOLD_MS);
    if (!woke || abort?.final) {
      await releaseReservedCapacity();
      return 'end';
    }
    if (superseding) return 'resume';
    // Resume: failed gates wait again and their steps run again.
    abort = undefined;
    for (const call of queue) setGate(call, 'Waiting', `${call.hook} ${call.version}: resumed`);
    status.conditions = status.conditions.filter((c) => c.type !== 'Failed' && c.type !== 'Aborted');
    setPhase(
      status.history.length > 0 || status.conditions.some((c) => c.type === 'PreHealthCheck' && c.status === 'True')
        ? 'Upgrading'
        : 'Pending',
    );
    return 'resume';
  };

  // ---- main loop ---------------------------------------------------------------------
  if (!input.carried) {
    // The start may carry the first call as an update too: record it once.
    if (!(gateKey(first.hook, first.version) in status.gates)) accept(first);
    // First seen mid-upgrade (no BeforeClusterUpgrade): the start was not ours to schedule.
    if (first.hook !== 'BeforeClusterUpgrade') {
      setCondition(
        status.conditions,
        'Scheduled',
        'True',
        'AlreadyInProgress',
        'the upgrade was already in progress when first seen',
      );
      setPhase('Upgrading');
    }
  }
  publish();
  for (;;) {
    await condition(() => queue.length > 0 || interrupted() || failed() || workflowInfo().continueAsNewSuggested);
    if (superseding) {
      const next = superseding;
      const reason = `superseded by an upgrade to ${next.targetVersion}`;
      await releaseReservedCapacity();
      setCondition(status.conditions, 'Aborted', 'True', 'Superseded', reason);
      setPhase('Aborted', reason);
      await condition(allHandlersFinished);
      return await continueAsNew<typeof clusterUpgradeWorkflowV1>({ cluster: status.cluster, firstCall: next });
    }
    if (abort || failed()) {
      if ((await hold()) === 'end') {
        status.completeTime = iso(Date.now());
        publish();
        await condition(allHandlersFinished);
        return status;
      }
      continue;
    }
    if (queue.length === 0 && workflowInfo().continueAsNewSuggested) {
      await condition(allHandlersFinished);
      return await continueAsNew<typeof clusterUpgradeWorkflowV1>({
        cluster: status.cluster,
        firstCall: first,
        carried: status,
        carriedQueue: queue,
      });
    }
    const call = queue.shift();
    if (!call) continue;
    const opened = await runStep(call);
    // An interrupted step runs again after a resume; a failed one was put back by fail().
    if (!opened && !failed()) queue.unshift(call);
    if (opened && call.hook === 'AfterClusterUpgrade') {
      await condition(allHandlersFinished);
      return status;
    }
  }
}
