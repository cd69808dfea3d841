// Scenarios (a) and (b) of the real-node tier: a kubeadm cluster at v1.36.1 (a control
// plane and a worker on container nodes) upgraded in place to v1.37.2 by the `job`
// executor, driven by UpdateMachine as Cluster API sends it, control plane first.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NODE_NAME_LABEL } from '../../src/activities/machine-update-common.ts';
import { startCapiDriver, type Answer, type CapiDriver, type UpdateOptions } from '../support/nodes/capi-driver.ts';
import type { KubeadmCluster } from '../../support/nodes/kubeadm-cluster.ts';
import { startNodeSite, type NodeSite } from '../../support/nodes/node-site.ts';
import {
  activitySeconds,
  figuresTable,
  floorSeconds,
  historyText,
  type UpdateFigures,
} from '../support/nodes/update-figures.ts';
import {
  createWeb,
  observeWorkload,
  workloadClients,
  WEB_NAME,
  type WorkloadObservation,
} from '../support/nodes/workload-watch.ts';
import { testPki } from '../support/pki.ts';

const MINUTE = 60_000;
const CP = 'cp';
const WORKER = 'w1';
/** A kubelet flag the worker's KubeadmConfig gives it, which the update must keep. */
const MAX_PODS = '57';
const NODE_LABEL = 'capi-uo.test/pool';
const NODE_TAINT = { key: 'capi-uo.test/dedicated', value: 'web', effect: 'PreferNoSchedule' };
const UPDATE_FILE = {
  path: '/etc/capi-uo/update-marker',
  content: 'written by the in-place update\n',
  permissions: '0640',
};

let dir: string;
let site: NodeSite;
let cluster: KubeadmCluster;
let driver: CapiDriver;
let from: string;
let to: string;
const answers: Record<string, Answer[]> = {};
const took: Record<string, number> = {};
const figures: UpdateFigures[] = [];
let observed: WorkloadObservation;
let before: { workerFiles: string; webPods: string[]; kubeadmFlags: string };

const sh = (node: string, script: string) => cluster.nodes[node]!.sh(script);
const kubectl = (args: string) => sh(CP, `kubectl --kubeconfig /etc/kubernetes/admin.conf ${args}`);
const jobLogs = () =>
  kubectl('logs -n kube-system -l app.kubernetes.io/managed-by=capi-upgrade-orchestrator --tail=-1 --prefix');

/** The failed Job's last log lines, from the run's history (the Job itself is deleted). */
async function lastWords(node: string): Promise<string> {
  const history = await driver.client.workflow.getHandle(await driver.workflowId(node, to)).fetchHistory();
  return [...new Set(historyText(history).match(/\[node-upgrade\][^"\\]*/g) ?? [])].join('\n');
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'capi-uo-nodes-'));
  site = await startNodeSite(dir, testPki().ca);
  from = site.tools.from.version;
  to = site.tools.to.version;
  cluster = await site.cluster([
    { name: CP, role: 'control-plane' },
    { name: WORKER, role: 'worker', kubeletExtraArgs: { 'max-pods': MAX_PODS } },
  ]);
  driver = await startCapiDriver({
    workloadKubeconfig: cluster.kubeconfig,
    clusterName: 'real',
    nodes: [
      { name: CP, role: 'control-plane', version: from },
      { name: WORKER, role: 'worker', version: from, kubeletExtraArgs: { 'max-pods': MAX_PODS } },
    ],
    job: {
      image: site.images.jobImage,
      binarySource: site.binarySource,
      allowHttpBinarySource: true,
      ignorePreflightErrors: ['SystemVerification'],
      checksumsFile: site.checksumsFile,
    },
  });
  // What the update must keep: labels and taints set on the Node, the files the bootstrap wrote.
  await kubectl(`label node ${WORKER} ${NODE_LABEL}=blue`);
  await kubectl(`taint node ${WORKER} ${NODE_TAINT.key}=${NODE_TAINT.value}:${NODE_TAINT.effect}`);
  await kubectl('create configmap written-before --from-literal=at=v1.36.1');
  await createWeb(cluster.kubeconfig, site.images.appImage);
  const { core } = workloadClients(cluster.kubeconfig);
  before = {
    workerFiles: await sh(
      WORKER,
      'sha256sum /etc/kubernetes/kubelet.conf /var/lib/kubelet/kubeadm-flags.env /etc/kubernetes/pki/ca.crt',
    ),
    kubeadmFlags: await sh(WORKER, 'cat /var/lib/kubelet/kubeadm-flags.env'),
    webPods: (await core.listNamespacedPod({ namespace: 'default', labelSelector: `app=${WEB_NAME}` })).items.map(
      (p) => p.metadata!.uid!,
    ),
  };
  const watch = observeWorkload(cluster.kubeconfig);
  try {
    let began = Date.now();
    answers[CP] = await driver.updateMachine(CP, to, { retriedFailures: 2 });
    took[CP] = (Date.now() - began) / 1000;
    // As KCP does: no worker is touched while the control plane's update has not succeeded.
    const cp = answers[CP].at(-1)!;
    if (cp.status !== 'Success' && process.env.NODES_HOLD_MS)
      await new Promise((r) => setTimeout(r, Number(process.env.NODES_HOLD_MS)));
    if (cp.status !== 'Success')
      throw new Error(
        `the control plane's update failed: ${cp.message}\nthe Job's last lines:\n${await lastWords(CP)}`,
      );
    began = Date.now();
    answers[WORKER] = await driver.updateMachine(WORKER, to, { files: [UPDATE_FILE], retriedFailures: 2 });
    took[WORKER] = (Date.now() - began) / 1000;
    for (const [node, opts] of [
      [CP, {}],
      [WORKER, { files: [UPDATE_FILE] }],
    ] satisfies [string, UpdateOptions][]) {
      const log = await kubectl(`logs -n kube-system -l ${NODE_NAME_LABEL}=${node} --timestamps --tail=-1`);
      figures.push({
        node,
        totalSeconds: took[node]!,
        steps: await activitySeconds(driver.client, await driver.workflowId(node, to, opts)),
        floorSeconds: floorSeconds(log),
      });
    }
    console.log(`real-node in-place update, ${from} → ${to}:\n${figuresTable(figures)}`);
  } finally {
    observed = await watch.stop();
  }
}, 30 * MINUTE);

afterAll(async () => {
  await driver?.stop();
  await cluster?.stop();
  await site?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
}, 5 * MINUTE);

describe('(a) a minor upgrade in place, v1.36.1 to v1.37.2, control plane then worker', () => {
  it('answers Success with retryAfterSeconds 0 for each Machine at the end', () => {
    for (const node of [CP, WORKER]) {
      const last = answers[node]!.at(-1)!;
      expect(last).toEqual(expect.objectContaining({ status: 'Success', retryAfterSeconds: 0 }));
      // It waited while the node was upgraded: CAPI was told to come back.
      expect(answers[node]!.length).toBeGreaterThan(1);
    }
  });

  it('runs the new kubelet and kubeadm on each node, and the new control plane', async () => {
    for (const node of [CP, WORKER]) {
      expect(await sh(node, 'kubelet --version')).toContain(`Kubernetes ${to}`);
      expect((await sh(node, 'kubeadm version -o short')).trim()).toBe(to);
      expect(await sh(node, 'systemctl is-active kubelet')).toContain('active');
      // kubeadm wrote the kubelet's configuration again from the cluster's: the tier's own thresholds stay.
      expect(await sh(node, "grep -A5 '^evictionHard:' /var/lib/kubelet/config.yaml")).toContain(
        'imagefs.available: 1Gi',
      );
    }
    const kubelets = await kubectl(
      `get nodes -o jsonpath='{range .items[*]}{.metadata.name}={.status.nodeInfo.kubeletVersion} {end}'`,
    );
    expect(kubelets.trim().split(' ').sort()).toEqual([`${CP}=${to}`, `${WORKER}=${to}`]);
    const images = await kubectl(
      `get pods -n kube-system -l tier=control-plane -o jsonpath='{range .items[*]}{.spec.containers[0].image} {end}'`,
    );
    for (const component of ['kube-apiserver', 'kube-controller-manager', 'kube-scheduler'])
      expect(images).toContain(`/${component}:${to}`);
    expect(await kubectl('version -o json')).toContain(`"gitVersion": "${to}"`);
  });

  it('cordoned and drained each node, and uncordoned it after', async () => {
    expect([...observed.cordoned].sort()).toEqual([CP, WORKER]);
    expect(await kubectl(`get nodes -o jsonpath='{range .items[*]}{.spec.unschedulable}{end}'`)).toBe('');
  });

  it('kept a Ready replica of the PDB-guarded Deployment throughout, its pods really evicted and restarted elsewhere', async () => {
    expect(observed.samples).toBeGreaterThan(50);
    expect(observed.minReady).toBeGreaterThanOrEqual(1);
    const { core } = workloadClients(cluster.kubeconfig);
    const now = (await core.listNamespacedPod({ namespace: 'default', labelSelector: `app=${WEB_NAME}` })).items;
    // Every pod that ran before the update was evicted: none of them is left.
    expect(now.map((p) => p.metadata!.uid).filter((uid) => before.webPods.includes(uid!))).toEqual([]);
    expect(
      now.filter((p) => p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')),
    ).toHaveLength(2);
    // The kubelet started replacements on both nodes in turn.
    expect(new Set([...observed.pods.values()].map((p) => p.node))).toEqual(new Set([CP, WORKER]));
  });

  it("ran kubeadm upgrade apply on the control plane and kubeadm upgrade node on the worker (the Jobs' logs)", async () => {
    const logs = await jobLogs();
    expect(logs).toMatch(new RegExp(`mode=apply[\\s\\S]*kubeadm upgrade apply`));
    expect(logs).toMatch(/mode=node/);
    expect(logs).toContain('[node-upgrade] done');
  });

  it('reports the figures: each step, and the whole update against kubeadm + kubelet restart alone (the floor)', () => {
    expect(figures.map((f) => f.node)).toEqual([CP, WORKER]);
    for (const f of figures) {
      expect(f.floorSeconds).toBeGreaterThan(0);
      expect(f.totalSeconds).toBeGreaterThan(f.floorSeconds);
      expect(f.steps).toHaveProperty('drain');
    }
  });

  it('kept what etcd held: a ConfigMap written before the upgrade', async () => {
    expect(await kubectl('get configmap written-before -o jsonpath={.data.at}')).toBe('v1.36.1');
  });
});

describe('(b) the node keeps what it was given', () => {
  it("keeps the kubelet flag from the KubeadmConfig's kubeletExtraArgs", async () => {
    expect(await sh(WORKER, 'cat /var/lib/kubelet/kubeadm-flags.env')).toBe(before.kubeadmFlags);
    expect(before.kubeadmFlags).toContain(`--max-pods=${MAX_PODS}`);
    expect(await kubectl(`get node ${WORKER} -o jsonpath={.status.capacity.pods}`)).toBe(MAX_PODS);
  });

  it("keeps the Node's labels and taints", async () => {
    const node = JSON.parse(await kubectl(`get node ${WORKER} -o json`)) as {
      metadata: { labels: Record<string, string> };
      spec: { taints?: unknown[] };
    };
    expect(node.metadata.labels[NODE_LABEL]).toBe('blue');
    expect(node.spec.taints).toContainEqual(NODE_TAINT);
  });

  it('keeps the files the bootstrap wrote', async () => {
    expect(
      await sh(
        WORKER,
        'sha256sum /etc/kubernetes/kubelet.conf /var/lib/kubelet/kubeadm-flags.env /etc/kubernetes/pki/ca.crt',
      ),
    ).toBe(before.workerFiles);
  });

  it("applies the update's bootstrap files on the node, with their mode", async () => {
    expect(await sh(WORKER, `cat ${UPDATE_FILE.path}`)).toBe(UPDATE_FILE.content);
    expect((await sh(WORKER, `stat -c %a ${UPDATE_FILE.path}`)).trim()).toBe('640');
  });
});
