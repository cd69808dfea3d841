// How workflows read the failures their activities raise: the innermost
// cause's type and message. Deterministic: never a stack, never a time.
import { ActivityFailure, ApplicationFailure, isCancellation } from '@temporalio/workflow';

/** The innermost cause of an activity failure (the error itself when it is none). */
export function innermostCause(err: unknown): unknown {
  let e: unknown = err;
  while (e instanceof ActivityFailure && e.cause) e = e.cause;
  return e;
}

/** The innermost application failure's type. */
export function failureType(err: unknown): string | undefined {
  const e = innermostCause(err);
  return e instanceof ApplicationFailure ? (e.type ?? undefined) : undefined;
}

/** The innermost failure message: deterministic, no stack. */
export function failureReason(err: unknown): string {
  const e = innermostCause(err);
  return e instanceof Error ? e.message : String(e);
}

/** The stable text of an activity's failure: its cause's message (activities raise only stable ones). */
export function failureCause(err: unknown): string {
  const e = innermostCause(err);
  return e instanceof Error && e.message ? e.message : 'unknown error';
}

/** An expected error (not a cancellation, not a bug) from an activity. */
export function expectedFailure(err: unknown): err is ActivityFailure {
  return err instanceof ActivityFailure && !isCancellation(err);
}
