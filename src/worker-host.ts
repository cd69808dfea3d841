// Keeps one Temporal worker running in this process and can replace it with
// another (new Temporal TLS credentials: gRPC fixes them at connect time). The
// new worker polls before the old one is asked to stop, so no task waits; the
// old one finishes what it runs within its shutdownGraceTime. `done` settles
// when the current worker ends other than by being replaced.
import type { Worker } from '@temporalio/worker';

export class WorkerHost {
  private current: { worker: Worker; running: Promise<void> };
  private readonly replaced = new WeakSet<Worker>();
  readonly done: Promise<void>;

  constructor(worker: Worker) {
    this.current = { worker, running: worker.run() };
    this.done = this.supervise();
  }

  get worker(): Worker {
    return this.current.worker;
  }

  private async supervise(): Promise<void> {
    for (;;) {
      const { worker, running } = this.current;
      try {
        await running;
      } catch (err) {
        if (!this.replaced.has(worker)) throw err;
      } finally {
        // Each worker gets its own connection (src/worker.ts): it goes with it.
        await worker.options.connection?.close().catch(() => undefined);
      }
      if (!this.replaced.has(worker)) return;
    }
  }

  /** Starts `next`, then stops the current worker. */
  replace(next: Worker): void {
    const old = this.current.worker;
    this.replaced.add(old);
    this.current = { worker: next, running: next.run() };
    if (old.getState() === 'RUNNING') old.shutdown();
  }

  shutdown(): void {
    if (this.current.worker.getState() === 'RUNNING') this.current.worker.shutdown();
  }
}
