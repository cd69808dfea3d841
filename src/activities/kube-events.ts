// Kubernetes Events on the Cluster API objects the workflows work on (Cluster,
// Machine), so `kubectl describe` and `kubectl get events` tell the story:
// CAPI keeps only the last hook message, and operators look at the objects.
// One Event per key, named after it: a retried activity finds it (409)
// instead of adding a second one. An object that is gone gets none.
import { createHash } from 'node:crypto';
import { CoreV1Api, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { apiClient, isManagementClusterConfigured } from '../platform/kube/clients.ts';
import { isConflict, isNotFound } from '../platform/kube/errors.ts';
import { truncate } from './machine-update-common.ts';
import { CAPI_GROUP, CAPI_VERSION } from '../platform/kube/capi-api.ts';

const COMPONENT = 'capi-upgrade-orchestrator';
/** Event messages are cut at 1,024 characters (kubectl shows them whole up to there). */
const MAX_EVENT_MESSAGE = 1_024;

export interface ObjectEvent {
  kind: 'Cluster' | 'Machine';
  namespace: string;
  name: string;
  reason: string;
  type: 'Normal' | 'Warning';
  message: string;
  /** Names the Event: the same key is the same Event (retries add none). */
  key: string;
}

export function createEventRecorder(management: KubeConfig): (event: ObjectEvent) => Promise<void> {
  // No management cluster (a dev stack, the fleet bench): no object to attach an Event to, as
  // for an object that is gone. The activity still runs, so Temporal pays what production pays.
  if (!isManagementClusterConfigured(management)) return async () => undefined;
  const core = apiClient(management, CoreV1Api);
  const custom = apiClient(management, CustomObjectsApi);
  return async (e) => {
    let uid: string | undefined;
    let apiVersion = `${CAPI_GROUP}/${CAPI_VERSION}`;
    try {
      const object = (await custom.getNamespacedCustomObject({
        group: CAPI_GROUP,
        version: CAPI_VERSION,
        plural: `${e.kind.toLowerCase()}s`,
        namespace: e.namespace,
        name: e.name,
      })) as { apiVersion?: string; metadata?: { uid?: string } };
      uid = object.metadata?.uid;
      apiVersion = object.apiVersion ?? apiVersion;
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
    // Gone (deleted, scaled down, remediated): nothing to attach it to.
    if (!uid) return;
    const digest = createHash('sha256').update(e.key).digest('hex').slice(0, 16);
    const now = new Date();
    try {
      await core.createNamespacedEvent({
        namespace: e.namespace,
        body: {
          metadata: { name: `${e.name}.${digest}`, namespace: e.namespace },
          involvedObject: { apiVersion, kind: e.kind, name: e.name, namespace: e.namespace, uid },
          type: e.type,
          reason: e.reason,
          message: truncate(e.message, MAX_EVENT_MESSAGE),
          source: { component: COMPONENT },
          reportingComponent: COMPONENT,
          reportingInstance: COMPONENT,
          firstTimestamp: now,
          lastTimestamp: now,
          count: 1,
        },
      });
    } catch (err) {
      if (!isConflict(err)) throw err;
    }
  };
}
