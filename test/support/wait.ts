// Polling helper for tests that watch state converge (never a fixed sleep).

/** Calls `fn` until `ok` holds or `timeoutMs` passed; returns the last value either way. */
export async function waitFor<T>(fn: () => Promise<T>, ok: (v: T) => boolean, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (ok(v) || Date.now() > deadline) return v;
    await new Promise((r) => setTimeout(r, 150));
  }
}
