import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { ConfigError, parseConfig } from '../../src/config/index.ts';
import {
  readTemporalCredentials,
  watchTemporalCredentials,
  type CredentialChanges,
  type TemporalConnectionSettings,
} from '../../src/platform/temporal/connection.ts';
import { createCertificateAuthority, issueCertificate } from '../../src/local/certs.ts';

const problemsOf = (env: Record<string, string>): string => {
  try {
    parseConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) return err.problems.join('\n');
    throw err;
  }
  return '';
};

describe('Temporal connection settings', () => {
  it('defaults to plaintext, and turns TLS on for any TLS file or an API key', () => {
    expect(parseConfig({}).temporal).toEqual({
      address: '127.0.0.1:7233',
      namespace: 'default',
      taskQueue: 'capi-upgrade-orchestrator',
      reloadIntervalMs: 30_000,
      // Within the frontend's default visibility rate once raised to the dev server's 100 (docs/production-temporal.md).
      visibilityListsPerSecond: 50,
    });
    expect(parseConfig({ TEMPORAL_TLS: 'true' }).temporal.tls).toEqual({});
    expect(parseConfig({ TEMPORAL_TLS_CA_FILE: '/ca.pem' }).temporal.tls).toEqual({ caFile: '/ca.pem' });
    expect(parseConfig({ TEMPORAL_API_KEY_FILE: '/key' }).temporal).toMatchObject({ tls: {}, apiKeyFile: '/key' });
    expect(
      parseConfig({ TEMPORAL_TLS_CERT_FILE: '/c', TEMPORAL_TLS_KEY_FILE: '/k', TEMPORAL_TLS_SERVER_NAME: 'temporal' })
        .temporal.tls,
    ).toEqual({ certFile: '/c', keyFile: '/k', serverName: 'temporal' });
  });

  it('names every contradiction', () => {
    expect(problemsOf({ TEMPORAL_TLS_CERT_FILE: '/c' })).toContain(
      'TEMPORAL_TLS_CERT_FILE and TEMPORAL_TLS_KEY_FILE: set both (mTLS) or neither',
    );
    expect(problemsOf({ TEMPORAL_API_KEY: 'k', TEMPORAL_API_KEY_FILE: '/k' })).toContain(
      'TEMPORAL_API_KEY and TEMPORAL_API_KEY_FILE: set one, not both',
    );
    expect(problemsOf({ TEMPORAL_TLS: 'false', TEMPORAL_API_KEY_FILE: '/k' })).toContain('needs TLS');
    expect(problemsOf({ TEMPORAL_TLS: 'false', TEMPORAL_TLS_CA_FILE: '/ca' })).toContain(
      'TEMPORAL_TLS=false contradicts',
    );
    expect(problemsOf({ TEMPORAL_CREDENTIALS_RELOAD_INTERVAL: '5ms' })).toContain(
      'TEMPORAL_CREDENTIALS_RELOAD_INTERVAL',
    );
  });
});

describe('Temporal credentials from files', () => {
  const dir = mkdtempSync(join(tmpdir(), 'capi-uo-temporal-creds-'));
  const ca = createCertificateAuthority('temporal client CA');
  const pair = issueCertificate(ca, { commonName: 'worker', usage: 'client' });
  const other = issueCertificate(ca, { commonName: 'worker-2', usage: 'client' });
  const settings = (s: Partial<TemporalConnectionSettings>): TemporalConnectionSettings => ({
    address: 'temporal:7233',
    namespace: 'default',
    reloadIntervalMs: 60_000,
    ...s,
  });

  it('reads the CA, the client pair and the API key; a bad file is named by its setting', () => {
    writeFileSync(join(dir, 'ca.pem'), ca.certPem);
    writeFileSync(join(dir, 'tls.crt'), pair.certPem);
    writeFileSync(join(dir, 'tls.key'), pair.keyPem);
    writeFileSync(join(dir, 'api-key'), ' secret-key\n');
    const creds = readTemporalCredentials(
      settings({
        tls: { caFile: join(dir, 'ca.pem'), certFile: join(dir, 'tls.crt'), keyFile: join(dir, 'tls.key') },
        apiKeyFile: join(dir, 'api-key'),
      }),
    );
    expect(creds.tls?.serverRootCACertificate?.toString()).toBe(ca.certPem);
    expect(creds.tls?.clientCertPair?.crt.toString()).toBe(pair.certPem);
    expect(creds.apiKey).toBe('secret-key');

    expect(() => readTemporalCredentials(settings({ tls: { caFile: join(dir, 'missing.pem') } }))).toThrow(
      `TEMPORAL_TLS_CA_FILE=${join(dir, 'missing.pem')}: ENOENT`,
    );
    writeFileSync(join(dir, 'mismatched.key'), other.keyPem);
    expect(() =>
      readTemporalCredentials(
        settings({ tls: { certFile: join(dir, 'tls.crt'), keyFile: join(dir, 'mismatched.key') } }),
      ),
    ).toThrow(/TEMPORAL_TLS_CERT_FILE=.* and TEMPORAL_TLS_KEY_FILE=.* do not form a certificate and key pair/);
    writeFileSync(join(dir, 'empty-key'), '\n');
    expect(() => readTemporalCredentials(settings({ tls: {}, apiKeyFile: join(dir, 'empty-key') }))).toThrow(
      `TEMPORAL_API_KEY_FILE=${join(dir, 'empty-key')}: the file is empty`,
    );
  });

  it('reports a new API key (installed live) apart from new TLS material (a reconnect)', () => {
    writeFileSync(join(dir, 'w-key'), 'one');
    writeFileSync(join(dir, 'w.crt'), pair.certPem);
    writeFileSync(join(dir, 'w.key'), pair.keyPem);
    const s = settings({
      tls: { certFile: join(dir, 'w.crt'), keyFile: join(dir, 'w.key') },
      apiKeyFile: join(dir, 'w-key'),
    });
    const seen: CredentialChanges[] = [];
    const errors: string[] = [];
    const watch = watchTemporalCredentials(
      s,
      readTemporalCredentials(s),
      (c) => seen.push(c),
      (e) => errors.push(String(e)),
    );
    try {
      watch.check();
      expect(seen).toEqual([]);
      writeFileSync(join(dir, 'w-key'), 'two');
      watch.check();
      expect(seen).toEqual([{ apiKey: 'two' }]);
      // Half-rotated (new key, old certificate): kept as is until the pair matches again.
      writeFileSync(join(dir, 'w.key'), other.keyPem);
      watch.check();
      expect(seen).toHaveLength(1);
      expect(errors[0]).toMatch(/do not form a certificate and key pair/);
      writeFileSync(join(dir, 'w.crt'), other.certPem);
      watch.check();
      expect(seen).toHaveLength(2);
      expect(seen[1]?.apiKey).toBeUndefined();
      expect(seen[1]?.reconnect?.tls?.clientCertPair?.crt.toString()).toBe(other.certPem);
    } finally {
      watch.stop();
    }
  });
});
