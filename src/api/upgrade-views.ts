// What the lifecycle hooks answer from: each cluster upgrade's current run and
// memo, kept per api process so that CAPI's repeat polls cost no Temporal call.
//
// - One visibility List of the running cluster upgrades (memo included, paged)
//   refreshes every entry each `refreshMs`, for as long as hooks are being
//   called: a fleet of waiting upgrades costs one List per second, not one
//   describe per poll.
// - An entry older than `maxStaleMs` is not answered from: the call describes
//   the run instead, and concurrent calls for the same upgrade share that one
//   describe (single-flight).
// - Our own writes (start, update, signal) drop the entry, so the next call
//   reads what the write did; a List that began before the write cannot put
//   the older memo back.
// - A List cannot tell a workflow task that keeps failing (a bug) from one
//   that waits: every entry in use is also described in the background every
//   `redescribeMs`.
// The bound: an answer is at most `maxStaleMs` plus the visibility store's lag
// older than the workflow's state (the dev server's lag is milliseconds).
import { AsyncLocalStorage } from 'node:async_hooks';

/** What a hook needs to know about an upgrade's current run. */
export interface RunView {
  runId: string;
  running: boolean;
  /** COMPLETED, TERMINATED, FAILED, TIMED_OUT, CANCELLED, CONTINUED_AS_NEW, RUNNING. */
  status: string;
  memo?: unknown;
  /** The pending workflow task is a retry: the last one failed or timed out. */
  workflowTaskRetrying: boolean;
}

/** One running upgrade as a List returns it. */
export interface ListedRun {
  workflowId: string;
  runId: string;
  memo?: unknown;
}

export interface UpgradeViewsOptions {
  /** Describe of one upgrade's current run (undefined: no such workflow). */
  describe: (workflowId: string) => Promise<RunView | undefined>;
  /** Every running upgrade. */
  listRunning: () => AsyncIterable<ListedRun>;
  maxStaleMs?: number;
  refreshMs?: number;
  redescribeMs?: number;
  /** The refresh stops after this long without a call (and starts again with the next). */
  idleMs?: number;
  log?: { warn: (obj: object, msg: string) => void };
}

interface Entry {
  view: RunView | undefined;
  /** When the state it shows was read (a List's or describe's start). */
  asOf: number;
  describedAt: number;
}

export class UpgradeViews {
  /**
   * The context the views were made in (app start). The refresh runs there: a timer scheduled
   * during a hook call would otherwise inherit that call's Temporal deadline and abort signal
   * (the client keeps them in AsyncLocalStorage), and every later List would fail past it.
   */
  private readonly outside = AsyncLocalStorage.snapshot();
  private readonly opts: Required<Omit<UpgradeViewsOptions, 'log'>> & Pick<UpgradeViewsOptions, 'log'>;
  private readonly entries = new Map<string, Entry>();
  private readonly inflight = new Map<string, Promise<RunView | undefined>>();
  /** When each upgrade was last written by this process. */
  private readonly writtenAt = new Map<string, number>();
  /** Workflow ids of the last complete List, and when it began. */
  private running: { ids: Set<string>; asOf: number } | undefined;
  private timer: NodeJS.Timeout | undefined;
  private lastUsed = 0;
  private closed = false;
  readonly stats = { hits: 0, describes: 0, joined: 0, lists: 0 };

  constructor(options: UpgradeViewsOptions) {
    this.opts = { maxStaleMs: 1_500, refreshMs: 1_000, redescribeMs: 15_000, idleMs: 60_000, ...options };
  }

  /** A view at most `maxStaleMs` old, from memory or a (shared) describe. */
  async get(workflowId: string): Promise<RunView | undefined> {
    this.touch();
    const now = Date.now();
    const entry = this.entries.get(workflowId);
    if (entry && now - entry.asOf <= this.opts.maxStaleMs) {
      this.stats.hits++;
      if (now - entry.describedAt > this.opts.redescribeMs) void this.load(workflowId).catch(() => undefined);
      return entry.view;
    }
    return await this.load(workflowId);
  }

  /** Reads the run now, ignoring what is kept (after a write was refused, say). */
  async fresh(workflowId: string): Promise<RunView | undefined> {
    this.touch();
    this.invalidate(workflowId);
    return await this.load(workflowId);
  }

  /**
   * True when the last List (at most `maxStaleMs` old) did not show this upgrade running and
   * nothing else is known of it: most likely it never started. A start can then be tried directly.
   */
  probablyAbsent(workflowId: string): boolean {
    const running = this.running;
    return (
      running !== undefined &&
      Date.now() - running.asOf <= this.opts.maxStaleMs &&
      !running.ids.has(workflowId) &&
      !this.entries.has(workflowId) &&
      !this.writtenAt.has(workflowId)
    );
  }

  /** After this process wrote to the upgrade: the next call reads what the write did. */
  invalidate(workflowId: string): void {
    this.entries.delete(workflowId);
    this.writtenAt.set(workflowId, Date.now());
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private load(workflowId: string): Promise<RunView | undefined> {
    const shared = this.inflight.get(workflowId);
    if (shared) {
      this.stats.joined++;
      return shared;
    }
    const started = Date.now();
    const loading = (async () => {
      this.stats.describes++;
      const view = await this.opts.describe(workflowId);
      // A write since the describe began may not show in it: keep nothing.
      if ((this.writtenAt.get(workflowId) ?? 0) < started)
        this.entries.set(workflowId, { view, asOf: started, describedAt: started });
      return view;
    })();
    this.inflight.set(workflowId, loading);
    const clear = () => this.inflight.delete(workflowId);
    loading.then(clear, clear);
    return loading;
  }

  private touch(): void {
    this.lastUsed = Date.now();
    if (!this.timer && !this.closed) this.schedule(0);
  }

  private schedule(ms: number): void {
    this.timer = setTimeout(() => this.outside(() => void this.refresh()), ms);
    this.timer.unref();
  }

  private async refresh(): Promise<void> {
    const started = Date.now();
    if (this.closed || started - this.lastUsed > this.opts.idleMs) {
      // Idle: forget everything; the next call describes and starts the refresh again.
      this.timer = undefined;
      this.entries.clear();
      this.writtenAt.clear();
      this.running = undefined;
      return;
    }
    try {
      const ids = new Set<string>();
      for await (const run of this.opts.listRunning()) {
        ids.add(run.workflowId);
        if ((this.writtenAt.get(run.workflowId) ?? 0) >= started) continue;
        const entry = this.entries.get(run.workflowId);
        const sameRun = entry?.view?.runId === run.runId;
        this.entries.set(run.workflowId, {
          view: {
            runId: run.runId,
            running: true,
            status: 'RUNNING',
            ...(run.memo !== undefined ? { memo: run.memo } : {}),
            workflowTaskRetrying: sameRun ? (entry?.view?.workflowTaskRetrying ?? false) : false,
          },
          asOf: started,
          // A run first seen here is described after redescribeMs, like any other.
          describedAt: sameRun ? (entry?.describedAt ?? started) : started,
        });
      }
      this.stats.lists++;
      this.running = { ids, asOf: started };
      // Closed or gone since: described again when next asked (entries past maxStaleMs are never answered from).
      for (const [id, entry] of this.entries) if (started - entry.asOf > this.opts.idleMs) this.entries.delete(id);
      for (const [id, at] of this.writtenAt) if (started - at > this.opts.maxStaleMs) this.writtenAt.delete(id);
    } catch (err) {
      this.running = undefined;
      this.opts.log?.warn({ err: String(err) }, 'listing running cluster upgrades failed; hooks describe instead');
    }
    if (!this.closed) this.schedule(Math.max(0, this.opts.refreshMs - (Date.now() - started)));
  }
}
