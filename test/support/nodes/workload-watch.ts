// A workload on the real nodes and what happened to it during an update: a Deployment of
// two replicas spread over the nodes (it tolerates the control plane's taint, so either
// node can take both) with a PodDisruptionBudget `minAvailable: 1`, and an observer that
// samples its Ready replicas, the pods it has had, and which nodes were cordoned.
import { AppsV1Api, CoreV1Api, KubeConfig, PolicyV1Api } from '@kubernetes/client-node';
import { setTimeout as sleep } from 'node:timers/promises';

export const WEB_NAMESPACE = 'default';
export const WEB_NAME = 'web';

export function workloadClients(kubeconfig: string) {
  const kc = new KubeConfig();
  kc.loadFromString(kubeconfig);
  return {
    kc,
    core: kc.makeApiClient(CoreV1Api),
    apps: kc.makeApiClient(AppsV1Api),
    policy: kc.makeApiClient(PolicyV1Api),
  };
}

/** Creates the Deployment and its PDB and waits until both replicas are Ready, one per node. */
export async function createWeb(kubeconfig: string, image: string): Promise<void> {
  const { apps, policy, core } = workloadClients(kubeconfig);
  const labels = { app: WEB_NAME };
  await policy.createNamespacedPodDisruptionBudget({
    namespace: WEB_NAMESPACE,
    body: { metadata: { name: WEB_NAME }, spec: { minAvailable: 1, selector: { matchLabels: labels } } },
  });
  await apps.createNamespacedDeployment({
    namespace: WEB_NAMESPACE,
    body: {
      metadata: { name: WEB_NAME },
      spec: {
        replicas: 2,
        selector: { matchLabels: labels },
        template: {
          metadata: { labels },
          spec: {
            tolerations: [{ key: 'node-role.kubernetes.io/control-plane', operator: 'Exists', effect: 'NoSchedule' }],
            topologySpreadConstraints: [
              {
                maxSkew: 1,
                topologyKey: 'kubernetes.io/hostname',
                whenUnsatisfiable: 'ScheduleAnyway',
                labelSelector: { matchLabels: labels },
              },
            ],
            terminationGracePeriodSeconds: 5,
            containers: [{ name: 'web', image }],
          },
        },
      },
    },
  });
  const deadline = Date.now() + 120_000;
  for (;;) {
    const pods = (await core.listNamespacedPod({ namespace: WEB_NAMESPACE, labelSelector: `app=${WEB_NAME}` })).items;
    const ready = pods.filter((p) => p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'));
    if (ready.length === 2) return;
    if (Date.now() > deadline)
      throw new Error(
        `web's 2 replicas were not Ready in 120 s: ${pods.map((p) => `${p.metadata?.name} ${p.status?.phase}`).join(', ')}`,
      );
    await sleep(500);
  }
}

export interface WorkloadObservation {
  /** The fewest Ready replicas seen in any sample. */
  minReady: number;
  samples: number;
  /** Every pod of the Deployment seen, by uid, with the node it ran on. */
  pods: Map<string, { name: string; node: string }>;
  /** Nodes seen unschedulable in some sample. */
  cordoned: Set<string>;
  /** Samples that failed (the API server restarting during its own upgrade is expected). */
  unreachable: number;
  /** Each sample of each node: schedulable or not, Ready or not. */
  nodes: { node: string; at: number; unschedulable: boolean; ready: boolean }[];
}

/** Samples every `intervalMs` until stop(); stop() returns what was seen. */
export function observeWorkload(kubeconfig: string, intervalMs = 300) {
  const { core } = workloadClients(kubeconfig);
  const seen: WorkloadObservation = {
    minReady: Number.POSITIVE_INFINITY,
    samples: 0,
    pods: new Map(),
    cordoned: new Set(),
    unreachable: 0,
    nodes: [],
  };
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      try {
        const [pods, nodes] = await Promise.all([
          core.listNamespacedPod({ namespace: WEB_NAMESPACE, labelSelector: `app=${WEB_NAME}` }),
          core.listNode(),
        ]);
        const ready = pods.items.filter((p) =>
          p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'),
        );
        seen.minReady = Math.min(seen.minReady, ready.length);
        for (const p of pods.items)
          if (p.metadata?.uid && p.spec?.nodeName)
            seen.pods.set(p.metadata.uid, { name: p.metadata.name!, node: p.spec.nodeName });
        for (const n of nodes.items) {
          const node = n.metadata!.name!;
          const unschedulable = n.spec?.unschedulable === true;
          if (unschedulable) seen.cordoned.add(node);
          const ready = n.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true;
          seen.nodes.push({ node, at: Date.now(), unschedulable, ready });
        }
        seen.samples++;
      } catch {
        seen.unreachable++;
      }
      await sleep(intervalMs);
    }
  })();
  return {
    async stop(): Promise<WorkloadObservation> {
      stopped = true;
      await loop;
      return seen;
    },
  };
}
