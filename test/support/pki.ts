// One set of test certificates per run, made by the global setup: node-forge
// runs ~15x slower inside jest's VM context than in the parent process.
import { readFileSync, writeFileSync } from 'node:fs';
import { createCertificateAuthority, issueCertificate, type PemPair } from '../../src/local/certs.ts';
import { CAPI_CLIENT_SUBJECTS } from '../../src/local/embedded-management.ts';
import { requireEnv } from './services.ts';

export interface TestPki {
  ca: PemPair;
  serving: PemPair;
  /** A second serving certificate from the same CA, for rotation tests. */
  servingRotated: PemPair;
  otherCa: PemPair;
  clientCa: PemPair;
  client: PemPair;
  /** A second client certificate from clientCa, for rotation tests. */
  clientRotated: PemPair;
  /** A client certificate from a CA the server does not trust. */
  rogueClient: PemPair;
  /** Kubeadm control plane's client certificate (clientCa), as config/default names it. */
  kcpClient: PemPair;
  /** From clientCa, named only by a DNS SAN the allow-list tests list. */
  dnsClient: PemPair;
  /** A new client CA and a certificate from it, for client CA rotation. */
  clientCaNext: PemPair;
  clientNext: PemPair;
}

/** The subjects config/default gives CAPI's core and KCP managers (config/certmanager/client-ca.yaml). */
export const CAPI_CORE_CLIENT_SUBJECT = CAPI_CLIENT_SUBJECTS.capi;
export const CAPI_KCP_CLIENT_SUBJECT = CAPI_CLIENT_SUBJECTS.kcp;

const localhost = {
  commonName: 'localhost',
  dnsNames: ['localhost'],
  ipAddresses: ['127.0.0.1'],
  usage: 'server' as const,
};

export function writeTestPki(file: string): void {
  const ca = createCertificateAuthority('test CA');
  const clientCa = createCertificateAuthority('test client CA');
  const clientCaNext = createCertificateAuthority('test client CA, rotated');
  const pki: TestPki = {
    ca,
    serving: issueCertificate(ca, localhost),
    servingRotated: issueCertificate(ca, localhost),
    otherCa: createCertificateAuthority('someone else'),
    clientCa,
    client: issueCertificate(clientCa, { commonName: CAPI_CORE_CLIENT_SUBJECT, usage: 'client' }),
    clientRotated: issueCertificate(clientCa, { commonName: 'capi-upgrade-orchestrator-rotated', usage: 'client' }),
    rogueClient: issueCertificate(createCertificateAuthority('rogue'), { commonName: 'rogue', usage: 'client' }),
    kcpClient: issueCertificate(clientCa, { commonName: CAPI_KCP_CLIENT_SUBJECT, usage: 'client' }),
    dnsClient: issueCertificate(clientCa, { commonName: 'tenant', dnsNames: ['hooks.example'], usage: 'client' }),
    clientCaNext,
    clientNext: issueCertificate(clientCaNext, { commonName: CAPI_CORE_CLIENT_SUBJECT, usage: 'client' }),
  };
  writeFileSync(file, JSON.stringify(pki));
}

/**
 * A serving certificate from the run's test CA (`testPki().ca`) for 127.0.0.1 and localhost
 * plus the addresses and host names given: a local registry or mirror that nodes in
 * containers reach on another address.
 */
export function testServingCertificate(names: { ipAddresses?: string[]; dnsNames?: string[] } = {}): PemPair {
  const unique = (list: string[]) => [...new Set(list)];
  return issueCertificate(testPki().ca, {
    commonName: names.dnsNames?.[0] ?? names.ipAddresses?.[0] ?? 'localhost',
    dnsNames: unique([...localhost.dnsNames, ...(names.dnsNames ?? [])]),
    ipAddresses: unique([...localhost.ipAddresses, ...(names.ipAddresses ?? [])]),
    usage: 'server',
  });
}

let cached: TestPki | undefined;
export function testPki(): TestPki {
  cached ??= JSON.parse(readFileSync(requireEnv('TEST_PKI_FILE'), 'utf8')) as TestPki;
  return cached;
}
