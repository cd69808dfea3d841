// The one place that stops what the tier started: every start registers its undo, and
// run() undoes them in reverse order (a node before its network, the network before the
// state directory), each once, and reports every undo that failed after trying them all.
export class Teardown {
  private readonly steps: { name: string; undo: () => Promise<void> | void }[] = [];
  private running: Promise<void> | undefined;

  /** Registers `undo` for what was just started; returns it so a caller may run it early. */
  add(name: string, undo: () => Promise<void> | void): void {
    this.steps.push({ name, undo });
  }

  /** Undoes everything registered, newest first. Safe to call twice. */
  run(): Promise<void> {
    this.running ??= this.undoAll();
    return this.running;
  }

  private async undoAll(): Promise<void> {
    const failures: string[] = [];
    for (const step of this.steps.splice(0).reverse()) {
      try {
        await step.undo();
      } catch (err) {
        failures.push(`${step.name}: ${(err as Error).message}`);
      }
    }
    if (failures.length > 0) throw new Error(`the node tier could not undo:\n${failures.join('\n')}`);
  }
}

/** Runs `build` with a teardown that is undone if it throws, so a half-started thing leaves nothing. */
export async function buildOrUndo<T>(
  build: (teardown: Teardown) => Promise<T>,
): Promise<T & { stop(): Promise<void> }> {
  const teardown = new Teardown();
  try {
    const built = await build(teardown);
    return Object.assign(built as object, { stop: () => teardown.run() }) as T & { stop(): Promise<void> };
  } catch (err) {
    await teardown.run().catch((undoErr: Error) => {
      (err as Error).message += `\n(and while undoing: ${undoErr.message})`;
    });
    throw err;
  }
}
