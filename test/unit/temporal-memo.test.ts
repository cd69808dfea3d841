// The typed memo readers: each kind's decoder takes the memo its workflow publishes, reads an
// absent one as undefined, and names the first field of a malformed one instead of casting it.
import { describe, expect, it } from '@jest/globals';
import type { ClusterUpgradeMemo } from '../../src/model/cluster-upgrade.ts';
import type { FleetRolloutMemo } from '../../src/model/fleet-rollout.ts';
import type { MachineUpdateMemo } from '../../src/model/machine-update.ts';
import {
  clusterUpgradeMemo,
  fleetRolloutMemo,
  machineUpdateMemo,
  machineUpdateSlotsMemo,
  MalformedMemo,
  memoValue,
  type MemoKind,
  readMemo,
} from '../../src/platform/temporal/memo.ts';

const upgrade: ClusterUpgradeMemo = {
  targetVersion: 'v1.34.0',
  phase: 'Upgrading',
  policyHash: 'abc',
  gates: { 'BeforeClusterUpgrade@v1.34.0': { state: 'Open', message: 'go', retryAfterSeconds: 0 } },
  overrides: ['health: on-call'],
  readiness: { verdict: 'Blocked', checks: { pdbs: 'Blocked' }, blocked: ['pdbs'] },
};
const machine: MachineUpdateMemo = { phase: 'Updating', step: 'Drain', message: 'draining', retryRequested: true };
const rollout: FleetRolloutMemo = {
  phase: 'Soaking',
  message: 'wave 1 soaking',
  currentWave: 1,
  counts: { pending: 3, upgrading: 0, done: 2, failed: 0, skipped: 1, deferred: 1 },
  nextWave: { wave: 2, holding: ['fleet/b'], message: '1 cluster will hold wave 2' },
};

/** The problem a malformed value is reported with (fails the test when it decodes). */
function problemOf(decoded: unknown): string {
  expect(decoded).toBeInstanceOf(MalformedMemo);
  return (decoded as MalformedMemo).problem;
}

describe('memo decoders', () => {
  it('decode the memo each workflow publishes, unchanged', () => {
    expect(clusterUpgradeMemo.decode(upgrade)).toBe(upgrade);
    expect(machineUpdateMemo.decode(machine)).toBe(machine);
    expect(fleetRolloutMemo.decode(rollout)).toBe(rollout);
    expect(machineUpdateSlotsMemo.decode({ abortRequested: 'cluster is being deleted' })).toEqual({
      abortRequested: 'cluster is being deleted',
    });
    const bare = { targetVersion: 'v1.34.0', phase: 'Pending', gates: {} };
    expect(clusterUpgradeMemo.decode(bare)).toBe(bare);
  });

  it('read an absent memo as undefined', () => {
    const kinds: MemoKind<unknown>[] = [
      clusterUpgradeMemo,
      machineUpdateMemo,
      fleetRolloutMemo,
      machineUpdateSlotsMemo,
    ];
    for (const kind of kinds) {
      expect(kind.decode(undefined)).toBeUndefined();
      expect(kind.decode(null)).toBeUndefined();
      expect(readMemo(kind, undefined)).toBeUndefined();
      expect(readMemo(kind, { other: {} })).toBeUndefined();
    }
  });

  it('name the first field of a malformed memo', () => {
    expect(problemOf(clusterUpgradeMemo.decode('Upgrading'))).toBe('not an object');
    expect(problemOf(clusterUpgradeMemo.decode([upgrade]))).toBe('not an object');
    expect(problemOf(clusterUpgradeMemo.decode({ ...upgrade, targetVersion: 134 }))).toBe(
      'targetVersion: not a string',
    );
    expect(problemOf(clusterUpgradeMemo.decode({ ...upgrade, phase: 'Done' }))).toBe(
      'phase: not one of Pending, Upgrading, Upgraded, Failed, Aborted',
    );
    const { gates: _, ...noGates } = upgrade;
    expect(problemOf(clusterUpgradeMemo.decode(noGates))).toBe('gates: missing');
    expect(problemOf(clusterUpgradeMemo.decode({ ...upgrade, gates: { g: { state: 'Open', message: 'go' } } }))).toBe(
      'gates: g: retryAfterSeconds: missing',
    );
    expect(problemOf(clusterUpgradeMemo.decode({ ...upgrade, overrides: ['a', 2] }))).toBe(
      'overrides: [1] not a string',
    );
    expect(problemOf(clusterUpgradeMemo.decode({ ...upgrade, readiness: { verdict: 'Maybe' } }))).toBe(
      'readiness: verdict: not one of Ready, Blocked, Unknown',
    );
    expect(problemOf(machineUpdateMemo.decode({ ...machine, step: 'Reboot' }))).toMatch(/^step: not one of Queued/);
    expect(problemOf(machineUpdateMemo.decode({ ...machine, retryRequested: 'yes' }))).toBe(
      'retryRequested: not a boolean',
    );
    expect(problemOf(fleetRolloutMemo.decode({ ...rollout, counts: { ...rollout.counts, done: '2' } }))).toBe(
      'counts: done: not a number',
    );
    expect(problemOf(fleetRolloutMemo.decode({ ...rollout, nextWave: { wave: 2, message: 'm' } }))).toBe(
      'nextWave: holding: missing',
    );
    expect(problemOf(machineUpdateSlotsMemo.decode({ abortRequested: true }))).toBe('abortRequested: not a string');
    const malformed = clusterUpgradeMemo.decode({ phase: 'Upgrading' });
    expect(malformed).toBeInstanceOf(MalformedMemo);
    expect((malformed as MalformedMemo).message).toBe('memo upgrade: targetVersion: missing');
  });

  it('readers give the typed memo by its key, and nothing for a malformed one', () => {
    expect(readMemo(clusterUpgradeMemo, { upgrade })).toBe(upgrade);
    expect(readMemo(machineUpdateMemo, { machineUpdate: machine })).toBe(machine);
    expect(readMemo(fleetRolloutMemo, { rollout })).toBe(rollout);
    expect(readMemo(clusterUpgradeMemo, { upgrade: { ...upgrade, gates: 'open' } })).toBeUndefined();
    expect(memoValue(clusterUpgradeMemo, upgrade)).toBe(upgrade);
    expect(memoValue(clusterUpgradeMemo, { targetVersion: 'v1.34.0' })).toBeUndefined();
    expect(memoValue(fleetRolloutMemo, undefined)).toBeUndefined();
  });
});
