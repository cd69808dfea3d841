// Who may read from workload clusters now: a slot per request (per cluster and
// overall, first come first served) and a byte budget for the answers held in
// memory. One gate per process: a hostile cluster holds at most its own slots and
// half the budget, and every other cluster keeps being read.

/** A counting semaphore whose waiters leave when their signal aborts. */
export class Slots {
  private free: number;
  private readonly waiting: { grant: () => void }[] = [];

  constructor(size: number) {
    this.free = size;
  }

  /** Resolves with the function that gives the slot back; rejects with the signal's reason if it aborts first. */
  async take(signal: AbortSignal): Promise<() => void> {
    signal.throwIfAborted();
    if (this.free > 0) {
      this.free--;
      return this.giver();
    }
    return await new Promise<() => void>((resolve, reject) => {
      const waiter = {
        grant: () => {
          signal.removeEventListener('abort', onAbort);
          resolve(this.giver());
        },
      };
      const onAbort = () => {
        const i = this.waiting.indexOf(waiter);
        if (i >= 0) this.waiting.splice(i, 1);
        reject(signal.reason as Error);
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.waiting.push(waiter);
    });
  }

  get queued(): number {
    return this.waiting.length;
  }

  private giver(): () => void {
    let given = false;
    return () => {
      if (given) return;
      given = true;
      const next = this.waiting.shift();
      if (next) next.grant();
      else this.free++;
    };
  }
}

/** Bytes held, against a total and a per-key share. Charges fail at once rather than wait: no read waits on another. */
export class ByteBudget {
  private held = 0;
  private readonly byKey = new Map<string, number>();

  private readonly total: number;
  private readonly perKey: number;

  constructor(total: number, perKey: number) {
    this.total = total;
    this.perKey = perKey;
  }

  /** Whether `bytes` more fit for `key`; if so they are charged. */
  charge(key: string, bytes: number): boolean {
    const mine = this.byKey.get(key) ?? 0;
    if (this.held + bytes > this.total || mine + bytes > this.perKey) return false;
    this.held += bytes;
    this.byKey.set(key, mine + bytes);
    return true;
  }

  release(key: string, bytes: number): void {
    if (bytes <= 0) return;
    this.held -= bytes;
    const left = (this.byKey.get(key) ?? 0) - bytes;
    if (left > 0) this.byKey.set(key, left);
    else this.byKey.delete(key);
  }

  get inUse(): number {
    return this.held;
  }
}

/** The process's gate to workload clusters: per-cluster and overall slots, and the byte budget. */
export class ReadGate {
  readonly overall: Slots;
  readonly budget: ByteBudget;
  private readonly clusters = new Map<string, { slots: Slots; users: number }>();
  private readonly perCluster: number;

  constructor(overall: number, perCluster: number, budgetBytes: number) {
    this.perCluster = perCluster;
    this.overall = new Slots(overall);
    this.budget = new ByteBudget(budgetBytes, Math.floor(budgetBytes / 2));
  }

  /** A slot of `cluster`'s and one overall, in that order (a busy cluster queues on its own slots first). */
  async enter(cluster: string, signal: AbortSignal): Promise<() => void> {
    let entry = this.clusters.get(cluster);
    if (!entry) this.clusters.set(cluster, (entry = { slots: new Slots(this.perCluster), users: 0 }));
    entry.users++;
    const leaveCluster = () => {
      if (--entry.users === 0) this.clusters.delete(cluster);
    };
    let giveCluster: (() => void) | undefined;
    try {
      giveCluster = await entry.slots.take(signal);
      const giveOverall = await this.overall.take(signal);
      return () => {
        giveOverall();
        giveCluster?.();
        leaveCluster();
      };
    } catch (err) {
      giveCluster?.();
      leaveCluster();
      throw err;
    }
  }

  /** Clusters with a request in flight or waiting (kept only while they have one). */
  get clustersTracked(): number {
    return this.clusters.size;
  }
}
