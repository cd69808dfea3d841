// The visibility Lists behind UpgradeViews: reads of concurrent polls are queued and go out together
// in one List restricted to their workflow ids (at most `batchSize` ids, at most `maxListsInFlight`
// Lists at once, started at most `maxListsPerSecond`): under load batches grow, calls do not.

/** One running upgrade as a List returns it. */
export interface ListedRun {
  workflowId: string;
  runId: string;
  memo?: unknown;
}

export interface ListBatchesOptions {
  /** The running upgrades among `workflowIds` (at most `batchSize` ids). */
  listRunning: (workflowIds: readonly string[]) => AsyncIterable<ListedRun>;
  batchSize: number;
  maxListsInFlight: number;
  maxListsPerSecond: number;
  /** Bound of the reads waiting for a List. */
  maxEntries: number;
  /** Runs timers and Lists in the context the views were made in. */
  outside: <R>(fn: () => R) => R;
  /** Counted here, shown by the views. */
  stats: { lists: number; listedRows: number };
  log?: { warn: (obj: object, msg: string) => void } | undefined;
}

/** What one List found of a workflow id: its running run, if any, and when that List started. */
export interface Listed {
  run: ListedRun | undefined;
  started: number;
}

interface Waiting {
  resolve: (listed: Listed) => void;
  reject: (err: unknown) => void;
}

export class ListBatches {
  /** Reads waiting for the next List, by workflow id. */
  private readonly queued = new Map<string, Waiting>();
  private listsInFlight = 0;
  private flushScheduled = false;
  /** When the next List may start (maxListsPerSecond). */
  private nextListAt = 0;
  private listFailing = false;

  private readonly opts: ListBatchesOptions;

  constructor(opts: ListBatchesOptions) {
    this.opts = opts;
  }

  /** Reads waiting for a List. */
  get size(): number {
    return this.queued.size;
  }

  /** The workflow's running run as the next List shows it; rejects when that List fails. */
  read(workflowId: string): Promise<Listed> {
    if (this.queued.size >= this.opts.maxEntries) return Promise.reject(new Error('too many reads waiting for a List'));
    return new Promise((resolve, reject) => {
      this.queued.set(workflowId, { resolve, reject });
      this.scheduleFlush();
    });
  }

  /**
   * The next List goes out after this turn of the event loop (or when the rate allows), with every
   * read queued by then.
   */
  private scheduleFlush(): void {
    if (this.flushScheduled || this.queued.size === 0 || this.listsInFlight >= this.opts.maxListsInFlight) return;
    this.flushScheduled = true;
    const flush = () =>
      this.opts.outside(() => {
        this.flushScheduled = false;
        if (this.queued.size === 0 || this.listsInFlight >= this.opts.maxListsInFlight) return;
        if (Date.now() < this.nextListAt) return this.scheduleFlush();
        this.nextListAt = Math.max(Date.now(), this.nextListAt) + 1000 / this.opts.maxListsPerSecond;
        const batch = new Map<string, Waiting>();
        for (const [id, waiting] of this.queued) {
          if (batch.size >= this.opts.batchSize) break;
          batch.set(id, waiting);
          this.queued.delete(id);
        }
        this.listsInFlight++;
        void this.list(batch).finally(() => {
          this.listsInFlight--;
          this.scheduleFlush();
        });
        this.scheduleFlush();
      });
    const wait = this.nextListAt - Date.now();
    if (wait > 0) setTimeout(flush, wait);
    else setImmediate(flush);
  }

  private async list(batch: Map<string, Waiting>): Promise<void> {
    const started = Date.now();
    this.opts.stats.lists++;
    const listed = new Map<string, ListedRun>();
    try {
      for await (const run of this.opts.listRunning([...batch.keys()])) {
        this.opts.stats.listedRows++;
        if (batch.has(run.workflowId)) listed.set(run.workflowId, run);
      }
    } catch (err) {
      if (!this.listFailing)
        this.opts.log?.warn({ err: String(err) }, 'listing polled cluster upgrades failed; hooks describe instead');
      this.listFailing = true;
      for (const waiting of batch.values()) waiting.reject(err);
      return;
    }
    this.listFailing = false;
    for (const [id, waiting] of batch) waiting.resolve({ run: listed.get(id), started });
  }
}
