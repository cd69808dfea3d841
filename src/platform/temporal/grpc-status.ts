// The gRPC status behind a failed call to the workflow service: the client wraps it (a
// ServiceError, a ConnectionError) a few levels deep, and callers decide by its code.

/** The gRPC status of an error or of one of its causes. */
export function grpcStatus(err: unknown): { code: number; details: string } | undefined {
  for (let e: unknown = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'number') {
      const details = (e as { details?: unknown }).details;
      return { code, details: typeof details === 'string' ? details : '' };
    }
  }
  return undefined;
}
