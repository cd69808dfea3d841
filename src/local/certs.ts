// X.509 helpers for development and tests: a CA, serving and client
// certificates signed by it, and the self-signed dev serving cert `make dev`
// creates on first start. Production certificates come from cert-manager.
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import forge from 'node-forge';

export interface PemPair {
  certPem: string;
  keyPem: string;
}

export interface IssueOptions {
  commonName: string;
  dnsNames?: string[];
  ipAddresses?: string[];
  usage: 'server' | 'client';
  validDays?: number;
}

function newKeys(): { publicKey: forge.pki.PublicKey; privateKey: forge.pki.rsa.PrivateKey; keyPem: string } {
  // Native key generation: forge's pure-JS RSA generation takes seconds.
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const keyPem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const forgeKey = forge.pki.privateKeyFromPem(keyPem) as forge.pki.rsa.PrivateKey;
  return { privateKey: forgeKey, publicKey: forge.pki.setRsaPublicKey(forgeKey.n, forgeKey.e), keyPem };
}

/**
 * A positive serial number whose DER encoding is minimal. OpenSSL 3 refuses a
 * certificate whose serial has a redundant leading zero byte ("illegal
 * padding"): a first byte of 1 to 0x7f needs no sign byte and has none.
 */
export function serialNumberHex(random: Uint8Array): string {
  const bytes = Uint8Array.from(random);
  bytes[0] = bytes[0]! & 0x7f || 0x01;
  return Buffer.from(bytes).toString('hex');
}

function baseCertificate(publicKey: forge.pki.PublicKey, commonName: string, validDays: number): forge.pki.Certificate {
  const cert = forge.pki.createCertificate();
  cert.publicKey = publicKey;
  cert.serialNumber = serialNumberHex(randomBytes(16));
  cert.validity.notBefore = new Date(Date.now() - 60_000);
  cert.validity.notAfter = new Date(Date.now() + validDays * 86_400_000);
  cert.setSubject([{ name: 'commonName', value: commonName }]);
  return cert;
}

export function createCertificateAuthority(commonName = 'capi-upgrade-orchestrator dev CA', validDays = 3650): PemPair {
  const { publicKey, privateKey, keyPem } = newKeys();
  const cert = baseCertificate(publicKey, commonName, validDays);
  cert.setIssuer(cert.subject.attributes);
  cert.setExtensions([
    { name: 'basicConstraints', cA: true, critical: true },
    { name: 'keyUsage', keyCertSign: true, cRLSign: true, digitalSignature: true, critical: true },
    { name: 'subjectKeyIdentifier' },
  ]);
  cert.sign(privateKey, forge.md.sha256.create());
  return { certPem: forge.pki.certificateToPem(cert), keyPem };
}

export function issueCertificate(ca: PemPair, options: IssueOptions): PemPair {
  const caCert = forge.pki.certificateFromPem(ca.certPem);
  const caKey = forge.pki.privateKeyFromPem(ca.keyPem) as forge.pki.rsa.PrivateKey;
  const { publicKey, keyPem } = newKeys();
  const cert = baseCertificate(publicKey, options.commonName, options.validDays ?? 365);
  cert.setIssuer(caCert.subject.attributes);
  const altNames = [
    ...(options.dnsNames ?? []).map((value) => ({ type: 2, value })),
    ...(options.ipAddresses ?? []).map((ip) => ({ type: 7, ip })),
  ];
  cert.setExtensions([
    { name: 'basicConstraints', cA: false },
    { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
    { name: 'extKeyUsage', serverAuth: options.usage === 'server', clientAuth: options.usage === 'client' },
    ...(altNames.length > 0 ? [{ name: 'subjectAltName', altNames }] : []),
  ]);
  cert.sign(caKey, forge.md.sha256.create());
  return { certPem: forge.pki.certificateToPem(cert), keyPem };
}

/**
 * Makes sure `dir` holds `tls.crt`/`tls.key` (and the `ca.crt` that signed
 * them) for localhost, creating them on first use. Returns the CA PEM, which
 * is what an ExtensionConfig's caBundle would carry.
 */
export function ensureDevServingCertificate(dir: string): { caPem: string; created: boolean } {
  const caFile = join(dir, 'ca.crt');
  if (existsSync(join(dir, 'tls.crt')) && existsSync(join(dir, 'tls.key')) && existsSync(caFile)) {
    return { caPem: readFileSync(caFile, 'utf8'), created: false };
  }
  mkdirSync(dir, { recursive: true });
  const ca = createCertificateAuthority();
  const serving = issueCertificate(ca, {
    commonName: 'localhost',
    dnsNames: ['localhost'],
    ipAddresses: ['127.0.0.1', '::1'],
    usage: 'server',
  });
  writeFileSync(caFile, ca.certPem);
  writeFileSync(join(dir, 'tls.crt'), serving.certPem);
  writeFileSync(join(dir, 'tls.key'), serving.keyPem, { mode: 0o600 });
  return { caPem: ca.certPem, created: true };
}
