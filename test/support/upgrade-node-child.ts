// Runs one upgradeNode activity in a process of its own and reports its peak
// memory (VmHWM) before and after: what a hostile input costs the worker,
// measured without the test runner's own peak in the way. Input: one JSON
// argument; output: one JSON line on stdout.
import { readFileSync } from 'node:fs';
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';
import { managementKubeConfig } from '../../src/platform/kube/clients.ts';
import { createMachineUpdateActivities } from '../../src/activities/machine-update.ts';
import type { NodeUpgradeInput } from '../../src/activities/machine-update-types.ts';

export interface ChildInput {
  managementKubeconfig: string;
  workloadNamespace: string;
  checksumsFile: string;
  input: NodeUpgradeInput;
}

export interface ChildResult {
  hwmBeforeKiB: number;
  hwmAfterKiB: number;
  failure?: { message: string; type?: string; nonRetryable?: boolean };
}

function vmHwmKiB(): number {
  const m = /^VmHWM:\s+(\d+) kB$/m.exec(readFileSync('/proc/self/status', 'utf8'));
  if (!m?.[1]) throw new Error('no VmHWM in /proc/self/status');
  return Number(m[1]);
}

const arg = process.argv[2];
if (!arg) throw new Error('usage: upgrade-node-child.ts <json>');
const { managementKubeconfig, workloadNamespace, checksumsFile, input } = JSON.parse(arg) as ChildInput;
const activities = createMachineUpdateActivities({
  management: managementKubeConfig(managementKubeconfig),
  workloadNamespace,
  job: { checksumsFile },
});
const env = new MockActivityEnvironment(undefined, { logger: new DefaultLogger('ERROR') });
const hwmBeforeKiB = vmHwmKiB();
let failure: ChildResult['failure'];
try {
  await env.run(activities.upgradeNode, input);
} catch (err) {
  const e = err as { message?: unknown; type?: unknown; nonRetryable?: unknown };
  failure = {
    message: String(e.message),
    ...(typeof e.type === 'string' ? { type: e.type } : {}),
    ...(typeof e.nonRetryable === 'boolean' ? { nonRetryable: e.nonRetryable } : {}),
  };
}
const result: ChildResult = { hwmBeforeKiB, hwmAfterKiB: vmHwmKiB(), ...(failure ? { failure } : {}) };
process.stdout.write(`${JSON.stringify(result)}\n`);
process.exit(0);
