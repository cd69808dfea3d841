// The site's serving certificates (registry, binary mirror): issued by a CA the caller owns
// (the test run's, a benchmark's own), for 127.0.0.1, localhost and the names nodes dial.
import { issueCertificate, type PemPair } from '../../src/local/certs.ts';

export function siteServingCertificate(
  ca: PemPair,
  names: { ipAddresses?: string[]; dnsNames?: string[] } = {},
): PemPair {
  const unique = (list: string[]) => [...new Set(list)];
  return issueCertificate(ca, {
    commonName: names.dnsNames?.[0] ?? names.ipAddresses?.[0] ?? 'localhost',
    dnsNames: unique(['localhost', ...(names.dnsNames ?? [])]),
    ipAddresses: unique(['127.0.0.1', ...(names.ipAddresses ?? [])]),
    usage: 'server',
  });
}
