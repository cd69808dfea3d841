// How a hook implementation tells the generic layer what went wrong. The
// messages reach CAPI conditions: keep them deterministic and secret-free.

/** The request is well-formed but cannot be served (e.g. an unplannable upgrade): HTTP 200, status Failure. */
export class HookFailure extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'HookFailure';
  }
}

/** A backend (Temporal, the management cluster) is down or slow: blocking hooks hold CAPI back and ask it to retry. */
export class BackendUnavailable extends Error {
  /** What CAPI reads instead of the generic "workflow service" words, when another backend is the one down. */
  readonly capiMessage?: string;
  constructor(message = 'the workflow service did not answer in time', capiMessage?: string) {
    super(message);
    this.name = 'BackendUnavailable';
    if (capiMessage !== undefined) this.capiMessage = capiMessage;
  }
}

/** A client error answered with an HTTP status other than 200 (400, 404, 405, 413). */
export class HttpError extends Error {
  readonly statusCode: number;
  readonly field?: string;
  constructor(statusCode: number, message: string, field?: string) {
    super(message);
    this.name = 'HttpError';
    this.statusCode = statusCode;
    if (field !== undefined) this.field = field;
  }
}
