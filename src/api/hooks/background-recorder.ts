// Work a hook records but must never wait for (BeforeClusterCreate,
// AfterControlPlaneInitialized): the hook answers at once and the record is
// written here, off the request path, with a deadline per attempt, bounded
// retries with backoff, and a bounded queue (backpressure: when it is full the
// oldest record is dropped and logged, never the hook's answer delayed).
// Records are keyed: a key already queued is not queued again (CAPI re-calls).

export interface BackgroundRecorderOptions {
  /** Attempts per record before it is dropped (logged). */
  maxAttempts?: number;
  /** Deadline of one attempt. */
  attemptTimeoutMs?: number;
  /** First retry delay; doubles up to maxDelayMs. */
  initialDelayMs?: number;
  maxDelayMs?: number;
  /** Records waiting at most; past it the oldest is dropped. */
  maxQueued?: number;
  /** Records written at once. */
  concurrency?: number;
  log: { warn: (obj: object, msg: string) => void; error: (obj: object, msg: string) => void };
}

type Attempt = (deadline: number) => Promise<void>;

interface Entry {
  key: string;
  attempt: Attempt;
  tries: number;
  notBefore: number;
}

export class BackgroundRecorder {
  private readonly opts: Required<Omit<BackgroundRecorderOptions, 'log'>> & Pick<BackgroundRecorderOptions, 'log'>;
  private readonly queue: Entry[] = [];
  private readonly keys = new Set<string>();
  private running = 0;
  private timer: NodeJS.Timeout | undefined;
  private closed = false;
  private idleWaiters: (() => void)[] = [];
  /** Counters for tests and metrics. */
  readonly stats = { recorded: 0, retried: 0, dropped: 0 };

  constructor(options: BackgroundRecorderOptions) {
    this.opts = {
      maxAttempts: 8,
      attemptTimeoutMs: 5_000,
      initialDelayMs: 500,
      maxDelayMs: 30_000,
      maxQueued: 10_000,
      concurrency: 4,
      ...options,
    };
  }

  /** Queues `attempt` under `key`; returns at once. */
  record(key: string, attempt: Attempt): void {
    if (this.closed || this.keys.has(key)) return;
    if (this.queue.length >= this.opts.maxQueued) {
      const dropped = this.queue.shift();
      if (dropped) {
        this.keys.delete(dropped.key);
        this.stats.dropped++;
        this.opts.log.error({ key: dropped.key }, 'background record dropped: queue full');
      }
    }
    this.keys.add(key);
    this.queue.push({ key, attempt, tries: 0, notBefore: 0 });
    this.pump();
  }

  get pending(): number {
    return this.queue.length + this.running;
  }

  /** Resolves when nothing is queued or running (tests, graceful shutdown). */
  async idle(): Promise<void> {
    if (this.pending === 0) return;
    await new Promise<void>((resolve) => this.idleWaiters.push(resolve));
  }

  /** Waits until what is queued is written, or `ms` passed: a graceful stop loses none of it in time. */
  async flush(ms: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.idle(), new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)))]);
    clearTimeout(timer);
  }

  /** Stops taking records; what is still queued is dropped (logged by count). */
  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
    if (this.queue.length > 0) {
      this.stats.dropped += this.queue.length;
      this.opts.log.error({ records: this.queue.length }, 'background records dropped at stop');
    }
    this.queue.length = 0;
    this.keys.clear();
    this.notifyIdle();
  }

  private pump(): void {
    if (this.closed) return;
    clearTimeout(this.timer);
    this.timer = undefined;
    const now = Date.now();
    while (this.running < this.opts.concurrency) {
      const at = this.queue.findIndex((e) => e.notBefore <= now);
      if (at < 0) break;
      const [entry] = this.queue.splice(at, 1);
      if (entry) void this.run(entry);
    }
    const next = Math.min(...this.queue.map((e) => e.notBefore));
    if (Number.isFinite(next) && this.running < this.opts.concurrency) {
      this.timer = setTimeout(() => this.pump(), Math.max(0, next - now));
      this.timer.unref();
    }
    this.notifyIdle();
  }

  private async run(entry: Entry): Promise<void> {
    this.running++;
    entry.tries++;
    try {
      await entry.attempt(Date.now() + this.opts.attemptTimeoutMs);
      this.keys.delete(entry.key);
      this.stats.recorded++;
    } catch (err) {
      if (entry.tries >= this.opts.maxAttempts || this.closed) {
        this.keys.delete(entry.key);
        this.stats.dropped++;
        this.opts.log.error(
          { key: entry.key, attempts: entry.tries, err: String(err) },
          'background record dropped after its last attempt',
        );
      } else {
        this.stats.retried++;
        const delay = Math.min(this.opts.initialDelayMs * 2 ** (entry.tries - 1), this.opts.maxDelayMs);
        entry.notBefore = Date.now() + delay;
        this.queue.push(entry);
        this.opts.log.warn({ key: entry.key, attempt: entry.tries, err: String(err) }, 'background record will retry');
      }
    } finally {
      this.running--;
      this.pump();
    }
  }

  private notifyIdle(): void {
    if (this.pending > 0) return;
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const w of waiters) w();
  }
}
