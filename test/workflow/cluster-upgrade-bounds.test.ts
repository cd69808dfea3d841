// No input grows one upgrade's memo without bound. Every new
// `hook@version` is a gate kept in the memo; past MAX_GATES_PER_UPGRADE the
// workflow's update validator refuses the call (no history event) and the hook
// answers a stable Failure instead of "queued" for ever.
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { WorkflowUpdateFailedError } from '@temporalio/client';
import {
  CLUSTER_UPGRADE_MEMO_KEY,
  MAX_GATES_PER_UPGRADE,
  tooManyGatesMessage,
  type ClusterUpgradeMemo,
  type HookCall,
} from '../../src/model/cluster-upgrade.ts';
import { recordHookUpdate } from '../../src/workflows/messages.ts';
import { settledHistory } from '../support/wait.ts';
import { startUpgradeHarness, steps, type UpgradeHarness } from '../support/upgrade-harness.ts';

const TARGET = 'v1.33.0';
const later = (ms: number) => new Date(Date.now() + ms).toISOString().replace(/\.\d+Z$/, 'Z');

describe('the gates one cluster upgrade keeps', () => {
  let h: UpgradeHarness;
  beforeEach(async () => {
    h = await startUpgradeHarness();
    await h.startWorker();
  });
  afterEach(async () => h.close());

  it(`keeps at most ${MAX_GATES_PER_UPGRADE} and answers the next call Failure, adding no history`, async () => {
    // Held by upgrade-at: the first step waits, every later call only queues a gate.
    const annotations = { 'upgrades.capi-orchestrator.io/upgrade-at': later(3_600_000) };
    const stepCall = (patch: number) => ({
      fromKubernetesVersion: 'v1.32.0',
      toKubernetesVersion: `v1.32.${patch}`,
      controlPlaneUpgrades: steps(TARGET),
      workersUpgrades: steps(TARGET),
    });
    const first = await h.call(
      'BeforeClusterUpgrade',
      {
        fromKubernetesVersion: 'v1.32.0',
        toKubernetesVersion: TARGET,
        controlPlaneUpgrades: steps(TARGET),
        workersUpgrades: steps(TARGET),
      },
      { annotations },
    );
    expect(first).toMatchObject({ statusCode: 200, status: 'Success' });
    // A few at a time: updates to one workflow are applied one by one anyway.
    for (let from = 1; from < MAX_GATES_PER_UPGRADE; from += 8) {
      const patches = Array.from({ length: Math.min(8, MAX_GATES_PER_UPGRADE - from) }, (_, i) => from + i);
      const answers = await Promise.all(
        patches.map((patch) => h.call('BeforeControlPlaneUpgrade', stepCall(patch), { annotations })),
      );
      for (const answer of answers) expect(answer).toMatchObject({ statusCode: 200, status: 'Success' });
    }
    const handle = h.client.workflow.getHandle(h.workflowId);
    const memoGates = async () =>
      Object.keys(((await handle.describe()).memo?.[CLUSTER_UPGRADE_MEMO_KEY] as ClusterUpgradeMemo).gates).length;
    expect(await memoGates()).toBe(MAX_GATES_PER_UPGRADE);
    const historyBefore = await settledHistory(h.client, h.workflowId);

    // One more, through the hook: a stable Failure, the same twice.
    const extra = {
      hook: 'BeforeControlPlaneUpgrade',
      version: `v1.32.${MAX_GATES_PER_UPGRADE}`,
      targetVersion: TARGET,
    };
    const refused = await h.call('BeforeControlPlaneUpgrade', stepCall(MAX_GATES_PER_UPGRADE), { annotations });
    expect(refused).toMatchObject({
      statusCode: 200,
      status: 'Failure',
      message: tooManyGatesMessage(extra as HookCall),
      retryAfterSeconds: 0,
    });
    expect(await h.call('BeforeControlPlaneUpgrade', stepCall(MAX_GATES_PER_UPGRADE), { annotations })).toEqual(
      refused,
    );
    // Straight to the workflow (as a stale api view would): its validator refuses it.
    const direct = handle.executeUpdate(recordHookUpdate, {
      args: [{ ...(extra as HookCall), policy: {} as HookCall['policy'] }],
    });
    await expect(direct).rejects.toBeInstanceOf(WorkflowUpdateFailedError);
    await expect(direct).rejects.toMatchObject({ cause: { message: tooManyGatesMessage(extra as HookCall) } });
    expect(await memoGates()).toBe(MAX_GATES_PER_UPGRADE);
    expect(await settledHistory(h.client, h.workflowId)).toBe(historyBefore);
    // Calls already recorded still answer from their gates.
    expect(await h.call('BeforeControlPlaneUpgrade', stepCall(1), { annotations })).toMatchObject({
      status: 'Success',
    });
  }, 300_000);
});
