// A short memory of things done, so a lagging read does not make us do them again.

/** Keys seen in the last `ms` (bounded: older ones are dropped as new ones come). */
export class RecentKeys {
  private readonly seen = new Map<string, number>();
  private readonly ms: number;
  constructor(ms: number) {
    this.ms = ms;
  }
  recent(key: string): boolean {
    const at = this.seen.get(key);
    return at !== undefined && Date.now() - at < this.ms;
  }
  add(key: string): void {
    const now = Date.now();
    this.seen.set(key, now);
    if (this.seen.size > 10_000) for (const [k, at] of this.seen) if (now - at >= this.ms) this.seen.delete(k);
  }
}
