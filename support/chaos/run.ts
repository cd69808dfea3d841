// A chaos run: in-place updates of N KWOK nodes with maxConcurrentMachineUpdates,
// played by CAPI over HTTPS (capi-player.ts) in waves of newer desired specs while a seeded
// schedule (schedule.ts) throws faults at the processes and the cluster (faults.ts); then,
// once the last fault is over and every machine is done, the invariants (invariants.ts).
// Shared by `make chaos` (bench/chaos.ts) and its short version in the integration tier.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AppsV1Api } from '@kubernetes/client-node';
import { Client, Connection } from '@temporalio/client';
import { ensureNodeUpgradeRequestCrd } from '../../src/activities/executors/delegate.ts';
import { machineUpdateSlotsWorkflowId } from '../../src/model/machine-update.ts';
import { machineUpdateSlotsQuery } from '../../src/workflows/messages.ts';
import { startBed, type Bed } from './bed.ts';
import { CapiPlayer, versionOf, type HookAnswer } from './capi-player.ts';
import { FaultRunner, type FaultResult } from './faults.ts';
import { broken, checkInvariants, type Invariants } from './invariants.ts';
import { FAULT_KINDS, planFaults, type FaultKind, type PlannedFault } from './schedule.ts';

export interface ChaosOptions {
  root: string;
  seed: number;
  faults: number;
  /** The whole run (set-up excluded) stops by itself after this, converged or not. */
  maxMinutes: number;
  nodes: number;
  limit: number;
  apis: number;
  workers: number;
  /** Short pauses (schedule.ts) for the `make test` version. */
  short: boolean;
  /** The window the faults are spread over. */
  faultWindowMs: number;
  /** How long the stand-in node agent takes to upgrade a node. */
  agentDelayMs: number;
  keep?: boolean;
  log: (line: string) => void;
  /** Called with what stops everything started, as soon as there is something (Ctrl-C, errors). */
  onStopper?: (stop: { stop: () => Promise<void>; killNow: () => void }) => void;
}

export interface ChaosReport {
  seed: number;
  schedule: PlannedFault[];
  faults: FaultResult[];
  faultsByKind: Record<FaultKind, number>;
  waves: number;
  converged: boolean;
  /** From the end of the last fault to every machine told done for its last desired spec. */
  convergeAfterLastFaultMs: number;
  /** The slowest hook answer (HTTP 200) while a fault was active, and outside faults. */
  worstLatencyDuringFaultsMs: number;
  worstLatencyOtherwiseMs: number;
  answers: number;
  callErrors: number;
  /** Most updates past the queue at once (slots query, sampled) and most node upgrades open at once (the agent). */
  maxHolders: number;
  maxOpenRequests: number;
  /** NodeUpgradeRequests the agent answered Failed (agent-fails-once faults that found their request). */
  agentFailures: number;
  invariants: Invariants;
  broken: [string, string[]][];
  durationMs: number;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export async function runChaos(o: ChaosOptions): Promise<ChaosReport> {
  const dir = mkdtempSync(join(tmpdir(), 'capi-uo-chaos-'));
  const cleanups: (() => Promise<unknown>)[] = [];
  let bedStoppers: { stop: () => Promise<void>; killNow: () => void } | undefined;
  const stopAll = async () => {
    for (const c of cleanups.reverse()) await c().catch(() => undefined);
    cleanups.length = 0;
    await bedStoppers?.stop().catch(() => bedStoppers?.killNow());
    if (!o.keep) rmSync(dir, { recursive: true, force: true });
  };
  o.onStopper?.({ stop: stopAll, killNow: () => bedStoppers?.killNow() });
  try {
    const schedule = planFaults({ seed: o.seed, faults: o.faults, windowMs: o.faultWindowMs, short: o.short });
    o.log(
      `chaos: seed ${o.seed}, ${o.faults} faults over ${(o.faultWindowMs / 1000).toFixed(0)} s, ${o.nodes} nodes, ` +
        `maxConcurrentMachineUpdates ${o.limit}, ${o.apis} api + ${o.workers} worker processes, at most ${o.maxMinutes} min`,
    );
    const taskQueue = `chaos-${o.seed}`;
    const bed: Bed = await startBed(
      { root: o.root, dir, apis: o.apis, workers: o.workers, taskQueue, log: o.log },
      (s) => (bedStoppers = s),
    );
    // The fixtures read the test bed from TESTBED_STATE on first use: this run's own one.
    process.env.TESTBED_STATE = bed.testbedState;
    const fixtures = await import('../testbed-fixtures.ts');
    const rigModule = await import('../machine-update-rig.ts');
    const wl = fixtures.workloadApi();
    const group = fixtures.testGroup('chaos');
    const rig = await rigModule.createMachineUpdateRig(group, o.nodes);
    await ensureNodeUpgradeRequestCrd(wl.kc);
    // Pods a PDB fault covers, spread over the nodes by the scheduler (KWOK runs them).
    const app = 'chaos-app';
    await wl.kc.makeApiClient(AppsV1Api).createNamespacedDeployment({
      namespace: group.name,
      body: fixtures.deployment(group, app, { replicas: Math.min(o.nodes, 6) }),
    });

    const failOnce = new Set<string>();
    const agentFailed: string[] = [];
    const agent = rigModule.startStandInAgent(
      'kube-system',
      (firstSeen) => Date.now() - firstSeen >= o.agentDelayMs,
      100,
      'workload',
      (req) => {
        const key = `${req.spec.nodeName}@${req.spec.kubernetesVersion}`;
        if (!failOnce.delete(key)) return false;
        agentFailed.push(key);
        return true;
      },
    );
    cleanups.push(() => agent.stop());
    const connection = await Connection.connect({ address: bed.temporalAddress });
    cleanups.push(() => connection.close());
    const client = new Client({ connection, namespace: bed.temporalNamespace });

    let runner: FaultRunner | undefined;
    const player = new CapiPlayer({
      namespace: rig.namespace,
      cluster: rig.cluster,
      machines: rig.machines,
      settings: {
        nodeUpgradeExecutor: 'delegate',
        maxConcurrentMachineUpdates: String(o.limit),
        machineUpdateRetryBackoff: '2s',
      },
      caPem: bed.caPem,
      hookUrls: () => bed.hookUrls(),
      faultActive: () => runner?.active() ?? false,
      failureBackoffMs: 3_000,
      maxPollMs: 5_000,
    });
    runner = new FaultRunner({
      bed,
      player,
      group,
      pdbSelector: { app },
      failOnce,
      nodes: rig.nodes,
      log: o.log,
    });
    cleanups.push(() => player.stop());

    // Most updates past the queue at once, sampled from the slots workflow twice a second.
    let maxHolders = 0;
    let sampling = true;
    const slots = client.workflow.getHandle(
      machineUpdateSlotsWorkflowId({ namespace: rig.namespace, name: rig.cluster }),
    );
    const sampler = (async () => {
      while (sampling) {
        const view = await slots.query(machineUpdateSlotsQuery).catch(() => undefined);
        if (view) maxHolders = Math.max(maxHolders, view.holders.length);
        await sleep(500);
      }
    })();
    cleanups.push(async () => {
      sampling = false;
      await sampler;
    });

    const started = Date.now();
    const deadline = started + o.maxMinutes * 60_000;
    player.start();
    let waves = 1;
    let next = 0;
    let convergedAt: number | undefined;
    while (Date.now() < deadline) {
      while (next < schedule.length && Date.now() - started >= schedule[next]!.atMs) runner.fire(schedule[next++]!);
      const allFired = next === schedule.length;
      if (player.converged()) {
        if (!allFired) {
          // Keep the fleet busy while faults remain: a new wave of desired specs.
          player.bumpAll();
          waves++;
          o.log(`wave ${waves}: every machine to ${versionOf(Math.max(...player.generation))}…`);
        } else if (runner.results.length === schedule.length) {
          convergedAt = Date.now();
          break;
        }
      }
      await sleep(250);
    }
    // Let the runs close (Events recorded, slots given back) before judging.
    const settleUntil = Date.now() + 60_000;
    while (convergedAt !== undefined && Date.now() < settleUntil) {
      let running = 0;
      for await (const w of client.workflow.list({ query: `ExecutionStatus = 'Running'` }))
        if (!w.workflowId.startsWith('machine-update-slots/')) running++;
      if (running === 0) break;
      await sleep(1000);
    }
    await player.stop();
    sampling = false;
    await sampler;
    await runner.settled();

    const invariants = await checkInvariants({
      client,
      wl,
      nodes: rig.nodes,
      targets: player.generation.map(versionOf),
      limit: o.limit,
      maxHolders,
      maxOpenRequests: agent.maxPending,
      requests: agent.byNodeVersion,
      agentFailed,
      answers: player.answers,
      aborted: player.superseded,
    });
    if (convergedAt === undefined)
      invariants['converged before --max-minutes'] = player.generation
        .map((g, i) => (player.doneFor[i] === g ? '' : `${rig.machines[i]} not done at ${versionOf(g)}`))
        .filter(Boolean);
    const lastFaultEnd = Math.max(...runner.results.map((r) => r.recoveredAt), started);
    const latency = (keep: (a: HookAnswer) => boolean) =>
      Math.max(0, ...player.answers.filter((a) => a.status !== 'error' && keep(a)).map((a) => a.answeredAt - a.sentAt));
    const faultsByKind = Object.fromEntries(FAULT_KINDS.map((k) => [k, 0])) as Record<FaultKind, number>;
    for (const r of runner.results) faultsByKind[r.fault.kind]++;
    return {
      seed: o.seed,
      schedule,
      faults: runner.results,
      faultsByKind,
      waves,
      converged: convergedAt !== undefined,
      convergeAfterLastFaultMs: convergedAt !== undefined ? convergedAt - lastFaultEnd : NaN,
      worstLatencyDuringFaultsMs: latency((a) => a.duringFault),
      worstLatencyOtherwiseMs: latency((a) => !a.duringFault),
      answers: player.answers.length,
      callErrors: player.answers.filter((a) => a.status === 'error').length,
      maxHolders,
      maxOpenRequests: agent.maxPending,
      agentFailures: agentFailed.length,
      invariants,
      broken: broken(invariants),
      durationMs: Date.now() - started,
    };
  } finally {
    await stopAll();
  }
}

export function formatReport(r: ChaosReport): string[] {
  const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
  const recovered = r.faults.filter((f) => f.error === undefined).length;
  return [
    `seed                        ${r.seed}`,
    `faults injected             ${r.faults.length}: ${Object.entries(r.faultsByKind)
      .filter(([, n]) => n > 0)
      .map(([k, n]) => `${k} ${n}`)
      .join(', ')}`,
    `recoveries                  ${recovered} of ${r.faults.length} faults ended with the part back`,
    `waves of desired specs      ${r.waves}`,
    `converged                   ${r.converged ? `yes, ${s(r.convergeAfterLastFaultMs)} after the last fault ended (target ≤ 120 s)` : 'NO'}`,
    `worst hook answer latency   ${s(r.worstLatencyDuringFaultsMs)} during faults, ${s(r.worstLatencyOtherwiseMs)} otherwise`,
    `hook calls                  ${r.answers}, ${r.callErrors} without an answer (api killed, timed out)`,
    `most past the queue         ${r.maxHolders} updates, ${r.maxOpenRequests} node upgrades open at once`,
    `agent failures taken        ${r.agentFailures}`,
    `run                         ${s(r.durationMs)}`,
    'invariants:',
    ...Object.entries(r.invariants).flatMap(([name, cases]) => [
      `  ${cases.length === 0 ? 'ok    ' : 'BROKEN'} ${name}${cases.length ? ` (${cases.length})` : ''}`,
      ...cases.slice(0, 5).map((c) => `           ${c}`),
    ]),
  ];
}
