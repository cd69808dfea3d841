// Scenarios (c), (d) and (e) of the real-node tier: what a real node and what CAPI see when
// the `job` executor's update fails on a wrong pinned checksum, is aborted while kubeadm
// runs, or loses its node to a reboot while the Job runs. A cluster each (kubeadm init and
// join take seconds here), one after another.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { startCapiDriver, type Answer, type CapiDriver } from '../support/nodes/capi-driver.ts';
import type { ClusterNodeSpec } from '../../support/nodes/kubeadm-cluster.ts';
import { startNodeSite, type NodeSite } from '../../support/nodes/node-site.ts';
import { activityResults } from '../support/nodes/update-figures.ts';
import { observeWorkload } from '../support/nodes/workload-watch.ts';
import { testPki } from '../support/pki.ts';

const MINUTE = 60_000;
const CP = 'cp';
const WORKER = 'w1';
const BINARIES = '/usr/bin/kubeadm /usr/bin/kubelet /usr/bin/kubectl';

let dir: string;
let site: NodeSite;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'capi-uo-nodes-'));
  site = await startNodeSite(dir, testPki().ca);
}, 5 * MINUTE);

afterAll(async () => {
  await site?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
}, 5 * MINUTE);

/** A cluster and a driver for one scenario; `checksumsFile` replaces the site's pinned checksums. */
async function scenario(nodes: readonly ClusterNodeSpec[], checksumsFile = site.checksumsFile) {
  const cluster = await site.cluster(nodes);
  let driver: CapiDriver | undefined;
  try {
    driver = await startCapiDriver({
      workloadKubeconfig: cluster.kubeconfig,
      clusterName: 'real',
      nodes: nodes.map((n) => ({ name: n.name, role: n.role, version: site.tools.from.version })),
      job: {
        image: site.images.jobImage,
        binarySource: site.binarySource,
        allowHttpBinarySource: true,
        ignorePreflightErrors: ['SystemVerification'],
        checksumsFile,
      },
    });
  } catch (err) {
    await cluster.stop();
    throw err;
  }
  const kubectl = (args: string) => cluster.nodes[CP]!.sh(`kubectl --kubeconfig /etc/kubernetes/admin.conf ${args}`);
  const stop = async () => {
    await driver!.stop();
    await cluster.stop();
  };
  return { cluster, driver, kubectl, stop };
}

/** The log lines of the node-upgrade Job's pods on the workload cluster so far. */
async function jobLog(kubectl: (args: string) => Promise<string>): Promise<string> {
  return kubectl('logs -n kube-system -l app.kubernetes.io/managed-by=capi-upgrade-orchestrator --tail=-1').catch(
    () => '',
  );
}

/** What the node's kubelet said about the upgrade Job's pods: why a pod failed before its script ran. */
async function kubeletJournal(node: { sh: (cmd: string) => Promise<string> }): Promise<string> {
  const lines = await node
    .sh(
      "journalctl -u kubelet -u containerd --no-pager -o short-precise | grep -iE 'admission|reject|evict|outof|killing|containerdied|exit code|failed to|SyncLoop (ADD|DELETE|REMOVE)' | tail -n 120",
    )
    .catch((err: unknown) => `journal not readable: ${String(err)}`);
  return `the control plane's kubelet and containerd on the upgrade Job's pods:\n${lines}`;
}

async function waitFor<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 5 * MINUTE): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(250);
  }
}

describe('(c) a wrong pinned checksum', () => {
  let answers: Answer[];
  let before: string;
  let after: string;
  let kubelet: string;

  beforeAll(async () => {
    const to = site.tools.to.version;
    // The site's checksums with the target kubelet's digest changed by one digit.
    const wrong = join(dir, 'checksums-wrong.yaml');
    writeFileSync(
      wrong,
      readFileSync(site.checksumsFile, 'utf8').replace(
        new RegExp(`^(${to}/amd64/kubelet: )(.)`, 'm'),
        (_m, key: string, c: string) => `${key}${c === '0' ? '1' : '0'}`,
      ),
    );
    const s = await scenario([{ name: CP, role: 'control-plane' }], wrong);
    try {
      before = await s.cluster.nodes[CP]!.sh(`sha256sum ${BINARIES}`);
      answers = await s.driver.updateMachine(CP, to);
      after = await s.cluster.nodes[CP]!.sh(`sha256sum ${BINARIES}`);
      kubelet = await s.cluster.nodes[CP]!.sh('kubelet --version && systemctl is-active kubelet');
    } finally {
      await s.stop();
    }
  }, 15 * MINUTE);

  it('fails the update naming the binary', () => {
    const last = answers.at(-1)!;
    expect(last.status).toBe('Failure');
    // The script's own error line, quoted to CAPI (the failed Job itself is deleted).
    expect(last.message).toMatch(/checksum mismatch for kubelet: pinned [0-9a-f]{64}, got [0-9a-f]{64}/);
  });

  it('changed nothing on the node: the same binaries, the old kubelet still running', () => {
    expect(after).toBe(before);
    expect(kubelet).toContain(`Kubernetes ${site.tools.from.version}`);
    expect(kubelet).toMatch(/^active$/m);
  });
});

describe('(d) abort while kubeadm upgrade runs', () => {
  let aborted: Answer;
  let node: { unschedulable?: boolean; annotations: Record<string, string>; failed?: string };
  let stopLog: string[];
  let finished: Answer[];
  let kubelet: string;

  beforeAll(async () => {
    const to = site.tools.to.version;
    const s = await scenario([{ name: CP, role: 'control-plane' }]);
    try {
      const first = await s.driver.sendOnce(CP, to);
      expect(first.status).toBe('Success');
      // CAPI keeps calling while kubeadm upgrades the control plane; abort once kubeadm runs.
      await waitFor('kubeadm upgrade apply to start in the Job', async () => {
        await s.driver.sendOnce(CP, to);
        return /kubeadm upgrade apply/.test(await jobLog(s.kubectl)) ? true : undefined;
      });
      await sleep(5_000);
      await s.driver.abort(CP, to, 'operator: stop now');
      aborted = await waitFor('the abort to reach UpdateMachine', async () => {
        const a = await s.driver.sendOnce(CP, to);
        return a.status === 'Failure' ? a : undefined;
      });
      // kubeadm was stopped while it replaced the control plane's static pods: the kubelet
      // restarts the API server from whichever manifest is in place, in a few seconds.
      const n = JSON.parse(
        await waitFor('the API server after the abort', () =>
          s.kubectl(`get node ${CP} -o json`).catch(() => undefined),
        ),
      ) as {
        spec: { unschedulable?: boolean };
        metadata: { annotations: Record<string, string> };
        status: { conditions: { type: string; status: string }[] };
      };
      node = {
        unschedulable: n.spec.unschedulable,
        annotations: n.metadata.annotations,
        failed: n.status.conditions.find((c) => c.type === 'InPlaceUpdateFailed')?.status,
      };
      // The executor's last words: the stopNodeUpgrade activity's result in the run's history.
      const id = await s.driver.workflowId(CP, to);
      const [stopped] = (await activityResults(s.driver.client, id, 'stopNodeUpgrade')) as {
        log?: { pod?: string; lines: string[] };
      }[];
      stopLog = stopped?.log?.lines ?? [];
      // The way out for the same desired spec (docs/in-place-recovery.md): delete the run;
      // CAPI's next call starts a new one, which takes the node over and re-runs kubeadm.
      await s.driver.client.workflowService.deleteWorkflowExecution({
        namespace: s.driver.client.options.namespace,
        workflowExecution: { workflowId: id },
      });
      // Temporal deletes in the background: the run is gone when describe no longer finds it.
      await waitFor('the run to be deleted', () =>
        s.driver.client.workflow
          .getHandle(id)
          .describe()
          .then(
            () => undefined,
            () => true,
          ),
      );
      // As CAPI would, the driver calls through a failure that says it is retried (one kept the API
      // server's 403 while its RBAC caches refilled, with a kubeconfig authorized by RBAC).
      finished = await s.driver.updateMachine(CP, to, { retriedFailures: 4 });
      kubelet = await s.cluster.nodes[CP]!.sh('kubelet --version');
    } finally {
      await s.stop();
    }
  }, 20 * MINUTE);

  it('answers the abort, and keeps the node cordoned and marked InPlaceUpdateFailed', () => {
    expect(aborted.message).toMatch(
      /aborted after the node upgrade started: node cp stays cordoned and marked InPlaceUpdateFailed/,
    );
    expect(node.unschedulable).toBe(true);
    expect(node.annotations['upgrades.capi-orchestrator.io/update-failed']).toBeDefined();
    expect(node.failed).toBe('True');
  });

  it("keeps the Job's last log lines in the run's history", () => {
    // The tail of the pod's log when it was stopped: kubeadm's own lines, mid-upgrade.
    expect(stopLog.length).toBeGreaterThan(5);
    expect(stopLog.some((l) => /^\[(upgrade|apiclient|preflight|control-plane|etcd)/.test(l))).toBe(true);
  });

  it('finishes the upgrade on a new UpdateMachine for the same spec (kubeadm upgrade apply again)', () => {
    const last = finished.at(-1)!;
    expect(`${last.status} ${last.retryAfterSeconds}: ${last.message}`).toMatch(/^Success 0: /);
    expect(kubelet).toContain(`Kubernetes ${site.tools.to.version}`);
  });
});

describe('(e) a worker reboot while its Job runs', () => {
  let answers: Answer[];
  let kubelet: string;
  let samples: { node: string; at: number; unschedulable: boolean; ready: boolean }[];
  let rebootedAt: number;

  beforeAll(async () => {
    const to = site.tools.to.version;
    const s = await scenario([
      { name: CP, role: 'control-plane' },
      { name: WORKER, role: 'worker' },
    ]);
    const watch = observeWorkload(s.cluster.kubeconfig);
    try {
      const cpAnswers = await s.driver.updateMachine(CP, to, { retriedFailures: 2 });
      if (cpAnswers.at(-1)?.status !== 'Success') console.warn(await kubeletJournal(s.cluster.nodes[CP]!));
      // objectContaining: a failed answer is printed whole, with its message (toMatchObject shows only the keys).
      expect(cpAnswers.at(-1)).toEqual(expect.objectContaining({ status: 'Success', retryAfterSeconds: 0 }));
      const updating = s.driver.updateMachine(WORKER, to);
      await waitFor("the worker's Job to run its script", async () =>
        /mode=node/.test(await jobLog(s.kubectl)) ? true : undefined,
      );
      // A power cut: systemd, containerd, the kubelet and every pod die at once; then it boots.
      rebootedAt = Date.now();
      await s.cluster.nodes[WORKER]!.kill();
      await s.cluster.nodes[WORKER]!.start();
      answers = await updating;
      kubelet = await s.cluster.nodes[WORKER]!.sh('kubelet --version');
    } finally {
      samples = (await watch.stop()).nodes;
      await s.stop();
    }
  }, 25 * MINUTE);

  it('never reports success with the old kubelet', () => {
    const last = answers.at(-1)!;
    if (last.status === 'Success') expect(kubelet).toContain(`Kubernetes ${site.tools.to.version}`);
    else expect(last.status).toBe('Failure');
  });

  it('never uncordons the worker while it is not Ready', () => {
    const worker = samples.filter((x) => x.node === WORKER && x.at >= rebootedAt);
    expect(worker.length).toBeGreaterThan(10);
    // Once cordoned for the update, every sample that shows it schedulable again shows it Ready.
    expect(worker.filter((x) => !x.unschedulable && !x.ready)).toEqual([]);
  });
});
