// Waits on node upgrades without holding worker slots. upgradeNode creates the
// executor's Job or NodeUpgradeRequest, hands the check to this watch and
// completes asynchronously; one timer per worker process then reads every
// pending upgrade, heartbeats for it through the Temporal client and completes
// or fails it. A waiting upgrade costs one read per poll, not an activity slot;
// a change to its Job or NodeUpgradeRequest (seen by a shared watch, see
// object-watch.ts) has it read at once.
//
// What can go wrong, and why it is safe:
// - the worker dies: the heartbeats stop, the attempt times out on its
//   heartbeat timeout and is retried; the retry finds the Job or request by
//   name and is watched again, with the first attempt's start time (kept in
//   the heartbeat details).
// - the workflow cancels (abort): the next heartbeat says so and the upgrade
//   is reported cancelled; the workflow itself deletes the executor's object.
// - the activity ended otherwise (timed out server-side): its heartbeat is
//   refused and the upgrade is dropped here.
import { deliberateFailure } from './failures.ts';
import type { NodeUpgradeVerdict, WaitCheckpoint } from './machine-update-common.ts';
import { heartbeatRefusal, type AsyncCompletions } from '../platform/temporal/async-completion.ts';

export interface WatchedUpgrade {
  taskToken: Uint8Array;
  startedAtMs: number;
  check(startedAtMs: number): Promise<NodeUpgradeVerdict>;
  /** Calls back when the executor's object changes (read it then, not at the next poll); returns the stop. */
  changes?(onChange: () => void): () => void;
}

export interface NodeUpgradeWatchOptions {
  /** How often each pending upgrade is read; default 1 s. */
  pollMs?: number;
  /** At most this many reads at once per poll (spreads the load on the API servers); default 16. */
  concurrency?: number;
}

/** Heartbeats go out this often at most, however often the upgrade is read (its heartbeat timeout is 10 s). */
const HEARTBEAT_EVERY_MS = 3_000;

interface Entry extends WatchedUpgrade {
  observed: string;
  lastHeartbeatMs: number;
  /** A read in flight: the next poll skips this entry. */
  busy: boolean;
  /** The object changed during that read: read again when it ends. */
  dirty: boolean;
  stopChanges: () => void;
}

export class NodeUpgradeWatch {
  private readonly entries = new Map<string, Entry>();
  private readonly pollMs: number;
  private readonly concurrency: number;
  private timer: NodeJS.Timeout | undefined;
  private readonly clientOf: () => AsyncCompletions;

  /** `client` may be a getter: the process replaces its connection when Temporal credentials rotate. */
  constructor(client: AsyncCompletions | (() => AsyncCompletions), options: NodeUpgradeWatchOptions = {}) {
    this.clientOf = typeof client === 'function' ? client : () => client;
    this.pollMs = options.pollMs ?? 1_000;
    this.concurrency = options.concurrency ?? 16;
  }

  /** Upgrades waited on now. */
  get size(): number {
    return this.entries.size;
  }

  /** Starts watching (replacing a previous attempt of the same activity); checks at once. */
  watch(upgrade: WatchedUpgrade): void {
    const key = Buffer.from(upgrade.taskToken).toString('base64');
    this.drop(key);
    const entry: Entry = {
      ...upgrade,
      observed: 'created',
      lastHeartbeatMs: 0,
      busy: false,
      dirty: false,
      stopChanges: () => undefined,
    };
    this.entries.set(key, entry);
    // A change is read at once (a Job done, an agent's status): the poll is the fallback.
    entry.stopChanges = upgrade.changes?.(() => this.changed(key, entry)) ?? entry.stopChanges;
    if (!this.timer) {
      this.timer = setInterval(() => void this.poll(), this.pollMs);
      // Never what keeps the process alive: on exit the heartbeat timeout hands the upgrade to a retry.
      this.timer.unref();
    }
    // Check at once, and heartbeat the start time so a retried attempt keeps it.
    void this.visit(key, entry);
  }

  /** Stops the timer; pending upgrades time out on their heartbeats and are retried by another worker. */
  close(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    for (const key of [...this.entries.keys()]) this.drop(key);
  }

  private drop(key: string): void {
    this.entries.get(key)?.stopChanges();
    this.entries.delete(key);
  }

  private changed(key: string, entry: Entry): void {
    if (this.entries.get(key) !== entry) return;
    if (entry.busy) entry.dirty = true;
    else void this.visit(key, entry);
  }

  private async poll(): Promise<void> {
    const pending = [...this.entries].filter(([, e]) => !e.busy);
    for (let i = 0; i < pending.length; i += this.concurrency) {
      await Promise.all(pending.slice(i, i + this.concurrency).map(([key, e]) => this.visit(key, e)));
    }
    if (this.entries.size === 0 && this.timer) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }

  private async visit(key: string, entry: Entry): Promise<void> {
    if (entry.busy) return;
    entry.busy = true;
    entry.dirty = false;
    try {
      let verdict: NodeUpgradeVerdict | undefined;
      try {
        verdict = await entry.check(entry.startedAtMs);
      } catch (err) {
        // This is the activity's edge: a failure raised on purpose (the platform's plain errors
        // included) ends it here, as withStableFailures would have.
        const failure = deliberateFailure(err);
        if (failure?.nonRetryable) {
          await this.finish(key, () => this.clientOf().fail(entry.taskToken, failure));
          return;
        }
        // The API server could not be read (unreachable, 5xx): try again next poll. The
        // activity's own timeouts bound how long.
        entry.observed = `last read failed: ${err instanceof Error ? err.message : String(err)}`.slice(0, 200);
      }
      if (verdict?.done) {
        await this.finish(key, () => this.clientOf().complete(entry.taskToken, { message: verdict.message }));
        return;
      }
      if (verdict) entry.observed = verdict.observed;
      if (Date.now() - entry.lastHeartbeatMs < HEARTBEAT_EVERY_MS) return;
      entry.lastHeartbeatMs = Date.now();
      try {
        await this.clientOf().heartbeat(entry.taskToken, {
          startedAtMs: entry.startedAtMs,
          observed: entry.observed,
        } satisfies WaitCheckpoint);
      } catch (err) {
        const refusal = heartbeatRefusal(err);
        if (refusal === 'cancelled') {
          await this.finish(key, () => this.clientOf().reportCancellation(entry.taskToken));
        } else if (refusal === 'gone') {
          this.drop(key);
        }
        // Anything else (Temporal unreachable): keep going; the heartbeat timeout decides.
      }
    } finally {
      entry.busy = false;
      if (entry.dirty) this.changed(key, entry);
    }
  }

  /** Reports the outcome once; an activity that already ended is fine. */
  private async finish(key: string, report: () => Promise<void>): Promise<void> {
    this.drop(key);
    try {
      await report();
    } catch {
      // Ended already (ActivityNotFoundError), or Temporal unreachable: then the heartbeat
      // timeout retries the attempt, which reads the same outcome.
    }
  }
}
