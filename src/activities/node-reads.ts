// Reads of the Cluster API Machine and of its Node that the machine update activities share: a
// missing node is a stable, non-retryable failure naming it.
import type { CoreV1Api, CustomObjectsApi, V1Node } from '@kubernetes/client-node';
import { ApplicationFailure } from '@temporalio/common';
import { readCapiObject } from '../platform/kube/capi-read.ts';
import { isNotFound } from '../platform/kube/errors.ts';
import type { MachineObject } from '../platform/kube/capi-api.ts';
import { MACHINE_UPDATE_FAILURES } from './machine-update-common.ts';
import type { MachineRef } from './machine-update-types.ts';

/** The Cluster API Machine, or undefined when it does not exist. */
export function readMachine(custom: CustomObjectsApi, machine: MachineRef): Promise<MachineObject | undefined> {
  return readCapiObject<MachineObject>(custom, 'machines', machine);
}

export async function readNodeOrFail(core: CoreV1Api, name: string, of = ''): Promise<V1Node> {
  try {
    return await core.readNode({ name });
  } catch (err) {
    if (isNotFound(err)) {
      throw ApplicationFailure.nonRetryable(
        `node ${name}${of ? ` ${of}` : ''} not found in the workload cluster`,
        MACHINE_UPDATE_FAILURES.nodeNotFound,
      );
    }
    throw err;
  }
}

export function readyCondition(node: V1Node) {
  return node.status?.conditions?.find((c) => c.type === 'Ready');
}

export function describeReady(node: V1Node): string {
  const ready = readyCondition(node);
  if (!ready) return 'no Ready condition';
  return `Ready=${ready.status}${ready.reason ? `: ${ready.reason}` : ''}`;
}
