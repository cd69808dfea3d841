// One function per fault kind. Each starts the fault, holds it for its pause where it
// has one, ends it, and resolves once the part it broke is back (a restarted process
// ready, the API server continued, the PDB gone). A kind never overlaps itself: a
// fault of a kind still active waits for it (a Temporal cannot be killed while down).
import { PolicyV1Api } from '@kubernetes/client-node';
import { Client, Connection, WorkflowNotFoundError } from '@temporalio/client';
import { machineUpdateSlotsWorkflowId } from '../../src/model/machine-update.ts';
import { abortSignal, slotsAbortSignal } from '../../src/workflows/messages.ts';
import { podDisruptionBudget, type TestGroup, workloadApi } from '../testbed-fixtures.ts';
import type { Bed } from './bed.ts';
import type { CapiPlayer } from './capi-player.ts';
import type { FaultKind, PlannedFault } from './schedule.ts';

export interface FaultContext {
  bed: Bed;
  player: CapiPlayer;
  group: TestGroup;
  /** The pods a PDB fault covers (a Deployment spread over the nodes). */
  pdbSelector: Record<string, string>;
  /** `<node>@<version>` whose next NodeUpgradeRequest the stand-in agent answers Failed. */
  failOnce: Set<string>;
  nodes: string[];
  log: (line: string) => void;
}

export interface FaultResult {
  fault: PlannedFault;
  /** What it hit (a pid, a machine, a workflow). */
  target: string;
  startedAt: number;
  /** When the broken part was back. */
  recoveredAt: number;
  error?: string;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** The machines still updating (told neither done for their current spec), or every machine if none. */
function inFlight(player: CapiPlayer): number[] {
  const busy = player.generation.map((g, i) => (player.doneFor[i] === g ? -1 : i)).filter((i) => i >= 0);
  return busy.length > 0 ? busy : player.generation.map((_, i) => i);
}

/** Calls `call` until it succeeds or fails with `done` (exists already, gone already), for at most 3 minutes. */
async function untilAnswered(call: () => Promise<unknown>, done: number): Promise<void> {
  const deadline = Date.now() + 180_000;
  for (;;) {
    try {
      await call();
      return;
    } catch (err) {
      if ((err as { code?: number }).code === done) return;
      if (Date.now() > deadline) throw err;
      await sleep(1000);
    }
  }
}

const pickOf = <T>(xs: T[], pick: number): T => xs[Math.floor(pick * xs.length)]!;

async function abortMachineUpdate(ctx: FaultContext, workflowId: string): Promise<void> {
  // The operator's `temporal workflow signal --workflow-id … --name abort`, through the client.
  const connection = await Connection.connect({ address: ctx.bed.temporalAddress, connectTimeout: 5000 });
  try {
    const client = new Client({ connection, namespace: ctx.bed.temporalNamespace });
    const reason = 'chaos: operator abort';
    await client.workflow
      .getHandle(workflowId)
      .signal(abortSignal, { reason })
      .catch(async (err: unknown) => {
        if (!(err instanceof WorkflowNotFoundError)) throw err;
        // Still in line: no run to signal yet; the slots workflow aborts it by name (docs/in-place-updates.md).
        const { namespace, cluster } = ctx.player.o;
        await client.workflow
          .getHandle(machineUpdateSlotsWorkflowId({ namespace, name: cluster }))
          .signal(slotsAbortSignal, { workflowId, reason });
      });
  } finally {
    await connection.close();
  }
}

const RUN: Record<FaultKind, (ctx: FaultContext, f: PlannedFault) => Promise<string>> = {
  'kill-worker': async (ctx, f) => {
    const i = Math.floor(f.pick * ctx.bed.workers.length);
    const pid = ctx.bed.workers[i]!.pid;
    await ctx.bed.killAndRestart('worker', i, f.pauseMs);
    return `worker pid ${pid}`;
  },
  'kill-api': async (ctx, f) => {
    const i = Math.floor(f.pick * ctx.bed.apis.length);
    const pid = ctx.bed.apis[i]!.pid;
    await ctx.bed.killAndRestart('api', i, f.pauseMs);
    return `api pid ${pid}`;
  },
  'kill-temporal': async (ctx, f) => {
    await ctx.bed.killTemporalAndRestart(f.pauseMs);
    return 'temporal dev server';
  },
  'stop-workload-apiserver': async (ctx, f) => {
    await ctx.bed.stopWorkloadApiServer(f.pauseMs);
    return 'workload kube-apiserver';
  },
  'pdb-blocks-drain': async (ctx, f) => {
    const policy = workloadApi().kc.makeApiClient(PolicyV1Api);
    const name = `chaos-pdb-${f.n}`;
    const namespace = ctx.group.name;
    // maxUnavailable 0: no eviction of the covered pods is allowed while it is there. Created and
    // deleted again until the API server answers (another fault may have it stopped).
    const body = podDisruptionBudget(ctx.group, name, ctx.pdbSelector, { maxUnavailable: 0 });
    await untilAnswered(() => policy.createNamespacedPodDisruptionBudget({ namespace, body }), 409);
    await sleep(f.pauseMs);
    await untilAnswered(() => policy.deleteNamespacedPodDisruptionBudget({ name, namespace }), 404);
    return `PodDisruptionBudget ${namespace}/${name}`;
  },
  'agent-fails-once': async (ctx, f) => {
    const i = pickOf(inFlight(ctx.player), f.pick);
    const key = `${ctx.nodes[i]}@${ctx.player.request(i).desired.machine.spec.version}`;
    ctx.failOnce.add(key);
    return `agent request for ${key}`;
  },
  'abort-then-new-spec': async (ctx, f) => {
    const i = pickOf(inFlight(ctx.player), f.pick);
    const workflowId = ctx.player.workflowId(i);
    // A run not started yet (still in line, or not called) has nothing to abort: the new spec still comes.
    await abortMachineUpdate(ctx, workflowId).catch((err: unknown) =>
      ctx.log(`  abort of ${workflowId}: ${String(err).split('\n')[0]}`),
    );
    await sleep(f.pauseMs);
    ctx.player.bump(i);
    return `${workflowId}, then machine ${i} at ${ctx.player.request(i).desired.machine.spec.version}`;
  },
  'newer-spec': async (ctx, f) => {
    const i = pickOf(inFlight(ctx.player), f.pick);
    const before = ctx.player.workflowId(i);
    ctx.player.bump(i);
    return `machine ${i}: ${before} superseded by ${ctx.player.request(i).desired.machine.spec.version}`;
  },
};

export class FaultRunner {
  readonly results: FaultResult[] = [];
  #active = 0;
  #byKind = new Map<FaultKind, Promise<unknown>>();
  #all: Promise<unknown>[] = [];

  readonly ctx: FaultContext;

  constructor(ctx: FaultContext) {
    this.ctx = ctx;
  }

  active(): boolean {
    return this.#active > 0;
  }

  /** Starts `f` (after any fault of its kind still active) without waiting for it. */
  fire(f: PlannedFault): void {
    const previous = this.#byKind.get(f.kind) ?? Promise.resolve();
    const run = previous.then(async () => {
      this.#active++;
      const startedAt = Date.now();
      let target = '';
      let error: string | undefined;
      try {
        target = await RUN[f.kind](this.ctx, f);
      } catch (err) {
        error = String(err).split('\n')[0];
      } finally {
        this.#active--;
      }
      const result: FaultResult = { fault: f, target, startedAt, recoveredAt: Date.now(), ...(error ? { error } : {}) };
      this.results.push(result);
      this.ctx.log(
        `fault ${f.n} ${f.kind} (${(f.pauseMs / 1000).toFixed(1)} s): ${error ? `ERROR ${error}` : target}, ` +
          `back after ${((result.recoveredAt - startedAt) / 1000).toFixed(1)} s`,
      );
    });
    this.#byKind.set(f.kind, run);
    this.#all.push(run);
  }

  async settled(): Promise<void> {
    await Promise.all(this.#all);
  }
}
