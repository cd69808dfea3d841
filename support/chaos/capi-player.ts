// Cluster API's machine controller as the chaos run plays it: per Machine, UpdateMachine
// over HTTPS (CAPI's request shape, `?timeout=10s`) to one of the live apis in turn,
// called again after `retryAfterSeconds` while it runs, after a backoff on `Failure`,
// after a second when the call itself fails; done on `retryAfterSeconds: 0`. A Machine's
// desired spec is its version: a newer one (v1.31.15 → .16 → …) is a new desired spec.
// Every answer is recorded, with when it was sent and got, for the invariants.
import { defaultHandlerName, HOOKS_API_VERSION } from '../../src/api/hooks/contract.ts';
import { hookPath } from '../../src/api/hooks/hook-route.ts';
import { specHash } from '../../src/domain/in-place.ts';
import { machineUpdateWorkflowId } from '../../src/model/machine-update.ts';
import { CLUSTER_NAME_LABEL } from '../../src/platform/kube/capi-api.ts';
import { infrastructureMachine, machine as machineObject } from '../capi-fixtures.ts';
import { callHook } from '../capi-client.ts';

export interface HookAnswer {
  machine: number;
  version: string;
  workflowId: string;
  sentAt: number;
  answeredAt: number;
  /** `error`: no HTTP 200 answer (connection refused, reset, timed out, another status). */
  status: 'Success' | 'Failure' | 'error';
  retryAfterSeconds?: number;
  message: string;
  /** A fault was active while the call ran. */
  duringFault: boolean;
}

export interface PlayerOptions {
  namespace: string;
  cluster: string;
  machines: string[];
  settings: Record<string, string>;
  caPem: string;
  hookUrls: () => string[];
  /** True while any fault is active. */
  faultActive: () => boolean;
  /** The wait after a `Failure` (CAPI backs off; the update's retry backoff is set shorter than this). */
  failureBackoffMs: number;
  /** The longest wait between polls (CAPI honours retryAfterSeconds; shorter keeps the run short). */
  maxPollMs: number;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const CALL_TIMEOUT_MS = 15_000;

/** v1.31.15 for generation 0, then one patch release per newer desired spec. */
export const versionOf = (generation: number) => `v1.31.${15 + generation}`;

export class CapiPlayer {
  readonly answers: HookAnswer[] = [];
  /** Each machine's desired spec generation (see versionOf). */
  readonly generation: number[];
  /** The generation each machine was last told done for (-1: none yet). */
  readonly doneFor: number[];
  /** Runs a newer desired spec replaced (their `aborted` answers are true). */
  readonly superseded = new Set<string>();
  #running = false;
  #loops: Promise<void>[] = [];
  #turn = 0;
  #wake = new Map<number, () => void>();

  readonly o: PlayerOptions;

  constructor(o: PlayerOptions) {
    this.o = o;
    this.generation = o.machines.map(() => 0);
    this.doneFor = o.machines.map(() => -1);
  }

  request(i: number, generation = this.generation[i]!) {
    const name = this.o.machines[i]!;
    const m = machineObject(name, this.o.namespace, versionOf(generation));
    m.metadata.labels[CLUSTER_NAME_LABEL] = this.o.cluster;
    m.spec.clusterName = this.o.cluster;
    const { bootstrap: _bootstrap, ...spec } = m.spec;
    const desired = { machine: { ...m, spec }, infrastructureMachine: infrastructureMachine(name, this.o.namespace) };
    return { apiVersion: HOOKS_API_VERSION, kind: 'UpdateMachineRequest', settings: this.o.settings, desired };
  }

  workflowId(i: number, generation = this.generation[i]!): string {
    const { desired } = this.request(i, generation);
    return machineUpdateWorkflowId({ namespace: this.o.namespace, name: this.o.machines[i]! }, specHash(desired));
  }

  converged(): boolean {
    return this.generation.every((g, i) => this.doneFor[i] === g);
  }

  /** A newer desired spec for machine `i` (CAPI after a MachineDeployment change), called at once. */
  bump(i: number): void {
    this.superseded.add(this.workflowId(i));
    this.generation[i]!++;
    this.#wake.get(i)?.();
  }

  /** A new wave: every machine gets a newer desired spec. */
  bumpAll(): void {
    for (const i of this.generation.keys()) this.bump(i);
  }

  async #call(i: number): Promise<HookAnswer> {
    const generation = this.generation[i]!;
    const urls = this.o.hookUrls();
    const sentAt = Date.now();
    const duringStart = this.o.faultActive();
    const base = { machine: i, version: versionOf(generation), workflowId: this.workflowId(i, generation), sentAt };
    if (urls.length === 0)
      return { ...base, answeredAt: sentAt, status: 'error', message: 'no live api', duringFault: true };
    const url = urls[this.#turn++ % urls.length]!;
    let timer: NodeJS.Timeout | undefined;
    try {
      const res = await Promise.race([
        callHook<{ status: string; message?: string; retryAfterSeconds?: number }>(
          url,
          hookPath('UpdateMachine', defaultHandlerName('UpdateMachine')),
          this.request(i, generation),
          { ca: this.o.caPem, timeout: '10s' },
        ),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error(`no answer within ${CALL_TIMEOUT_MS} ms`)), CALL_TIMEOUT_MS);
        }),
      ]);
      const answeredAt = Date.now();
      const duringFault = duringStart || this.o.faultActive();
      if (res.statusCode !== 200 || (res.body.status !== 'Success' && res.body.status !== 'Failure'))
        return { ...base, answeredAt, status: 'error', message: `HTTP ${res.statusCode}: ${res.text}`, duringFault };
      return {
        ...base,
        answeredAt,
        status: res.body.status,
        ...(res.body.retryAfterSeconds !== undefined ? { retryAfterSeconds: res.body.retryAfterSeconds } : {}),
        message: res.body.message ?? '',
        duringFault,
      };
    } catch (err) {
      return { ...base, answeredAt: Date.now(), status: 'error', message: String(err), duringFault: true };
    } finally {
      clearTimeout(timer);
    }
  }

  async #loop(i: number): Promise<void> {
    while (this.#running) {
      if (this.doneFor[i] === this.generation[i]) {
        await new Promise<void>((r) => {
          this.#wake.set(i, r);
          setTimeout(r, 1000);
        });
        continue;
      }
      const a = await this.#call(i);
      this.answers.push(a);
      const current = Number(a.version.split('.')[2]) - 15 === this.generation[i];
      let waitMs: number;
      if (a.status === 'error') waitMs = 1000;
      else if (a.status === 'Failure') waitMs = this.o.failureBackoffMs;
      else if (a.retryAfterSeconds === 0) {
        if (current) this.doneFor[i] = this.generation[i]!;
        waitMs = 0;
      } else waitMs = Math.min((a.retryAfterSeconds ?? 1) * 1000, this.o.maxPollMs);
      // A newer desired spec is called at once, as CAPI reconciles a changed Machine at once.
      if (waitMs > 0)
        await new Promise<void>((r) => {
          this.#wake.set(i, r);
          setTimeout(r, waitMs);
        });
    }
  }

  start(): void {
    this.#running = true;
    this.#loops = this.o.machines.map((_, i) => this.#loop(i));
  }

  async stop(): Promise<void> {
    this.#running = false;
    for (const wake of this.#wake.values()) wake();
    await Promise.all(this.#loops);
  }
}

export { sleep };
