// Who is calling: the subject of the client certificate the TLS handshake
// verified (mutual TLS, TLS_CLIENT_CA_FILE). The hook layer logs it; the
// server checks it against HOOK_CLIENT_ALLOWED_SUBJECTS before a request is read.
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import type { FastifyRequest } from 'fastify';
import type { ClientSubjectAllowList } from '../../config/server.ts';

export interface PeerIdentity {
  /** Subject common names (a certificate may carry several; usually one). */
  commonNames: string[];
  /** DNS subject alternative names. */
  dnsNames: string[];
}

const isTls = (socket: Socket): socket is TLSSocket => (socket as Partial<TLSSocket>).encrypted === true;

/**
 * The verified client certificate's names; undefined on plain HTTP, without mutual
 * TLS (the server asked for no certificate) or when none was presented.
 */
export function peerIdentity(socket: Socket): PeerIdentity | undefined {
  if (!isTls(socket) || !socket.authorized) return undefined;
  const cert = socket.getPeerCertificate();
  if (!cert || Object.keys(cert).length === 0) return undefined;
  const cn = (cert.subject as Record<string, string | string[] | undefined> | undefined)?.CN;
  const commonNames = cn === undefined ? [] : Array.isArray(cn) ? cn : [cn];
  return { commonNames, dnsNames: dnsNamesOf(cert.subjectaltname) };
}

/** `DNS:a, IP Address:1.2.3.4, DNS:"b,c"` → ['a', 'b,c'] (Node quotes names with special characters as JSON). */
function dnsNamesOf(subjectAltName: string | undefined): string[] {
  if (!subjectAltName) return [];
  const names: string[] = [];
  for (const m of subjectAltName.matchAll(/(?:^|, )DNS:("(?:[^"\\]|\\.)*"|[^,]*)/g)) {
    const raw = m[1]!;
    try {
      names.push(raw.startsWith('"') ? (JSON.parse(raw) as string) : raw);
    } catch {
      // A malformed quoted name cannot match an allow-list entry; skip it.
    }
  }
  return names;
}

/** How a subject is written in logs and answers: its common name, else its first DNS name. */
export function subjectName(identity: PeerIdentity): string | undefined {
  return identity.commonNames[0] ?? identity.dnsNames[0];
}

/** The caller's certificate subject (CN, or the first DNS SAN); undefined on plain HTTP or with no certificate. */
export function callerSubject(request: FastifyRequest): string | undefined {
  const identity = peerIdentity(request.raw.socket);
  return identity ? subjectName(identity) : undefined;
}

/** Any listed name matches: a CN entry against the common names, a DNS entry against the DNS SANs. */
export function subjectAllowed(identity: PeerIdentity, allowed: ClientSubjectAllowList): boolean {
  return (
    identity.commonNames.some((n) => allowed.commonNames.includes(n)) ||
    identity.dnsNames.some((n) => allowed.dnsNames.includes(n))
  );
}
