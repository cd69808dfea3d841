// Typed memo readers. A workflow's memo comes back from `describe` and from visibility lists as
// untyped JSON; each kind has one decoder here that checks the shape its workflow publishes
// (src/workflows/*/state.ts) instead of casting it. A memo that is absent reads as undefined; one
// of the wrong shape (an older or foreign writer, a hand-set memo) is a MalformedMemo naming the
// first field that does not fit, which the readers turn into undefined: no memo to go by.
import {
  CLUSTER_UPGRADE_MEMO_KEY,
  type ClusterUpgradeMemo,
  type GateState,
  type ReadinessVerdict,
  type UpgradePhase,
} from '../../model/cluster-upgrade.ts';
import { FLEET_ROLLOUT_MEMO_KEY, type FleetRolloutMemo, type RolloutPhase } from '../../model/fleet-rollout.ts';
import {
  MACHINE_UPDATE_MEMO_KEY,
  MACHINE_UPDATE_SLOTS_MEMO_KEY,
  type MachineUpdateMemo,
  type MachineUpdatePhase,
  type MachineUpdateSlotsMemo,
  type MachineUpdateStep,
} from '../../model/machine-update.ts';

/** A memo that is there but not of its kind's shape. */
export class MalformedMemo extends Error {
  override readonly name = 'MalformedMemo';
  /** The memo key. */
  readonly key: string;
  /** The first field that does not fit, and how (`phase: not one of …`). */
  readonly problem: string;
  constructor(key: string, problem: string) {
    super(`memo ${key}: ${problem}`);
    this.key = key;
    this.problem = problem;
  }
}

/** One memo kind: the key its workflow publishes under, and the check of its value. */
export interface MemoKind<T> {
  key: string;
  /** The value under `key`: undefined when absent, the typed memo, or what does not fit. */
  decode(value: unknown): T | undefined | MalformedMemo;
}

/** The memo of `kind` in a workflow's memo map (as `describe` or a list gives it); undefined when absent or malformed. */
export function readMemo<T>(kind: MemoKind<T>, memo: Record<string, unknown> | undefined): T | undefined {
  return memoValue(kind, memo?.[kind.key]);
}

/** A memo value already taken from its key (an upgrade view keeps only that): undefined when absent or malformed. */
export function memoValue<T>(kind: MemoKind<T>, value: unknown): T | undefined {
  const decoded = kind.decode(value);
  return decoded instanceof MalformedMemo ? undefined : decoded;
}

// ---- the field checks: each says what does not fit, or undefined ---------------------------------

type Check = (v: unknown) => string | undefined;
type Fields = Record<string, readonly [Check, 'required' | 'optional']>;

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

const string: Check = (v) => (typeof v === 'string' ? undefined : 'not a string');
const number: Check = (v) => (typeof v === 'number' && Number.isFinite(v) ? undefined : 'not a number');
const boolean: Check = (v) => (typeof v === 'boolean' ? undefined : 'not a boolean');
/** One of the keys of `values` (a Record over a union, so the compiler keeps the list whole). */
const oneOf =
  (values: Record<string, true>): Check =>
  (v) =>
    typeof v === 'string' && Object.hasOwn(values, v) ? undefined : `not one of ${Object.keys(values).join(', ')}`;
const arrayOf =
  (item: Check): Check =>
  (v) => {
    if (!Array.isArray(v)) return 'not an array';
    const bad = v.map(item).findIndex((p) => p !== undefined);
    return bad < 0 ? undefined : `[${bad}] ${item(v[bad])}`;
  };
const recordOf =
  (item: Check): Check =>
  (v) => {
    if (!isRecord(v)) return 'not an object';
    for (const [k, x] of Object.entries(v)) {
      const p = item(x);
      if (p) return `${k}: ${p}`;
    }
    return undefined;
  };
const object =
  (fields: Fields): Check =>
  (v) => {
    if (!isRecord(v)) return 'not an object';
    for (const [name, [check, presence]] of Object.entries(fields)) {
      if (v[name] === undefined) {
        if (presence === 'required') return `${name}: missing`;
        continue;
      }
      const p = check(v[name]);
      if (p) return `${name}: ${p}`;
    }
    return undefined;
  };

/** A memo kind whose value must pass `check`. */
function memoKind<T>(key: string, check: Check): MemoKind<T> {
  // The api reads the same kept memo object on every poll until its view is refreshed: it is
  // checked once per object, not once per poll.
  const checked = new WeakMap<object, string | undefined>();
  return {
    key,
    decode(value) {
      if (value === undefined || value === null) return undefined;
      let problem: string | undefined;
      if (typeof value === 'object') {
        if (checked.has(value)) problem = checked.get(value);
        else checked.set(value, (problem = check(value)));
      } else problem = check(value);
      return problem ? new MalformedMemo(key, problem) : (value as T);
    },
  };
}

const req = (c: Check) => [c, 'required'] as const;
const opt = (c: Check) => [c, 'optional'] as const;

// ---- the kinds ---------------------------------------------------------------------------------

const UPGRADE_PHASES: Record<UpgradePhase, true> = {
  Pending: true,
  Upgrading: true,
  Upgraded: true,
  Failed: true,
  Aborted: true,
};
const GATE_STATES: Record<GateState, true> = { Waiting: true, Open: true, Failed: true };
const READINESS_VERDICTS: Record<ReadinessVerdict, true> = { Ready: true, Blocked: true, Unknown: true };

export const clusterUpgradeMemo: MemoKind<ClusterUpgradeMemo> = memoKind(
  CLUSTER_UPGRADE_MEMO_KEY,
  object({
    targetVersion: req(string),
    phase: req(oneOf(UPGRADE_PHASES)),
    reason: opt(string),
    abortRequested: opt(string),
    halted: opt(string),
    delayed: opt(string),
    policyHash: opt(string),
    gates: req(
      recordOf(object({ state: req(oneOf(GATE_STATES)), message: req(string), retryAfterSeconds: req(number) })),
    ),
    overrides: opt(arrayOf(string)),
    readiness: opt(
      object({
        verdict: req(oneOf(READINESS_VERDICTS)),
        checks: opt(recordOf(oneOf(READINESS_VERDICTS))),
        blocked: opt(arrayOf(string)),
      }),
    ),
  }),
);

const MACHINE_UPDATE_PHASES: Record<MachineUpdatePhase, true> = {
  Updating: true,
  Succeeded: true,
  Failed: true,
  Aborted: true,
};
const MACHINE_UPDATE_STEPS: Record<MachineUpdateStep, true> = {
  Queued: true,
  Preflight: true,
  BlockingPods: true,
  Cordon: true,
  Drain: true,
  UpgradeNode: true,
  WaitForNode: true,
  Uncordon: true,
  PostUpdateDelay: true,
  Done: true,
};

export const machineUpdateMemo: MemoKind<MachineUpdateMemo> = memoKind(
  MACHINE_UPDATE_MEMO_KEY,
  object({
    phase: req(oneOf(MACHINE_UPDATE_PHASES)),
    step: req(oneOf(MACHINE_UPDATE_STEPS)),
    message: req(string),
    reason: opt(string),
    abortRequested: opt(string),
    retryNotBefore: opt(string),
    retryRequested: opt(boolean),
  }),
);

export const machineUpdateSlotsMemo: MemoKind<MachineUpdateSlotsMemo> = memoKind(
  MACHINE_UPDATE_SLOTS_MEMO_KEY,
  object({ abortRequested: opt(string) }),
);

const ROLLOUT_PHASES: Record<RolloutPhase, true> = {
  Running: true,
  Paused: true,
  WaitingForApproval: true,
  Soaking: true,
  Completed: true,
  Stopped: true,
  Aborted: true,
};

export const fleetRolloutMemo: MemoKind<FleetRolloutMemo> = memoKind(
  FLEET_ROLLOUT_MEMO_KEY,
  object({
    phase: req(oneOf(ROLLOUT_PHASES)),
    message: req(string),
    currentWave: opt(number),
    counts: req(
      object({
        pending: req(number),
        upgrading: req(number),
        done: req(number),
        failed: req(number),
        skipped: req(number),
        deferred: opt(number),
      }),
    ),
    nextWave: opt(object({ wave: req(number), holding: req(arrayOf(string)), message: req(string) })),
  }),
);
