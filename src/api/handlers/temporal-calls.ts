// Every Temporal call a hook makes runs under the hook's own deadline (the
// TypeScript client sets none by default), and its errors are mapped by kind:
// the server did not answer (unavailable, deadline, overload) means "retry
// later" to CAPI; the server refused for good (namespace not found, invalid
// argument, permission denied) is a Failure naming the cause.
import {
  ServiceError,
  WorkflowNotFoundError,
  WorkflowUpdateFailedError,
  WorkflowUpdateRPCTimeoutOrCancelledError,
  type Client,
} from '@temporalio/client';
import { NamespaceNotFoundError } from '@temporalio/common';
import { temporalRequestDuration, type TemporalCallResult } from '../../ops/metrics.ts';
import { grpcStatus } from '../../platform/temporal/grpc-status.ts';
import { BackendUnavailable, HookFailure } from '../hooks/errors.ts';
import type { HookContext } from '../hooks/hook-route.ts';
import { CheckUnavailable, RequestRefused } from './request-checks.ts';

/** gRPC status codes that mean "refused for good": retrying the same call cannot help. */
const PERMANENT_CODES: ReadonlyMap<number, string> = new Map([
  [3, 'INVALID_ARGUMENT'],
  [5, 'NOT_FOUND'],
  [7, 'PERMISSION_DENIED'],
  [9, 'FAILED_PRECONDITION'],
  [12, 'UNIMPLEMENTED'],
  [16, 'UNAUTHENTICATED'],
]);

/** A refusal as CAPI reads it: the gRPC status name and the server's own (stable) words. */
export function refusalMessage(code: number, details: string): string {
  const name = PERMANENT_CODES.get(code) ?? `code ${code}`;
  const words = details.replace(/\s+/g, ' ').trim().slice(0, 200);
  return `the workflow service refused the call (${name})${words ? `: ${words}` : ''}; check the extension's Temporal settings`;
}

export async function withinDeadline<T>(
  client: Client,
  ctx: Pick<HookContext, 'deadline' | 'signal'> & { log?: HookContext['log'] },
  fn: () => Promise<T>,
): Promise<T> {
  const started = performance.now();
  const observe = (result: TemporalCallResult) =>
    temporalRequestDuration.observe({ result }, (performance.now() - started) / 1000);
  try {
    const answer = await client.connection.withDeadline(ctx.deadline, () =>
      client.connection.withAbortSignal(ctx.signal, fn),
    );
    observe('ok');
    return answer;
  } catch (err) {
    // A request check's outcome is no Temporal call (capi_upgrade_hook_request_checks_total counts it).
    if (!(err instanceof RequestRefused || err instanceof CheckUnavailable)) observe(temporalCallResult(err, ctx));
    throw mapTemporalError(err, ctx);
  }
}

function temporalCallResult(err: unknown, ctx: Pick<HookContext, 'deadline' | 'signal'>): TemporalCallResult {
  // The service answered; the workflow said no.
  if (err instanceof HookFailure || err instanceof WorkflowUpdateFailedError) return 'ok';
  if (err instanceof WorkflowNotFoundError) return 'not_found';
  if (err instanceof NamespaceNotFoundError) return 'refused';
  const grpc = grpcStatus(err);
  if (grpc?.code === 5) return 'not_found';
  if (grpc && PERMANENT_CODES.has(grpc.code) && !ctx.signal.aborted) return 'refused';
  if (grpc || err instanceof ServiceError || ctx.signal.aborted || Date.now() >= ctx.deadline) return 'unavailable';
  return 'error';
}

/** What a hook makes of a failed Temporal call: itself, a HookFailure or BackendUnavailable (the caller throws it). */
function mapTemporalError(
  err: unknown,
  ctx: Pick<HookContext, 'deadline' | 'signal'> & { log?: HookContext['log'] },
): unknown {
  if (err instanceof HookFailure || err instanceof WorkflowNotFoundError || err instanceof WorkflowUpdateFailedError)
    return err;
  // The client turns NOT_FOUND for a namespace into its own error, without the gRPC status.
  if (err instanceof NamespaceNotFoundError) {
    ctx.log?.error({ grpcCode: 5, details: err.message }, 'workflow service refused a call');
    return new HookFailure(refusalMessage(5, err.message));
  }
  const grpc = grpcStatus(err);
  if (grpc && PERMANENT_CODES.has(grpc.code) && !ctx.signal.aborted) {
    ctx.log?.error({ grpcCode: grpc.code, details: grpc.details }, 'workflow service refused a call');
    return new HookFailure(refusalMessage(grpc.code, grpc.details));
  }
  if (
    err instanceof ServiceError ||
    err instanceof WorkflowUpdateRPCTimeoutOrCancelledError ||
    grpc !== undefined ||
    ctx.signal.aborted ||
    Date.now() >= ctx.deadline
  ) {
    if (grpc) ctx.log?.warn({ grpcCode: grpc.code }, 'workflow service did not answer');
    return new BackendUnavailable();
  }
  return err;
}
