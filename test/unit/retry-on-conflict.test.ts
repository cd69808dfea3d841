// retryOnConflict: a conditioned write that lost a race (409 stale resourceVersion, 422 failed
// JSON-patch test) runs its read-modify-write again; anything else fails at once.
import { describe, expect, it } from '@jest/globals';
import { ApiException } from '@kubernetes/client-node';
import { isPreconditionFailed, retryOnConflict } from '../../src/platform/kube/retry-on-conflict.ts';

const answer = (code: number) => new ApiException(code, `HTTP ${code}`, '{}', {});

/** A read-modify-write that fails with `errors` in turn, then returns how many tries it took. */
function failingWith(...errors: unknown[]) {
  let tries = 0;
  const fn = async () => {
    tries++;
    const err = errors[tries - 1];
    if (err !== undefined) throw err;
    return tries;
  };
  return { fn, tries: () => tries };
}

describe('isPreconditionFailed', () => {
  it('is a 409 or a 422, and nothing else', () => {
    expect(isPreconditionFailed(answer(409))).toBe(true);
    expect(isPreconditionFailed(answer(422))).toBe(true);
    expect(isPreconditionFailed({ code: 409 })).toBe(true);
    for (const code of [400, 404, 429, 500]) expect(isPreconditionFailed(answer(code))).toBe(false);
    expect(isPreconditionFailed(new Error('fetch failed'))).toBe(false);
  });
});

describe('retryOnConflict', () => {
  it('runs again after a stale resourceVersion (409) and a failed patch test (422)', async () => {
    const rmw = failingWith(answer(409), answer(422));
    await expect(retryOnConflict(rmw.fn)).resolves.toBe(3);
    expect(rmw.tries()).toBe(3);
  });

  it('fails at once on anything else, with the error as thrown', async () => {
    for (const err of [answer(404), answer(500), answer(429), new Error('fetch failed')]) {
      const rmw = failingWith(err);
      await expect(retryOnConflict(rmw.fn)).rejects.toBe(err);
      expect(rmw.tries()).toBe(1);
    }
  });

  it('gives up after `attempts` tries with the last conflict', async () => {
    const last = answer(422);
    const rmw = failingWith(answer(409), answer(409), last, answer(409));
    await expect(retryOnConflict(rmw.fn, 3)).rejects.toBe(last);
    expect(rmw.tries()).toBe(3);
  });

  it('tries five times by default', async () => {
    const rmw = failingWith(...Array.from({ length: 6 }, () => answer(409)));
    await expect(retryOnConflict(rmw.fn)).rejects.toBeInstanceOf(ApiException);
    expect(rmw.tries()).toBe(5);
  });
});
