// Callers the hook server refuses before it reads a request: a failed TLS
// handshake (no client certificate, one our client CA did not sign, plain HTTP,
// a scanner) and a valid certificate whose subject is not on
// HOOK_CLIENT_ALLOWED_SUBJECTS. Each is counted (capi_upgrade_hook_clients_refused_total)
// and logged with the remote address and reason; the log is rate-limited so a
// scanner cannot flood it (the counter still counts every one).
import type { Server as NetServer, Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import type { FastifyBaseLogger, onRequestHookHandler } from 'fastify';
import type { ClientSubjectAllowList } from '../../config/server.ts';
import { hookClientsRefused, type ClientRefusal } from '../../ops/metrics.ts';
import { peerIdentity, subjectAllowed, subjectName } from './caller.ts';

/** At most `lines` log lines per `windowMs`; what was held back is reported once the window is over. */
export class LogBudget {
  private windowStart = Number.NEGATIVE_INFINITY;
  private used = 0;
  private held = 0;
  private readonly lines: number;
  private readonly windowMs: number;
  private readonly now: () => number;
  constructor(lines: number, windowMs: number, now: () => number = Date.now) {
    this.lines = lines;
    this.windowMs = windowMs;
    this.now = now;
  }

  /** Whether to log this one, and how many were held back in the window that just ended. */
  take(): { log: boolean; heldBack: number } {
    const now = this.now();
    let heldBack = 0;
    if (now - this.windowStart >= this.windowMs) {
      heldBack = this.held;
      this.windowStart = now;
      this.used = 0;
      this.held = 0;
    }
    if (this.used < this.lines) {
      this.used++;
      return { log: true, heldBack };
    }
    this.held++;
    return { log: false, heldBack };
  }
}

export const REFUSAL_LOG_LINES = 20;
export const REFUSAL_LOG_WINDOW_MS = 60_000;

export interface RefusalLog {
  refused(reason: ClientRefusal, fields: Record<string, unknown>, message: string): void;
}

export function refusalLog(
  log: FastifyBaseLogger,
  budget = new LogBudget(REFUSAL_LOG_LINES, REFUSAL_LOG_WINDOW_MS),
): RefusalLog {
  return {
    refused(reason, fields, message) {
      hookClientsRefused.inc({ reason });
      const { log: write, heldBack } = budget.take();
      if (heldBack > 0)
        log.warn(
          { heldBack, windowSeconds: REFUSAL_LOG_WINDOW_MS / 1000 },
          'refused hook clients not logged in the last window (rate limit; capi_upgrade_hook_clients_refused_total counts all)',
        );
      if (write) log.warn({ reason, ...fields }, message);
    },
  };
}

/** Logs and counts every failed TLS handshake of `server`. */
export function watchHandshakeFailures(server: NetServer, refusals: RefusalLog): void {
  // Node destroys a socket whose certificate it rejects before emitting tlsClientError,
  // and its address goes with it: read it on connect (net caches it), then find it
  // through the TLS socket's underlying one (`_parent`, not public API; a test
  // asserts the address is logged, so a Node change cannot silently lose it).
  server.prependListener('connection', (raw: Socket) => void raw.remoteAddress);
  server.on('tlsClientError', (err: NodeJS.ErrnoException, socket: TLSSocket) => {
    const remoteAddress = socket.remoteAddress ?? (socket as TLSSocket & { _parent?: Socket })._parent?.remoteAddress;
    let reason: ClientRefusal = 'handshake_failed';
    let detail = err.code ?? err.message;
    if (err.code === 'ERR_SSL_PEER_DID_NOT_RETURN_A_CERTIFICATE') reason = 'no_certificate';
    else if (socket.authorizationError) {
      reason = 'untrusted_certificate';
      detail = String(socket.authorizationError);
    }
    refusals.refused(reason, { remoteAddress, detail }, 'hook client refused in the TLS handshake');
  });
}

const MAX_SUBJECT = 128;

/** The answer to a certificate not on the allow-list: stable for a given subject. */
export function notAllowedMessage(subject: string | undefined): string {
  const shown = subject === undefined ? '(no CN or DNS name)' : JSON.stringify(subject.slice(0, MAX_SUBJECT));
  return `client certificate ${shown} is not allowed to call this extension (HOOK_CLIENT_ALLOWED_SUBJECTS)`;
}

/**
 * Refuses, with 403 before the body is read, a request whose verified client certificate
 * names no allowed subject. Decided once per connection.
 */
export function allowListHook(allowed: ClientSubjectAllowList, refusals: RefusalLog): onRequestHookHandler {
  const verdicts = new WeakMap<Socket, string | true>();
  return (request, reply, done) => {
    const socket = request.raw.socket;
    let verdict = verdicts.get(socket);
    if (verdict === undefined) {
      const identity = peerIdentity(socket);
      const subject = identity ? subjectName(identity) : undefined;
      verdict = identity && subjectAllowed(identity, allowed) ? true : notAllowedMessage(subject);
      if (verdict !== true)
        refusals.refused(
          'subject_not_allowed',
          { remoteAddress: socket.remoteAddress, subject, dnsNames: identity?.dnsNames },
          'hook client refused: certificate subject not on HOOK_CLIENT_ALLOWED_SUBJECTS',
        );
      verdicts.set(socket, verdict);
    }
    if (verdict === true) return done();
    void reply.code(403).header('connection', 'close').send({ error: 'Forbidden', message: verdict });
  };
}
