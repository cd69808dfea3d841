// The worker's health check activity in a process of its own, with the image's heap settings
// (the test gives NODE_OPTIONS): prints `{"report": …}` or `{"failure": …}` and exits 0, so a test
// can tell a refused read from a process that died. Argument: the cluster as namespace/name.
import { createClusterHealthActivities } from '../../src/activities/cluster-health.ts';
import { stableFailure } from '../../src/activities/failures.ts';
import { managementKubeConfig } from '../../src/platform/kube/clients.ts';
import { parseConfig } from '../../src/config/index.ts';
import { configureWorkloadReads } from '../../src/platform/kube/workload-kube-config.ts';

const [namespace = '', name = ''] = (process.argv[2] ?? '').split('/');
// As the worker's start does: the WORKLOAD_READ_* settings from the environment.
configureWorkloadReads(parseConfig().workloadReads);
const management = managementKubeConfig(process.env.MANAGEMENT_KUBECONFIG);
try {
  const report = await createClusterHealthActivities(management).checkClusterHealth({
    cluster: { namespace, name },
    scope: 'pre',
    criticalNamespaces: ['kube-system'],
    blockingPdbPolicy: 'warn',
  });
  process.stdout.write(`${JSON.stringify({ report })}\n`);
} catch (err) {
  process.stdout.write(`${JSON.stringify({ failure: stableFailure(err).message })}\n`);
}
