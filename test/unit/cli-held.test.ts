// The CLI's `held by:` lines for the gates that live outside the cluster upgrade's own status: a machine
// update's blocking pods and post-update delay, and a rollout's clusters deferred by CAPI's pacing.
import { describe, expect, it } from '@jest/globals';
import { holdLines, machineUpdateHold, rolloutHoldLines } from '../../src/cli/held.ts';
import type { ClusterUpgradeStatus } from '../../src/model/cluster-upgrade.ts';
import type { FleetRolloutStatus } from '../../src/model/fleet-rollout.ts';
import type { MachineUpdateStatus } from '../../src/model/machine-update.ts';

const update = (extra: Partial<MachineUpdateStatus>): MachineUpdateStatus => ({
  machine: { namespace: 'ns', name: 'm-1' },
  version: 'v1.33.0',
  phase: 'Updating',
  step: 'Drain',
  message: '',
  upgraded: false,
  steps: [],
  ...extra,
});

describe('held by', () => {
  it('names the machine update gate that holds, and nothing once it moved on', () => {
    const pods = update({
      step: 'BlockingPods',
      blockingPods: { selector: 'app=batch (setting)', count: 2, first: 'ns/job-1' },
    });
    expect(machineUpdateHold(pods)).toBe('blocking-pods: 2 pods matching app=batch (setting) (ns/job-1…)');
    expect(machineUpdateHold(update({ step: 'PostUpdateDelay', delayUntil: '2026-11-25T14:00:00.000Z' }))).toBe(
      'post-update-delay: until 2026-11-25T14:00:00.000Z',
    );
    expect(machineUpdateHold(update({ step: 'Drain' }))).toBeUndefined();
    expect(machineUpdateHold(update({ ...pods, phase: 'Aborted' }))).toBeUndefined();
    expect(
      holdLines({ machineUpdates: [{ machine: 'ns/m-1', held: machineUpdateHold(pods) }, { machine: 'ns/m-2' }] }),
    ).toEqual(['held by:   blocking-pods: 2 pods matching app=batch (setting) (ns/job-1…) on ns/m-1']);
  });

  it('names the clusters of a rollout that CAPI pacing defers', () => {
    const rollout = {
      clusters: [
        {
          namespace: 'a',
          name: 'c1',
          uid: '1',
          version: 'v1.32.0',
          state: 'deferred',
          reason: 'deferred by CAPI annotation topology.cluster.x-k8s.io/defer-upgrade on md-0',
        },
        { namespace: 'a', name: 'c2', uid: '2', version: 'v1.32.0', state: 'upgrading' },
      ],
    } as unknown as FleetRolloutStatus;
    expect(rolloutHoldLines(rollout)).toEqual([
      'held by:   capi-pacing on a/c1: deferred by CAPI annotation topology.cluster.x-k8s.io/defer-upgrade on md-0',
    ]);
  });

  it('shows a removed-apis warning as a warning, and the memo overrides when no worker answers', () => {
    expect(
      holdLines({
        memo: { targetVersion: 'v1.33.0', phase: 'Upgrading', gates: {}, overrides: ['removed-apis: CHG-1'] },
        machineUpdates: [],
      }),
    ).toEqual(['override:  removed-apis: CHG-1']);
    const status = {
      removedApis: { policy: 'warn', result: 'warned', message: 'removed-apis: clients … removes: x' },
    } as unknown as ClusterUpgradeStatus;
    expect(holdLines({ status, machineUpdates: [] })).toEqual([
      'warning:   removed-apis: clients … removes: x (policy warn: not held)',
    ]);
  });
});
