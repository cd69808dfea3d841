// One read of a core Cluster API object by name, with "not there" as undefined: callers decide
// what a missing object means (a skipped cluster, a failed step, a finished update).
import type { CustomObjectsApi } from '@kubernetes/client-node';
import { CAPI_GROUP, CAPI_VERSION } from './capi-api.ts';
import { isNotFound } from './errors.ts';

export type CapiPlural = 'clusters' | 'machines' | 'machinedeployments' | 'machinesets';

export async function readCapiObject<T>(
  custom: CustomObjectsApi,
  plural: CapiPlural,
  ref: { namespace: string; name: string },
): Promise<T | undefined> {
  try {
    return (await custom.getNamespacedCustomObject({
      group: CAPI_GROUP,
      version: CAPI_VERSION,
      plural,
      namespace: ref.namespace,
      name: ref.name,
    })) as T;
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}
