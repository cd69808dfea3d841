// What a fleet rollout says about its next wave while the current one runs or
// soaks: the clusters whose readiness is Blocked now (runs before readiness:
// whose pre-upgrade health check fails), each of which would stop at a gate
// or in its drain when the wave opens. Pure and deterministic: the
// same findings always give the same words (they reach the memo).
import type { FleetRolloutMemo, NextWaveCheck, NextWaveHold } from '../model/fleet-rollout.ts';

/** Clusters the message and the memo name; the status query has them all. */
const SHOWN = 3;
const MEMO_SHOWN = 5;
/** The message's share of the memo: `list` reads every rollout's. */
const MESSAGE_LIMIT = 400;

const bounded = (text: string) => (text.length <= MESSAGE_LIMIT ? text : `${text.slice(0, MESSAGE_LIMIT - 3)}...`);
const clusters = (n: number) => `${n} cluster${n === 1 ? '' : 's'}`;

/** A look under way: the last result of the same wave stays shown until the new one comes. */
export function nextWaveChecking(wave: number, count: number, last: NextWaveCheck | undefined): NextWaveCheck {
  if (last && last.wave === wave) return { ...last, state: 'checking' };
  return { wave, state: 'checking', checked: 0, holding: [], message: `wave ${wave}: checking its ${clusters(count)}` };
}

/**
 * The result of a look at `checked` clusters of `wave`, `holding` in the wave's order. `readiness`:
 * what was checked (each cluster's readiness, else its health only, as looks before readiness did),
 * with the clusters whose readiness could not tell (`unknown`, named in the wave's order).
 */
export function nextWaveChecked(
  wave: number,
  checked: number,
  holding: NextWaveHold[],
  readiness?: { unknown: string[] },
): NextWaveCheck {
  const what = readiness ? 'readiness' : 'health';
  const unknown = readiness?.unknown ?? [];
  const untold =
    unknown.length === 0
      ? ''
      : `; could not tell for ${unknown.length}: ${unknown.slice(0, SHOWN).join(', ')}${unknown.length > SHOWN ? ` and ${unknown.length - SHOWN} more` : ''}`;
  if (holding.length === 0)
    return {
      wave,
      state: 'checked',
      checked,
      holding,
      message: bounded(`wave ${wave}: none of its ${clusters(checked)} will hold it (${what} checked)${untold}`),
    };
  const named = holding.slice(0, SHOWN).map((h) => `${h.cluster}: ${h.finding}`);
  if (holding.length > SHOWN) named.push(`and ${holding.length - SHOWN} more`);
  return {
    wave,
    state: 'checked',
    checked,
    holding,
    message: bounded(
      `wave ${wave}: ${holding.length} of ${clusters(checked)} will hold it: ${named.join('; ')}${untold}`,
    ),
  };
}

/** A look that could not run: nothing is known of the wave, and the message says why. */
export function nextWaveUnknown(wave: number, checked: number, cause: string): NextWaveCheck {
  return {
    wave,
    state: 'checked',
    checked,
    holding: [],
    message: bounded(`wave ${wave}: could not check its ${clusters(checked)}: ${cause}`),
  };
}

/** The memo's share: only a finished look, without a time, so the same finding adds no history. */
export function nextWaveMemo(check: NextWaveCheck | undefined): FleetRolloutMemo['nextWave'] {
  if (!check || check.checked === 0) return undefined;
  return {
    wave: check.wave,
    holding: check.holding.slice(0, MEMO_SHOWN).map((h) => h.cluster),
    message: check.message,
  };
}
