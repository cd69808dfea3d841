// A local OCI registry (distribution's `registry serve`) over HTTPS with a certificate from the
// run's test CA: what an air-gapped site's mirror is to kubeadm (`imageRepository`) and
// containerd. Storage, config and log live in a directory of their own under the caller's,
// which stop() removes. The binary comes from REGISTRY_BINARY (the tool cache's build).
import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants, openSync, rmSync, writeFileSync } from 'node:fs';
import { get } from 'node:https';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { stringify } from 'yaml';
import { freePort } from '../../src/local/free-ports.ts';
import { logTail } from '../../src/local/log-tail.ts';
import { ownedTempDir } from '../owned-dirs.ts';
import type { PemPair } from '../../src/local/certs.ts';
import { siteServingCertificate } from './site-tls.ts';

export interface RegistryOptions {
  /** The CA that issues its serving certificate (the one clients trust). */
  ca: PemPair;
  /** Where the registry's own directory is made (the run's temp dir, a tier's state dir). */
  parentDir: string;
  /** Address to listen on; default 127.0.0.1. */
  host?: string;
  /** Default a free port. */
  port?: number;
  /** Names in the certificate besides 127.0.0.1 and localhost (the address nodes use). */
  ipAddresses?: string[];
  dnsNames?: string[];
}

export interface LocalRegistry {
  /** `https://<host>:<port>` */
  url: string;
  /** `<host>:<port>`, the prefix of an image reference (kubeadm's imageRepository). */
  address: string;
  /** The CA that signed its certificate: what a client or a node must trust. */
  caPem: string;
  dir: string;
  stop(): Promise<void>;
}

export function registryBinary(): string {
  const path = process.env.REGISTRY_BINARY;
  if (!path)
    throw new Error("REGISTRY_BINARY is not set: it names distribution's `registry` binary (the tool cache builds it)");
  try {
    accessSync(path, constants.X_OK);
  } catch {
    throw new Error(`REGISTRY_BINARY=${path} is not an executable file`);
  }
  return path;
}

export async function startRegistry(options: RegistryOptions): Promise<LocalRegistry> {
  const binary = registryBinary();
  const host = options.host ?? '127.0.0.1';
  const dir = ownedTempDir('registry-', options.parentDir);
  try {
    const tls = siteServingCertificate(options.ca, {
      ipAddresses: [...(options.ipAddresses ?? []), ...(/^[\d.]+$/.test(host) ? [host] : [])],
      dnsNames: [...(options.dnsNames ?? []), ...(/^[\d.]+$/.test(host) ? [] : [host])],
    });
    writeFileSync(join(dir, 'tls.crt'), tls.certPem);
    writeFileSync(join(dir, 'tls.key'), tls.keyPem, { mode: 0o600 });
    // A fixed port is the caller's to keep free; a chosen one can be taken between the
    // choice and the bind, so that start is tried once more on another.
    for (let attempt = 1; ; attempt++) {
      const port = options.port ?? (await freePort(host));
      try {
        return await startOnce(binary, dir, host, port, options.ca.certPem);
      } catch (err) {
        if (options.port !== undefined || attempt === 2) throw err;
      }
    }
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
}

async function startOnce(
  binary: string,
  dir: string,
  host: string,
  port: number,
  caPem: string,
): Promise<LocalRegistry> {
  const config = join(dir, 'config.yml');
  writeFileSync(
    config,
    stringify({
      version: 0.1,
      log: { level: 'info', formatter: 'text', accesslog: { disabled: true } },
      storage: {
        filesystem: { rootdirectory: join(dir, 'storage') },
        delete: { enabled: true },
        maintenance: { uploadpurging: { enabled: false } },
      },
      http: {
        addr: `${host}:${port}`,
        secret: 'local-test-registry',
        tls: { certificate: join(dir, 'tls.crt'), key: join(dir, 'tls.key') },
      },
    }),
  );
  const log = join(dir, 'registry.log');
  const out = openSync(log, 'a');
  // Registry v3 exports traces to https://localhost:4318 unless told not to (its configuration docs).
  const env = { ...process.env, OTEL_TRACES_EXPORTER: 'none' };
  const child = spawn(binary, ['serve', config], { stdio: ['ignore', out, out], env });
  const address = `${host}:${port}`;
  const url = `https://${address}`;
  const stop = stopper(child, dir);
  try {
    await ready(url, caPem, child, log);
  } catch (err) {
    await stop(false);
    throw err;
  }
  return { url, address, caPem, dir, stop: () => stop(true) };
}

/** Waits until `GET /v2/` answers 200 over TLS with the CA (the registry's API is up). */
async function ready(url: string, caPem: string, child: ChildProcess, log: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null)
      throw new Error(
        `the registry at ${url} exited (${child.exitCode ?? child.signalCode}); the end of its log:\n${logTail(log)}`,
      );
    if ((await status(`${url}/v2/`, caPem)) === 200) return;
    if (Date.now() > deadline)
      throw new Error(`the registry at ${url} did not answer in 30 s; the end of its log:\n${logTail(log)}`);
    await sleep(100);
  }
}

function status(url: string, caPem: string): Promise<number | undefined> {
  return new Promise((resolve) => {
    const req = get(url, { ca: caPem, agent: false, timeout: 1000 }, (res) => {
      res.resume();
      resolve(res.statusCode);
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(undefined));
  });
}

function stopper(child: ChildProcess, dir: string): (removeDir: boolean) => Promise<void> {
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return async (removeDir) => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    }
    if (removeDir) rmSync(dir, { recursive: true, force: true });
  };
}
