// What the lifecycle hooks answer from: each cluster upgrade's current run and
// memo, kept per api process so that CAPI's repeat polls cost little, and the
// same whatever the number of upgrades running in the fleet.
//
// - Only upgrades polled here are read, and only when a poll needs them: a poll
//   whose entry is older than `maxStaleMs` reads the run again. The reads of
//   concurrent polls go into one visibility List restricted to their workflow
//   ids (`WorkflowId IN (...)`, at most `batchSize` ids, at most
//   `maxListsInFlight` Lists at once and `maxListsPerSecond`, within the
//   frontend's visibility rate limit: under load batches grow, calls do not).
//   A poll costs at most one listed row; nothing is read between polls, so an
//   idle process reads nothing. Concurrent reads of one upgrade share one read.
// - A poll whose answer would still hold CAPI back (a gate that waits) may be
//   answered from what is kept however old it is (`kept`), the read going out
//   behind the answer (`refreshBehind`, gathered for `refreshBatchMs` so that
//   the polls of a second share one List): a stale "still waiting" only makes
//   CAPI wait one poll longer, so no waiting poll waits on Temporal. An answer
//   that lets CAPI go on is never given from an entry older than `maxStaleMs`.
// - A describe instead of a List row: for an upgrade this process wrote to in
//   the last `writeMemoryMs` (our own writes drop the entry, and a List can still
//   show the older memo), for ids no query can name, when the List fails, for a
//   run the List no longer shows (it closed: how?), and once per `redescribeMs`
//   (jittered; 5 min: at CAPI's 10 s re-poll, one poll in 15-30) for each upgrade
//   in use, because a List cannot tell a workflow task that keeps failing (a bug)
//   from one that waits; a bug so found waits that long to show in the hook's
//   answer (a write to the upgrade shows it at once). At most `maxRedescribes`
//   of those at once: a burst of polls that find their entries due together (a
//   restart) is read by List and described on later polls, never as a storm.
// - An upgrade the List does not show running and that this process never saw
//   running reads as absent (undefined): the hook tries a start, which a closed
//   run refuses, and then describes it.
// - Every map is bounded by `maxEntries` and pruned on its own timer (entries
//   unused for `idleMs`, writes older than `writeMemoryMs`), whether Lists succeed
//   or not. Each api replica keeps its own views and relies on no other.
// The bound: an answer that lets CAPI go on (or fails it) is at most `maxStaleMs`
// plus the visibility store's lag older than the workflow's state (the dev
// server's lag is milliseconds; SQL visibility's is the history service's
// visibility queue); an answer read after this process's own write comes from a
// describe, without that lag. A "still waiting" answer from `kept` is at most
// one poll older than that: the poll before it read again behind its answer.
import { AsyncLocalStorage } from 'node:async_hooks';
import { ListBatches, type ListedRun } from './upgrade-list-batches.ts';

export type { ListedRun } from './upgrade-list-batches.ts';

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

export interface UpgradeViewsOptions {
  /** Describe of one upgrade's current run (undefined: no such workflow). */
  describe: (workflowId: string) => Promise<RunView | undefined>;
  /** The running upgrades among `workflowIds` (at most `batchSize` ids, each matching LISTABLE_ID). */
  listRunning: (workflowIds: readonly string[]) => AsyncIterable<ListedRun>;
  maxStaleMs?: number;
  /** How often each upgrade in use is described (jittered between half of it and all of it). */
  redescribeMs?: number;
  /** Re-describes at most in flight at once. */
  maxRedescribes?: number;
  /** How long after this process wrote to an upgrade its reads are describes. */
  writeMemoryMs?: number;
  batchSize?: number;
  maxListsInFlight?: number;
  /** Lists started per second at most (the frontend limits visibility calls per namespace: 10/s by default). */
  maxListsPerSecond?: number;
  /**
   * How long a read behind a kept answer waits for others to share its List: off the request path,
   * and CAPI's next poll is at least 10 s away, so polls spread over a second go out in one List.
   */
  refreshBatchMs?: number;
  /** Bound of each map (entries, writes, reads waiting for a List). */
  maxEntries?: number;
  /**
   * An entry unused this long is dropped (2 h: twice the longest CAPI may be told to stay away from a
   * gate that waits for a known time, an hour, so a waiting upgrade keeps its view between polls).
   */
  idleMs?: number;
  log?: { warn: (obj: object, msg: string) => void };
}

/** Workflow ids that can go into a double-quoted query literal as they are (ours: names, uids and '/'). */
export const LISTABLE_ID = /^[A-Za-z0-9._:/-]{1,400}$/;

interface Entry {
  view: RunView | undefined;
  /** When the state it shows was read (a List's or describe's start). */
  asOf: number;
  /** When this upgrade is to be described again. */
  describeAt: number;
  usedAt: number;
}

type Read = 'list' | 'describe' | 'redescribe';

export class UpgradeViews {
  /**
   * The context the views were made in (app start). Lists and timers run there: work begun
   * during a hook call would otherwise inherit that call's Temporal deadline and abort signal
   * (the client keeps them in AsyncLocalStorage), and fail for every call that shares it.
   */
  private readonly outside = AsyncLocalStorage.snapshot();
  private readonly opts: Required<Omit<UpgradeViewsOptions, 'log'>> & Pick<UpgradeViewsOptions, 'log'>;
  private readonly entries = new Map<string, Entry>();
  private readonly inflight = new Map<string, { started: number; read: Promise<RunView | undefined> }>();
  /** When each upgrade was last written by this process. */
  private readonly writtenAt = new Map<string, number>();
  /** Upgrades to read again behind kept answers, at the next refresh batch. */
  private readonly behind = new Map<string, number>();
  private behindTimer: NodeJS.Timeout | undefined;
  private readonly lists: ListBatches;
  private redescribesInFlight = 0;
  private sweeper: NodeJS.Timeout | undefined;
  private closed = false;
  /** hits: answers from an entry within maxStaleMs; keptAnswers: answers from an older one (refreshed behind). */
  readonly stats = { hits: 0, keptAnswers: 0, describes: 0, redescribes: 0, joined: 0, lists: 0, listedRows: 0 };

  constructor(options: UpgradeViewsOptions) {
    this.opts = {
      maxStaleMs: 1_500,
      redescribeMs: 300_000,
      maxRedescribes: 4,
      writeMemoryMs: 10_000,
      batchSize: 100,
      maxListsInFlight: 2,
      maxListsPerSecond: 50,
      refreshBatchMs: 1_000,
      maxEntries: 20_000,
      idleMs: 7_200_000,
      ...options,
    };
    this.lists = new ListBatches({ ...this.opts, outside: this.outside, stats: this.stats });
  }

  /** A view at most `maxStaleMs` old, from memory or a (shared) read. */
  async get(workflowId: string): Promise<RunView | undefined> {
    const now = Date.now();
    this.startSweeper();
    const entry = this.entries.get(workflowId);
    if (entry) entry.usedAt = now;
    if (entry && now - entry.asOf <= this.opts.maxStaleMs) {
      this.stats.hits++;
      if (now >= entry.describeAt && this.redescribesInFlight < this.opts.maxRedescribes)
        void this.load(workflowId, 'redescribe').catch(() => undefined);
      return entry.view;
    }
    return await this.load(workflowId, this.readFor(workflowId, entry, now));
  }

  /**
   * What is kept of the upgrade however old it is (undefined: nothing is kept), for an answer that is
   * safe when stale: a gate that still waits (CAPI then only waits a little longer). Whoever answers
   * from it calls {@link refreshBehind}, so the next poll reads what the workflow did meanwhile.
   */
  kept(workflowId: string): RunView | undefined {
    const entry = this.entries.get(workflowId);
    if (!entry) return undefined;
    entry.usedAt = Date.now();
    return entry.view;
  }

  /**
   * After an answer from {@link kept}: reads the upgrade again behind it, off the request path (shared
   * with a read in flight, batched into the next List like any other). A read that fails drops the
   * entry, so the next poll reads before it answers instead of answering from the old view again.
   */
  refreshBehind(workflowId: string): void {
    const now = Date.now();
    this.startSweeper();
    const entry = this.entries.get(workflowId);
    if (!entry) return;
    this.stats.keptAnswers++;
    const read: Read | undefined =
      now - entry.asOf > this.opts.maxStaleMs
        ? this.readFor(workflowId, entry, now)
        : now >= entry.describeAt && this.redescribesInFlight < this.opts.maxRedescribes
          ? 'redescribe'
          : undefined;
    if (read === undefined) return;
    if (read !== 'list') return this.readBehind(workflowId, read, entry.asOf);
    // A List read waits for the batch: the polls of a second share one List.
    if (this.behind.size >= this.opts.maxEntries || this.inflight.has(workflowId)) return;
    this.behind.set(workflowId, entry.asOf);
    this.behindTimer ??= this.outside(() => {
      const timer = setTimeout(() => {
        this.behindTimer = undefined;
        const due = [...this.behind];
        this.behind.clear();
        for (const [id, asOf] of due) {
          const now = Date.now();
          const kept = this.entries.get(id);
          // Read meanwhile (another poll, a write): nothing to do.
          if (kept?.asOf === asOf && !this.closed) this.readBehind(id, this.readFor(id, kept, now), asOf);
        }
      }, this.opts.refreshBatchMs);
      timer.unref();
      return timer;
    });
  }

  /** One read behind an answer; a failure drops the entry it was to refresh. */
  private readBehind(workflowId: string, read: Read, asOf: number): void {
    this.outside(() => this.load(workflowId, read)).catch(() => {
      if (this.entries.get(workflowId)?.asOf === asOf) this.entries.delete(workflowId);
    });
  }

  /** Reads the run now, ignoring what is kept (after a write was refused, say). */
  async fresh(workflowId: string): Promise<RunView | undefined> {
    this.invalidate(workflowId);
    return await this.load(workflowId, 'describe');
  }

  /** After this process wrote to the upgrade: the next call reads what the write did. */
  invalidate(workflowId: string): void {
    this.startSweeper();
    this.entries.delete(workflowId);
    this.writtenAt.delete(workflowId);
    this.writtenAt.set(workflowId, Date.now());
    trim(this.writtenAt, this.opts.maxEntries);
  }

  /** How much is held (tests, metrics). */
  sizes(): { entries: number; inflight: number; writtenAt: number; queued: number; behind: number } {
    return {
      entries: this.entries.size,
      inflight: this.inflight.size,
      writtenAt: this.writtenAt.size,
      queued: this.lists.size,
      behind: this.behind.size,
    };
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.behindTimer);
    this.behindTimer = undefined;
    this.behind.clear();
    clearInterval(this.sweeper);
    this.sweeper = undefined;
  }

  private readFor(workflowId: string, entry: Entry | undefined, now: number): Read {
    const written = this.writtenAt.get(workflowId);
    if (written !== undefined && now - written < this.opts.writeMemoryMs) return 'describe';
    if (!LISTABLE_ID.test(workflowId) || entry?.view?.workflowTaskRetrying) return 'describe';
    if (entry && now >= entry.describeAt && this.redescribesInFlight < this.opts.maxRedescribes) return 'redescribe';
    return 'list';
  }

  private load(workflowId: string, read: Read): Promise<RunView | undefined> {
    const shared = this.inflight.get(workflowId);
    // A read that began before our last write may not show it: not joined.
    if (shared && shared.started > (this.writtenAt.get(workflowId) ?? -Infinity)) {
      this.stats.joined++;
      return shared.read;
    }
    const started = Date.now();
    const loading = (async () => {
      if (read === 'list') {
        try {
          return await this.viaList(workflowId);
        } catch {
          // The List failed (logged once per streak): this read is a describe.
        }
      }
      return await this.viaDescribe(workflowId, started, read === 'redescribe');
    })();
    this.inflight.set(workflowId, { started, read: loading });
    const clear = () => {
      if (this.inflight.get(workflowId)?.read === loading) this.inflight.delete(workflowId);
    };
    loading.then(clear, clear);
    return loading;
  }

  private async viaDescribe(workflowId: string, started: number, redescribe: boolean): Promise<RunView | undefined> {
    this.stats.describes++;
    if (redescribe) {
      this.stats.redescribes++;
      this.redescribesInFlight++;
    }
    try {
      const view = await this.opts.describe(workflowId);
      this.store(workflowId, view, started, true);
      return view;
    } finally {
      if (redescribe) this.redescribesInFlight--;
    }
  }

  /** A read by the next List; a run seen here before that the List no longer shows is described. */
  private async viaList(workflowId: string): Promise<RunView | undefined> {
    const { run, started } = await this.lists.read(workflowId);
    const before = this.entries.get(workflowId);
    if (run) {
      const sameRun = before?.view?.runId === run.runId;
      const view: RunView = {
        runId: run.runId,
        running: true,
        status: 'RUNNING',
        ...(run.memo !== undefined ? { memo: run.memo } : {}),
        workflowTaskRetrying: sameRun ? (before?.view?.workflowTaskRetrying ?? false) : false,
      };
      this.store(workflowId, view, started, false);
      return view;
    }
    // Seen here before and not running now: closed, or replaced by a run not visible yet.
    if (before?.view) return await this.viaDescribe(workflowId, started, false);
    this.store(workflowId, undefined, started, false);
    return undefined;
  }

  /** Keeps what a read found, unless a write or a later read since makes it older than what we know. */
  private store(workflowId: string, view: RunView | undefined, started: number, described: boolean): void {
    if ((this.writtenAt.get(workflowId) ?? -Infinity) >= started) return;
    const before = this.entries.get(workflowId);
    if (before && before.asOf > started) return;
    const sameRun = before?.view !== undefined && before.view.runId === view?.runId;
    const describeAt =
      described || !sameRun || !before
        ? started + this.opts.redescribeMs * (0.5 + Math.random() / 2)
        : before.describeAt;
    this.entries.delete(workflowId);
    this.entries.set(workflowId, { view, asOf: started, describeAt, usedAt: before?.usedAt ?? started });
    trim(this.entries, this.opts.maxEntries);
  }

  private startSweeper(): void {
    if (this.sweeper || this.closed) return;
    const every = Math.max(10, Math.min(this.opts.idleMs, this.opts.writeMemoryMs) / 2);
    this.outside(() => {
      this.sweeper = setInterval(() => this.sweep(), every);
      this.sweeper.unref();
    });
  }

  private sweep(): void {
    const now = Date.now();
    for (const [id, entry] of this.entries) if (now - entry.usedAt > this.opts.idleMs) this.entries.delete(id);
    for (const [id, at] of this.writtenAt) if (now - at > this.opts.writeMemoryMs) this.writtenAt.delete(id);
    if (this.entries.size === 0 && this.writtenAt.size === 0) {
      clearInterval(this.sweeper);
      this.sweeper = undefined;
    }
  }
}

/** Drops the oldest keys (insertion order) beyond `max`. */
function trim(map: Map<string, unknown>, max: number): void {
  for (const key of map.keys()) {
    if (map.size <= max) return;
    map.delete(key);
  }
}
