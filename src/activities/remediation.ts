// MachineHealthCheck and in-place updates: CAPI's MHC is not in-place aware
// (kubernetes-sigs/cluster-api #13285), so a kubelet restarted by the node
// upgrade can look like an unhealthy node and get its Machine replaced
// mid-update. While an update may restart the kubelet, the Machine carries
// `cluster.x-k8s.io/skip-remediation` (honoured by the MHC: shouldSkipRemediation
// in core/reconcilers/machinehealthcheck), together with our own marker saying
// we set it. We only ever remove a skip-remediation our marker vouches for: one
// a person set stays. Both are written in one merge patch carrying the
// resourceVersion read, retried on conflict.
import { CustomObjectsApi, PatchStrategy, setHeaderOptions, type KubeConfig } from '@kubernetes/client-node';
import { apiClient } from '../platform/kube/clients.ts';
import { isNotFound } from '../platform/kube/errors.ts';
import { retryOnConflict } from '../platform/kube/retry-on-conflict.ts';
import type { MachineRef, MachineUpdateActivities } from './machine-update-types.ts';
import { readMachine } from './node-reads.ts';
import { CAPI_CORE } from '../platform/kube/capi-api.ts';

/** CAPI's annotation: a MachineHealthCheck leaves a Machine carrying it alone. */
export const SKIP_REMEDIATION_ANNOTATION = 'cluster.x-k8s.io/skip-remediation';
/** Our marker beside it: we set that skip-remediation, so it is ours to remove. */
export const SKIP_REMEDIATION_SET_BY_ANNOTATION = 'upgrades.capi-orchestrator.io/skip-remediation-set-by';
export const SKIP_REMEDIATION_SET_BY_US = 'machine-update';

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

export type RemediationActivities = Pick<MachineUpdateActivities, 'holdRemediation' | 'releaseRemediation'>;

export function createRemediationActivities(management: KubeConfig): RemediationActivities {
  const custom = apiClient(management, CustomObjectsApi);
  const who = (m: MachineRef) => `Machine ${m.namespace}/${m.name}`;

  const patchAnnotations = async (
    machine: MachineRef,
    resourceVersion: string | undefined,
    annotations: Record<string, string | null>,
  ): Promise<boolean> => {
    try {
      await custom.patchNamespacedCustomObject(
        {
          ...CAPI_CORE,
          plural: 'machines',
          namespace: machine.namespace,
          name: machine.name,
          body: { metadata: { resourceVersion, annotations } },
        },
        mergePatch,
      );
      return true;
    } catch (err) {
      if (isNotFound(err)) return false; // gone: nothing to hold or release
      throw err;
    }
  };

  return {
    async holdRemediation({ machine }) {
      return await retryOnConflict(async () => {
        const obj = await readMachine(custom, machine);
        if (!obj) return { message: `${who(machine)} not found: nothing to hold` };
        const annotations = obj.metadata?.annotations ?? {};
        if (annotations[SKIP_REMEDIATION_SET_BY_ANNOTATION] === SKIP_REMEDIATION_SET_BY_US)
          return { message: `${who(machine)} already carries ${SKIP_REMEDIATION_ANNOTATION}, set by this update` };
        // Someone else's: it stays theirs (we never add our marker to it, so we never remove it).
        if (Object.hasOwn(annotations, SKIP_REMEDIATION_ANNOTATION))
          return {
            message: `${who(machine)} already carries ${SKIP_REMEDIATION_ANNOTATION}, not set by us: left alone`,
          };
        const patched = await patchAnnotations(machine, obj.metadata?.resourceVersion, {
          [SKIP_REMEDIATION_ANNOTATION]: '',
          [SKIP_REMEDIATION_SET_BY_ANNOTATION]: SKIP_REMEDIATION_SET_BY_US,
        });
        return {
          message: patched
            ? `${who(machine)}: ${SKIP_REMEDIATION_ANNOTATION} set while the node updates`
            : `${who(machine)} not found: nothing to hold`,
        };
      });
    },

    async releaseRemediation({ machine }) {
      await retryOnConflict(async () => {
        const obj = await readMachine(custom, machine);
        const annotations = obj?.metadata?.annotations ?? {};
        if (!obj || annotations[SKIP_REMEDIATION_SET_BY_ANNOTATION] !== SKIP_REMEDIATION_SET_BY_US) return;
        await patchAnnotations(machine, obj.metadata?.resourceVersion, {
          [SKIP_REMEDIATION_ANNOTATION]: null,
          [SKIP_REMEDIATION_SET_BY_ANNOTATION]: null,
        });
      });
    },
  };
}
