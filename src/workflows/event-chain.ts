// Kubernetes Events recorded beside a workflow's work: one activity each,
// chained so they land in order, never cancelled (an abort is worth an Event
// too) and never failing the run (no RBAC for Events, an API server that is
// busy). The run awaits `settled()` only before it ends or sits waiting.
import { CancellationScope } from '@temporalio/workflow';

export class EventChain<E> {
  private chain: Promise<void> = Promise.resolve();
  private readonly record: (event: E) => Promise<void>;

  constructor(record: (event: E) => Promise<void>) {
    this.record = record;
  }

  add(event: E): void {
    const record = this.record;
    const previous = this.chain;
    this.chain = CancellationScope.nonCancellable(async () => {
      await previous;
      try {
        await record(event);
      } catch {
        // Best effort: see above.
      }
    });
  }

  settled(): Promise<void> {
    return this.chain;
  }
}
