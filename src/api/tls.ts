// Serving certificate from files, reloaded without restart. cert-manager
// rotates the mounted Secret by swapping a symlink in the directory, so we
// watch the directory and also re-read on an interval (watch events are not
// guaranteed on every filesystem). A half-written pair is ignored until both
// files match again.
import { watch, readFileSync, type FSWatcher } from 'node:fs';
import { dirname } from 'node:path';
import { createSecureContext, type SecureContextOptions } from 'node:tls';

export interface TlsFiles {
  certFile: string;
  keyFile: string;
  clientCaFile?: string;
}

export function readTlsMaterial(files: TlsFiles): SecureContextOptions {
  const material: SecureContextOptions = { cert: readFileSync(files.certFile), key: readFileSync(files.keyFile) };
  if (files.clientCaFile) material.ca = readFileSync(files.clientCaFile);
  // Throws on a mismatched or partial pair: callers keep the old context then.
  createSecureContext(material);
  return material;
}

export interface CertificateReloader {
  /** Re-reads the files now; true when a new certificate was installed. */
  reload(): boolean;
  stop(): void;
}

export function watchCertificates(
  files: TlsFiles,
  intervalMs: number,
  install: (material: SecureContextOptions) => void,
  onError: (err: unknown) => void,
): CertificateReloader {
  let current = fingerprint(readTlsMaterial(files));
  const reload = (): boolean => {
    try {
      const material = readTlsMaterial(files);
      const next = fingerprint(material);
      if (next === current) return false;
      install(material);
      current = next;
      return true;
    } catch (err) {
      onError(err);
      return false;
    }
  };
  const timer = setInterval(reload, intervalMs);
  timer.unref();
  const watchers: FSWatcher[] = [];
  for (const dir of new Set(
    [files.certFile, files.keyFile, files.clientCaFile].filter(Boolean).map((f) => dirname(f as string)),
  )) {
    try {
      const w = watch(dir, () => reload());
      w.unref();
      watchers.push(w);
    } catch (err) {
      onError(err);
    }
  }
  return {
    reload,
    stop() {
      clearInterval(timer);
      for (const w of watchers) w.close();
    },
  };
}

function fingerprint(m: SecureContextOptions): string {
  return [m.cert, m.key, m.ca].map((b) => (b ? b.toString() : '')).join('\u0000');
}
