// Serving certificate from files, reloaded without restart. cert-manager
// rotates the mounted Secret by swapping a symlink in the directory, so we
// watch the directory and also re-read on an interval (watch events are not
// guaranteed on every filesystem). Only events naming our files or the
// Secret volume's own `..data` entries count: anything else written there
// (logs, say) must not re-read and re-parse the key pair each time. A burst of
// events is one re-read. A half-written pair is ignored until both files match again.
import { watch, readFileSync, type FSWatcher } from 'node:fs';
import { basename, dirname } from 'node:path';
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
  const ours = new Set(
    [files.certFile, files.keyFile, files.clientCaFile].filter(Boolean).map((f) => basename(f as string)),
  );
  let pending: NodeJS.Timeout | undefined;
  const onEvent = (_event: string, name: string | Buffer | null) => {
    const file = name === null ? undefined : String(name);
    if (file !== undefined && !ours.has(file) && !file.startsWith('..')) return;
    if (pending) return;
    pending = setTimeout(() => {
      pending = undefined;
      reload();
    }, 50);
    pending.unref();
  };
  const watchers: FSWatcher[] = [];
  for (const dir of new Set(
    [files.certFile, files.keyFile, files.clientCaFile].filter(Boolean).map((f) => dirname(f as string)),
  )) {
    try {
      const w = watch(dir, onEvent);
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
      clearTimeout(pending);
      for (const w of watchers) w.close();
    },
  };
}

function fingerprint(m: SecureContextOptions): string {
  return [m.cert, m.key, m.ca].map((b) => (b ? b.toString() : '')).join('\u0000');
}
