import { describe, expect, it } from '@jest/globals';
import { X509Certificate } from 'node:crypto';
import { createSecureContext } from 'node:tls';
import { createCertificateAuthority, issueCertificate, serialNumberHex } from '../../src/local/certs.ts';

describe('development certificates', () => {
  // `make dev` once failed to start with "asn1 encoding routines::illegal
  // padding": a random serial starting 0x00 was encoded with a redundant
  // leading zero byte, which OpenSSL 3 refuses (1 certificate in 256).
  it.each([
    ['0x00', 0x00, '01'],
    ['0x3e', 0x3e, '3e'],
    ['0x80', 0x80, '01'],
    ['0xff', 0xff, '7f'],
  ])('gives a serial starting %s a minimal positive encoding', (_name, first, expected) => {
    const random = new Uint8Array(16).fill(0xab);
    random[0] = first;
    const hex = serialNumberHex(random);
    expect(hex).toHaveLength(32);
    expect(hex.slice(0, 2)).toBe(expected);
    expect(hex.slice(2)).toBe('ab'.repeat(15));
  });

  it('issues certificates that OpenSSL loads and that chain to their CA', () => {
    const ca = createCertificateAuthority('test CA', 1);
    const serving = issueCertificate(ca, { commonName: 'localhost', ipAddresses: ['127.0.0.1'], usage: 'server' });
    const cert = new X509Certificate(serving.certPem);
    expect(cert.checkIssued(new X509Certificate(ca.certPem))).toBe(true);
    expect(cert.checkIP('127.0.0.1')).toBe('127.0.0.1');
    expect(() => createSecureContext({ cert: serving.certPem, key: serving.keyPem, ca: ca.certPem })).not.toThrow();
  });
});
