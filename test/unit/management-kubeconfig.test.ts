// The management cluster's KubeConfig when none is configured, or a bad one is: the
// errors name MANAGEMENT_KUBECONFIG instead of client-node's "Invalid URL".
import { describe, expect, it } from '@jest/globals';
import { CoreV1Api } from '@kubernetes/client-node';
import { ApplicationFailure } from '@temporalio/common';
import {
  apiClient,
  isManagementClusterConfigured,
  MANAGEMENT_CLUSTER_NOT_CONFIGURED,
  managementKubeConfig,
} from '../../src/platform/kube/clients.ts';
import { createEventRecorder } from '../../src/activities/kube-events.ts';
import { stableFailure } from '../../src/activities/failures.ts';
import { KubeError } from '../../src/platform/kube/errors.ts';

describe('managementKubeConfig', () => {
  it('without MANAGEMENT_KUBECONFIG outside a pod: every call fails naming the setting, none is dialled', async () => {
    const kc = managementKubeConfig(undefined, {});
    expect(isManagementClusterConfigured(kc)).toBe(false);
    const thrown = await apiClient(kc, CoreV1Api)
      .listNode()
      .then(
        () => undefined,
        (err: unknown) => err,
      );
    // A plain KubeError from the platform; an activity's edge makes it this ApplicationFailure.
    expect(thrown).toBeInstanceOf(KubeError);
    const failure = stableFailure(thrown);
    expect(failure).toBeInstanceOf(ApplicationFailure);
    expect(failure).toMatchObject({
      type: MANAGEMENT_CLUSTER_NOT_CONFIGURED,
      nonRetryable: true,
      message:
        'no management cluster: MANAGEMENT_KUBECONFIG is not set and this process is not running in a pod (no KUBERNETES_SERVICE_HOST)',
    });
  });

  it('without one, an Event has no object to go on: recording it does nothing and does not fail the activity', async () => {
    const record = createEventRecorder(managementKubeConfig(undefined, {}));
    await expect(
      record({
        kind: 'Cluster',
        namespace: 'ns',
        name: 'c',
        reason: 'UpgradeStarted',
        type: 'Normal',
        message: 'm',
        key: 'k',
      }),
    ).resolves.toBeUndefined();
  });

  it('in a pod (KUBERNETES_SERVICE_HOST set): the in-cluster service account', () => {
    const kc = managementKubeConfig(undefined, { KUBERNETES_SERVICE_HOST: '10.96.0.1' });
    expect(isManagementClusterConfigured(kc)).toBe(true);
  });

  it('a MANAGEMENT_KUBECONFIG that cannot be read stops the start, naming the setting and the file', () => {
    expect(() => managementKubeConfig('/nonexistent/kubeconfig', {})).toThrow(
      /^MANAGEMENT_KUBECONFIG=\/nonexistent\/kubeconfig: ENOENT: no such file or directory/,
    );
  });
});
