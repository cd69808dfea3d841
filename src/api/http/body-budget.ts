// A bound on request body bytes being read, parsed and handled at once. JSON.parse
// can turn one body byte into ~21 heap bytes ([{},{},…]), so the bytes in flight,
// not the number of requests, are what keeps the process under its heap cap.
// A request reserves its declared length (or its route's limit when it declares
// none) before its body is read and gives it back when its response closes.
// Small bodies (every real CAPI call measured so far) may use the whole budget;
// larger ones leave `smallReserve` free, so bodies at the limit never starve
// ordinary calls. A request that does not fit waits up to `waitMs`, then is
// refused (the caller answers 503 with Retry-After).

export interface BodyBudgetOptions {
  /** Body bytes reserved at once, all requests together. */
  totalBytes: number;
  /** Bodies up to this size count as small. */
  smallBodyBytes: number;
  /** Bytes only small bodies may take. */
  smallReserve: number;
  /** How long a request may wait for room before it is refused. */
  waitMs: number;
}

interface Waiter {
  bytes: number;
  admit: (release: () => void) => void;
  timer: NodeJS.Timeout;
}

export class BodyBudget {
  readonly options: BodyBudgetOptions;
  #inFlight = 0;
  #waiting: Waiter[] = [];

  constructor(options: BodyBudgetOptions) {
    this.options = options;
  }

  /** Bytes reserved now. */
  get inFlight(): number {
    return this.#inFlight;
  }

  /** Requests waiting for room now. */
  get waiting(): number {
    return this.#waiting.length;
  }

  /**
   * Reserves `bytes`: resolves with the function that gives them back (call it once), or
   * undefined when no room was found within `waitMs`.
   */
  acquire(bytes: number): Promise<(() => void) | undefined> {
    if (this.#fits(bytes)) return Promise.resolve(this.#take(bytes));
    return new Promise((resolve) => {
      const waiter: Waiter = {
        bytes,
        admit: resolve,
        timer: setTimeout(() => {
          this.#waiting = this.#waiting.filter((w) => w !== waiter);
          resolve(undefined);
        }, this.options.waitMs),
      };
      this.#waiting.push(waiter);
    });
  }

  #fits(bytes: number): boolean {
    const { totalBytes, smallBodyBytes, smallReserve } = this.options;
    const room = bytes <= smallBodyBytes ? totalBytes : totalBytes - smallReserve;
    return this.#inFlight + bytes <= room;
  }

  #take(bytes: number): () => void {
    this.#inFlight += bytes;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#inFlight -= bytes;
      this.#admitWaiting();
    };
  }

  /** In arrival order, every waiter that fits now (a small one may pass a large one that does not). */
  #admitWaiting(): void {
    for (const waiter of [...this.#waiting]) {
      if (!this.#fits(waiter.bytes)) continue;
      clearTimeout(waiter.timer);
      this.#waiting = this.#waiting.filter((w) => w !== waiter);
      waiter.admit(this.#take(waiter.bytes));
    }
  }
}

/** Body bytes each request sent (keyed by its Node request), for the hook layer's log line. */
const bodySizes = new WeakMap<object, number>();

export function recordBodyBytes(request: { raw: object }, bytes: number): void {
  bodySizes.set(request.raw, bytes);
}

export function bodyBytesOf(request: { raw: object }): number | undefined {
  return bodySizes.get(request.raw);
}
