// How this process reaches Temporal: address and namespace, TLS (server CA,
// server name), mTLS client certificate and key, or a Temporal Cloud API key,
// all from settings and files (src/config/). Files are re-read on an interval:
// a new API key is installed on the live connections; a new CA or client
// certificate makes the caller reconnect (gRPC fixes TLS at connect time).
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createSecureContext } from 'node:tls';
import { Connection, type TLSConfig } from '@temporalio/client';

export interface TemporalTlsSettings {
  /** PEM of the CA(s) that signed the frontend's certificate; unset = the system's. */
  caFile?: string;
  /** SNI / certificate name to expect when it differs from the address's host. */
  serverName?: string;
  /** mTLS: the client certificate chain and its key (both or neither). */
  certFile?: string;
  keyFile?: string;
}

/** Where Temporal is and how to authenticate. */
export interface TemporalEndpoint {
  address: string;
  namespace: string;
  /** TLS on (true or settings) or off (undefined). */
  tls?: TemporalTlsSettings;
  /** Temporal Cloud API key, read from this file (preferred: rotates without restart). */
  apiKeyFile?: string;
  /** Or given directly (TEMPORAL_API_KEY). */
  apiKey?: string;
}

export interface TemporalConnectionSettings extends TemporalEndpoint {
  /** How often the credential files are re-read. */
  reloadIntervalMs: number;
}

export interface TemporalCredentials {
  tls?: TLSConfig;
  apiKey?: string;
  /** Changes when the TLS material changes (a reconnect is needed). */
  tlsFingerprint: string;
}

/** Reads every file the settings name; an unreadable or invalid one throws naming its setting. */
export function readTemporalCredentials(s: TemporalEndpoint): TemporalCredentials {
  const read = (setting: string, path: string): Buffer => {
    try {
      return readFileSync(path);
    } catch (err) {
      throw new Error(`${setting}=${path}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
    }
  };
  let tls: TLSConfig | undefined;
  const hash = createHash('sha256');
  if (s.tls) {
    tls = {};
    if (s.tls.serverName) tls.serverNameOverride = s.tls.serverName;
    if (s.tls.caFile) tls.serverRootCACertificate = read('TEMPORAL_TLS_CA_FILE', s.tls.caFile);
    if (s.tls.certFile && s.tls.keyFile) {
      const crt = read('TEMPORAL_TLS_CERT_FILE', s.tls.certFile);
      const key = read('TEMPORAL_TLS_KEY_FILE', s.tls.keyFile);
      try {
        // Fails on a key that does not match the certificate (or a half-rotated pair).
        createSecureContext({ cert: crt, key });
      } catch (err) {
        throw new Error(
          `TEMPORAL_TLS_CERT_FILE=${s.tls.certFile} and TEMPORAL_TLS_KEY_FILE=${s.tls.keyFile} do not form a certificate and key pair: ${err instanceof Error ? err.message : String(err)}`,
        );
      }
      tls.clientCertPair = { crt, key };
    }
    for (const b of [
      tls.serverNameOverride,
      tls.serverRootCACertificate,
      tls.clientCertPair?.crt,
      tls.clientCertPair?.key,
    ])
      hash.update(b ?? '').update('\0');
  }
  let apiKey = s.apiKey;
  if (s.apiKeyFile) {
    apiKey = read('TEMPORAL_API_KEY_FILE', s.apiKeyFile).toString('utf8').trim();
    if (!apiKey) throw new Error(`TEMPORAL_API_KEY_FILE=${s.apiKeyFile}: the file is empty`);
  }
  return { ...(tls ? { tls } : {}), ...(apiKey ? { apiKey } : {}), tlsFingerprint: hash.digest('hex') };
}

/** A connection for a one-shot process (no credential rotation): the credential files are read now. */
export function connectTemporal(s: TemporalEndpoint): Promise<Connection> {
  return Connection.connect(connectionOptions(s, readTemporalCredentials(s)));
}

/** Connection options for @temporalio/client's Connection and the worker's NativeConnection. */
export function connectionOptions(
  s: TemporalEndpoint,
  c: TemporalCredentials,
): { address: string; tls?: TLSConfig; apiKey?: string } {
  return { address: s.address, ...(c.tls ? { tls: c.tls } : {}), ...(c.apiKey ? { apiKey: c.apiKey } : {}) };
}

export interface CredentialChanges {
  apiKey?: string;
  /** New TLS material: reconnect with these credentials. */
  reconnect?: TemporalCredentials;
}

/** Re-reads the credential files every interval and reports what changed. */
export function watchTemporalCredentials(
  s: TemporalConnectionSettings,
  initial: TemporalCredentials,
  onChange: (changes: CredentialChanges) => void,
  onError: (err: unknown) => void,
): { check(): void; stop(): void } {
  let current = initial;
  const check = () => {
    let next: TemporalCredentials;
    try {
      next = readTemporalCredentials(s);
    } catch (err) {
      // Mid-rotation (a half-written pair) or gone: keep what works.
      onError(err);
      return;
    }
    const changes: CredentialChanges = {};
    if (next.apiKey !== undefined && next.apiKey !== current.apiKey) changes.apiKey = next.apiKey;
    if (next.tlsFingerprint !== current.tlsFingerprint) changes.reconnect = next;
    current = next;
    if (changes.apiKey !== undefined || changes.reconnect) onChange(changes);
  };
  const watched = s.apiKeyFile || s.tls?.caFile || s.tls?.certFile;
  const timer = watched ? setInterval(check, s.reloadIntervalMs).unref() : undefined;
  return { check, stop: () => clearInterval(timer) };
}

/** A startup failure to connect, worded for the operator: which address, which settings matter. */
export function connectFailureMessage(s: TemporalEndpoint, err: unknown): string {
  const why = err instanceof Error ? err.message.split('\n')[0] : String(err);
  const hints = [
    `TEMPORAL_ADDRESS=${s.address}`,
    `TEMPORAL_NAMESPACE=${s.namespace}`,
    s.tls ? 'TEMPORAL_TLS=true' : 'TEMPORAL_TLS=false (set it, or a TLS file, when the frontend requires TLS)',
    ...(s.tls?.caFile ? [`TEMPORAL_TLS_CA_FILE=${s.tls.caFile}`] : []),
    ...(s.tls?.certFile ? [`TEMPORAL_TLS_CERT_FILE=${s.tls.certFile}`] : []),
    ...(s.apiKeyFile ? [`TEMPORAL_API_KEY_FILE=${s.apiKeyFile}`] : []),
  ];
  return `cannot connect to Temporal: ${why} (check ${hints.join(', ')})`;
}
