// The cluster upgrade's data model: plain JSON types and pure helpers shared
// by the api, the workflows and the activities. Nothing here imports Temporal
// or touches the network, so activities can use it without workflow code.
import type { AlertGateStatus, AlertPolicy } from './alerts.ts';
import type { UpgradeHook } from './hooks.ts';

// The hooks an upgrade gates are named in hooks.ts with every other hook.
export { upgradeHooks, type UpgradeHook } from './hooks.ts';

/** Upgrade policy for one cluster, as domain/upgrade-policy.ts resolves it (defaults ← settings ← annotations). */
/** A maintenance freeze: no new step starts between `from` and `to`. */
export interface Freeze {
  /** RFC 3339 as toISOString() writes it (plain JSON: it travels into workflows). */
  from: string;
  to: string;
  reason: string;
}

export interface UpgradePolicy {
  /** The upgrade may not start before this instant (epoch ms). */
  upgradeAtMs?: number;
  /** Recurring windows (`Sat,Sun 02:00 4h; Wed 22:00 1h`) outside of which no new step starts. */
  maintenanceWindow?: string;
  /** IANA zone the windows are read in (domain/calendar.ts); UTC when unset. */
  maintenanceTimeZone?: string;
  /** Periods in which no new step starts, whatever the windows say. */
  maintenanceFreezes?: Freeze[];
  /** Raise UpgradeDelayed when the upgrade has not started this long after upgradeAt (or the first hook). */
  delayedAfterMs?: number;
  /** Fail instead of starting later than this after upgradeAt (or after the first hook). */
  commenceWithinMs?: number;
  /** Extra machines per MachineDeployment while workers upgrade; 0 = off. */
  capacityReservation: number;
  /** How long the extra machines may take to become Ready before the upgrade fails (default 15m). */
  capacityReadyTimeoutMs?: number;
  /** After this long, drains delete PDB-blocked pods instead of evicting them; unset = never. */
  pdbForceDrainTimeoutMs?: number;
  /** Namespaces whose pods must be running for a health check to pass. */
  criticalNamespaces: string[];
  /** Whether a PDB that allows no disruption fails the pre-upgrade check or only warns. */
  blockingPdbPolicy: 'fail' | 'warn';
  /** How long post-step health checks wait for nodes to report Ready at the new version. */
  healthCheckTimeoutMs: number;
  /** The removed-API gate (domain/deprecated-apis.ts); unset = DEFAULT_REMOVED_API_POLICY. */
  removedApiPolicy?: RemovedApiPolicy;
  /**
   * How often readiness is re-checked while the upgrade waits to start; 0 = never. Unset = the
   * default (domain/readiness-recheck.ts), so a policy without it keeps its hash.
   */
  readinessIntervalMs?: number;
  /**
   * Gates overridden for this cluster, why (annotations override-gates / override-reason), and who
   * granted it (the setting gateOverrideNamespaces; absent in policies resolved before grants).
   */
  gateOverride?: { gates: ('alerts' | 'maintenance-window' | 'removed-apis')[]; reason: string; grantedBy?: string };
  /** The alert gate and silences (model/alerts.ts); absent = off. */
  alerts?: AlertPolicy;
}

export type RemovedApiPolicy = 'fail' | 'warn' | 'off';

/**
 * `warn`: the metric is sticky (a request long ago counts until the API server restarts) and
 * reading it needs `get /metrics`, which scoped identities may lack; failing upgrades that ran
 * before on either would be a surprise. `fail` is one setting away.
 */
export const DEFAULT_REMOVED_API_POLICY: RemovedApiPolicy = 'warn';

export interface ClusterRef {
  namespace: string;
  name: string;
  /** metadata.uid: a cluster recreated under the same name is another cluster. Absent in pre-v2 histories. */
  uid?: string;
}

/** Operator abort: `temporal workflow signal --workflow-id … --name abort --input '{"reason":"…"}'`. */
export interface AbortInput {
  reason?: string;
  /** No resume afterwards: the workflow cleans up and ends (cluster deletion). */
  final?: boolean;
}

/** One hook call as the workflow records it: which hook, for which step version. */
export interface HookCall {
  hook: UpgradeHook;
  /** The version the call is about (the step's target, or the version just reached). */
  version: string;
  /** The whole upgrade's target (Cluster spec.topology.version). */
  targetVersion: string;
  /** Current control plane version when known (BeforeClusterUpgrade's from). */
  fromVersion?: string;
  controlPlaneUpgrades?: string[];
  workersUpgrades?: string[];
  /** Policy as resolved for this call; the workflow adopts the newest. */
  policy: UpgradePolicy;
  /** Hash of `policy` (canonical JSON): the api signals a change only when it differs from the memo's. */
  policyHash?: string;
}

/** `updatePolicy` signal: annotations or settings changed while the upgrade runs. */
export interface PolicyUpdate {
  policy: UpgradePolicy;
  policyHash: string;
}

export type GateState = 'Waiting' | 'Open' | 'Failed';

/** What a hook answers for one `hook@version`: all CAPI ever sees of the workflow. */
export interface Gate {
  state: GateState;
  /** Deterministic for a given state: CAPI copies it into conditions. */
  message: string;
  retryAfterSeconds: number;
}

export function gateKey(hook: UpgradeHook, version: string): string {
  return `${hook}@${version}`;
}

/**
 * Upgrade steps one hook request may list (controlPlaneUpgrades, workersUpgrades): one per minor
 * version, as many as GenerateUpgradePlan plans at most (MAX_PLAN_MINORS in domain/upgrade-plan.ts).
 */
export const MAX_UPGRADE_STEPS = 64;

/**
 * Gates one upgrade keeps (memo, status, queue): BeforeClusterUpgrade and AfterClusterUpgrade, and
 * a Before and an After gate per control-plane and per workers step. A call for the same target
 * past it is refused before it reaches history, so no input grows the memo past this (~150 bytes
 * a gate). A call for a new target still supersedes (its run starts with no gates).
 */
export const MAX_GATES_PER_UPGRADE = 2 + 4 * MAX_UPGRADE_STEPS;

/** What a call answers once its upgrade holds MAX_GATES_PER_UPGRADE gates (deterministic: CAPI copies it). */
export function tooManyGatesMessage(call: Pick<HookCall, 'hook' | 'version' | 'targetVersion'>): string {
  return `${call.hook} ${call.version}: the upgrade to ${call.targetVersion} already holds ${MAX_GATES_PER_UPGRADE} hook calls, the most one upgrade may; terminate its workflow to start it over`;
}

/** How often CAPI should come back while a gate is closed. */
export const GATE_RETRY_AFTER_SECONDS = 10;

/** The gate of a call just recorded: the api answers it before the workflow has run, so both spell it here. */
export function queuedGate(call: Pick<HookCall, 'hook' | 'version'>): Gate {
  return {
    state: 'Waiting',
    message: `${call.hook} ${call.version}: queued behind the steps before it`,
    retryAfterSeconds: GATE_RETRY_AFTER_SECONDS,
  };
}

export type UpgradePhase = 'Pending' | 'Upgrading' | 'Upgraded' | 'Failed' | 'Aborted';

export type ConditionStatus = 'True' | 'False' | 'Unknown';

/** One step's condition, after managed-upgrade-operator's UpgradeConfig status. */
export interface UpgradeCondition {
  type: string;
  status: ConditionStatus;
  reason: string;
  message: string;
  startTime?: string;
  completeTime?: string;
  lastProbeTime?: string;
  lastTransitionTime?: string;
}

export interface VersionHistory {
  version: string;
  phase: UpgradePhase;
  startTime?: string;
  completeTime?: string;
  conditions: UpgradeCondition[];
}

export interface ReservedCapacity {
  /** MachineDeployment topology name (or object name) → replicas before and during the reservation. */
  machineDeployment: string;
  originalReplicas: number;
  reservedReplicas: number;
}

/** The `status` query: the whole story of one upgrade. */
export interface ClusterUpgradeStatus {
  cluster: ClusterRef;
  fromVersion?: string;
  targetVersion: string;
  phase: UpgradePhase;
  /** Why the upgrade failed or was aborted. */
  reason?: string;
  /** The step that failed (`hook version`), which `retry` runs again. */
  failedStep?: string;
  startTime: string;
  completeTime?: string;
  /** Cluster-wide steps: Scheduled, PreHealthCheck, ScaleUpExtraNodes, RemoveExtraNodes, PostHealthCheck. */
  conditions: UpgradeCondition[];
  /** One entry per version the cluster passes through. */
  history: VersionHistory[];
  gates: Record<string, Gate>;
  reservedCapacity: ReservedCapacity[];
  policy: UpgradePolicy;
  policyHash?: string;
  /** Policy changes that arrived after the step they would have changed had started (recorded, not applied back). */
  policyChanges?: { at: string; step: string; policyHash: string }[];
  /** The run this one replaced (terminated, failed or timed out under CAPI). */
  previousRunId?: string;
  /**
   * Repeated waits in progress (health checks, extra machines), by gate: when the first check ran
   * and the current backoff. Carried when a run continues as new, so a wait's timeout counts from
   * its first check across runs.
   */
  waits?: Record<string, { since: string; delayMs: number }>;
  /** What holds the start or a step's start by the calendar (policy maintenance*, delayedAfter), while it holds. */
  schedule?: UpgradeSchedule;
  /** The removed-API gate's last verdict (checked before the control plane moves). */
  removedApis?: RemovedApiVerdict;
  /** Gates an override let through, each once per gate and step (newest last). */
  overrides?: GateOverrideRecord[];
  /** What the alert gate holds and the silence open for the running step (model/alerts.ts). */
  alerts?: AlertGateStatus;
  /** The last readiness check made while the upgrade waited to start (policy readinessInterval). */
  readiness?: UpgradeReadiness;
}

export type ReadinessVerdict = 'Ready' | 'Blocked' | 'Unknown';

/** A readiness report as the upgrade keeps it (domain/readiness.ts makes it). */
export interface UpgradeReadiness {
  verdict: ReadinessVerdict;
  /** When the checks ran (each re-check replaces the report). */
  checkedAt: string;
  checks: { check: string; verdict: ReadinessVerdict; message: string }[];
}

export interface RemovedApiVerdict {
  policy: RemovedApiPolicy;
  /** passed: nothing the chain removes; held: policy fail; warned: policy warn; overridden; unreadable: /metrics could not be read. */
  result: 'passed' | 'held' | 'warned' | 'overridden' | 'unreadable';
  message: string;
}

export interface GateOverrideRecord {
  gate: string;
  reason: string;
  /** Who granted the override (e.g. `setting gateOverrideNamespaces`); absent before grants existed. */
  grantedBy?: string;
  /** `hook version` of the step it let through. */
  step: string;
  at: string;
}

/** The `status` query's view of the calendar gates (docs/configuration.md). */
export interface UpgradeSchedule {
  /** When the maintenance calendar next lets a step start; absent while it lets them. */
  nextWindowOpens?: string;
  /** The freeze holding the upgrade (or that pushed the next opening later). */
  freeze?: { from: string; to: string; reason: string };
  /** Set from `upgradeAt` + `delayedAfter` while the upgrade has not started (UpgradeDelayed). */
  delayedSince?: string;
}

/** The memo: what hook handlers read with `describe`, without a worker and without adding history. */
export interface ClusterUpgradeMemo {
  targetVersion: string;
  phase: UpgradePhase;
  reason?: string;
  abortRequested?: string;
  /** Set while the upgrade is Aborted or Failed: every hook of this upgrade answers Failure with it. */
  halted?: string;
  /** Since when the upgrade is delayed (not started `delayedAfter` past `upgradeAt`). */
  delayed?: string;
  policyHash?: string;
  gates: Record<string, Gate>;
  /** Gates overridden so far, `<gate>: <reason>` (set once one was). */
  overrides?: string[];
  /** The last readiness verdict while the upgrade waits to start, each check's, and what blocks it (bounded; no time). */
  readiness?: { verdict: ReadinessVerdict; checks?: Record<string, ReadinessVerdict>; blocked?: string[] };
}

export const CLUSTER_UPGRADE_MEMO_KEY = 'upgrade';

export interface ClusterUpgradeInput {
  cluster: ClusterRef;
  /** The call that started it (recorded like any later call). */
  firstCall: HookCall;
  /** Set when a run continues as new: the state to pick up. */
  carried?: ClusterUpgradeStatus;
  carriedQueue?: HookCall[];
  /** Set when this run replaces one that closed without completing. */
  previousRunId?: string;
  /** History length at which a run continues as new (default 1,500; tests set it low). */
  continueAsNewAtEvents?: number;
}

/** Kubernetes names: a namespace is a DNS-1123 label, a name a DNS-1123 subdomain; neither holds `/`. */
export const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
export const DNS1123_SUBDOMAIN = /^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/**
 * `cluster-upgrade/<namespace>/<name>/<uid>`: unambiguous because validated names hold no `/`,
 * and a cluster deleted and recreated under the same name gets another id.
 */
export function clusterUpgradeWorkflowId(cluster: Required<ClusterRef>): string {
  return `cluster-upgrade/${cluster.namespace}/${cluster.name}/${cluster.uid}`;
}

/** Messages CAPI copies into conditions: it truncates them at 512 characters, so we do it deterministically first. */
export const CAPI_MESSAGE_LIMIT = 512;

export function capiMessage(text: string): string {
  if (text.length <= CAPI_MESSAGE_LIMIT) return text;
  return `${text.slice(0, CAPI_MESSAGE_LIMIT - 3)}...`;
}

/** What every hook of an aborted upgrade answers. */
export function abortedMessage(targetVersion: string, reason: string): string {
  return capiMessage(`upgrade to ${targetVersion} aborted: ${reason}; signal "resume" to continue`);
}

/** What every hook of a failed upgrade answers. */
export function failedMessage(targetVersion: string, step: string, cause: string): string {
  return capiMessage(
    `upgrade to ${targetVersion} failed at ${step}: ${cause}; fix the cause, then signal "retry" to run the step again`,
  );
}

/** The message every hook of an upgrade answers while it is held (Aborted or Failed), else undefined. */
export function haltedMessage(
  s: Pick<ClusterUpgradeStatus, 'phase' | 'targetVersion' | 'reason' | 'failedStep'>,
): string | undefined {
  if (s.phase === 'Aborted') return abortedMessage(s.targetVersion, s.reason ?? 'aborted by operator');
  if (s.phase === 'Failed') return failedMessage(s.targetVersion, s.failedStep ?? 'a step', s.reason ?? 'unknown');
  return undefined;
}
