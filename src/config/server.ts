// The hook server's settings: listen address, TLS and client certificates,
// request bounds, and one handler per hook (name, enabled, timeout, failure
// policy), from HOOK_*, TLS_* and HOOKS_DISABLED.
import {
  defaultHandlerName,
  hookDefaults,
  hookNames,
  type FailurePolicy,
  type HookFamily,
  type HookName,
} from '../model/hooks.ts';
import { DNS1123_LABEL } from '../model/cluster-upgrade.ts';
import type { EnvReader } from './env.ts';

export interface HandlerConfig {
  hook: HookName;
  /** DNS-1123 label, unique; the last URL segment. */
  name: string;
  enabled: boolean;
  timeoutSeconds: number;
  failurePolicy: FailurePolicy;
}

export interface ServerConfig {
  host: string;
  port: number;
  certFile: string;
  keyFile: string;
  /** PEM bundle of CAs whose client certificates are accepted; set = mutual TLS. */
  clientCaFile?: string;
  /** With mutual TLS: only certificates naming one of these may call (HOOK_CLIENT_ALLOWED_SUBJECTS). */
  clientAllowedSubjects?: ClientSubjectAllowList;
  /** How often the certificate files are re-read (cert-manager rotates them in place). */
  tlsReloadIntervalMs: number;
  /** Development only: serve plain HTTP. CAPI itself refuses http. */
  insecureHttp: boolean;
  /** Largest request body per hook family; larger ones get 413 before they are read (docs/limits.md). */
  bodyLimits: Record<HookFamily, number>;
  /** Body bytes being read, parsed and handled at once, all requests together (src/api/body-budget.ts). */
  bodyBytesInFlight: number;
  /** Most JSON items (objects, arrays, members, elements) a body may hold; more get 413 before it is parsed (src/domain/json-bounds.ts). */
  bodyMaxJsonItems: number;
  /** Time to receive a whole request (headers and body); a slower client gets 408 and its body slot back. */
  requestTimeoutMs: number;
  /** Open connections at once; past it new connections are closed at once. */
  maxConnections: number;
  /** retryAfterSeconds answered by blocking hooks while Temporal cannot be reached. */
  unavailableRetryAfterSeconds: number;
  /**
   * Most retryAfterSeconds of an upgrade gate that waits for a time it knows (upgradeAt, a window, a
   * freeze): CAPI calls again no sooner (its hook cache), so this is also how late it learns of an abort.
   */
  waitRetryAfterMaxSeconds: number;
}

/** Client certificate names admitted: `CN=x` matches a subject common name, `DNS=x` a DNS SAN, `x` either. */
export interface ClientSubjectAllowList {
  commonNames: string[];
  dnsNames: string[];
}

/**
 * Body limits by hook family, from the largest request CAPI can send (docs/limits.md): one
 * Cluster (etcd caps an object at 1.5 MiB) for lifecycle and plan hooks; up to six objects
 * (current and desired Machine, infrastructure machine, bootstrap config) for in-place hooks.
 */
export const DEFAULT_BODY_LIMITS: Readonly<Record<HookFamily, number>> = {
  lifecycle: 2 * 1024 * 1024,
  'upgrade-plan': 2 * 1024 * 1024,
  'in-place': 6 * 1024 * 1024,
};
/** Discovery carries nothing but apiVersion and kind. */
export const DISCOVERY_BODY_LIMIT_BYTES = 64 * 1024;
/** Bodies up to this size are "small" (every hook call measured from real CAPI is well under it). */
export const SMALL_BODY_BYTES = 64 * 1024;
/** Bytes of the in-flight budget only small bodies may take: bodies at the limit never starve them. */
export const SMALL_BODY_RESERVE_BYTES = 1024 * 1024;
/**
 * The largest body CAPI can send (~4.2 MiB) at the density of CAPI-shaped requests (one item per 11–14
 * bytes) holds ~400 Ki items; this leaves ~30 % above. Parsing the costliest 6 MiB body under it takes
 * ~0.2–0.4 s and ~28 MiB of heap, 6 MiB of `[{},…]` (4 Mi items) ~1.4 s and ~130 MiB (docs/limits.md).
 */
export const DEFAULT_BODY_MAX_JSON_ITEMS = 512 * 1024;
/**
 * Deepest nesting of objects and arrays a body may hold. Real Machines, KubeadmConfigs and infrastructure
 * machines nest ~10 deep; the handlers' recursive walks overflow the stack past ~2,500.
 */
export const MAX_JSON_DEPTH = 1000;
/** ~21 heap bytes per body byte at worst: 7 MiB in flight (~150 MiB) fits beside the api's ~70 MiB in a 256 MiB old space. */
export const DEFAULT_BODY_BYTES_IN_FLIGHT = 7 * 1024 * 1024;

/** `BeforeClusterUpgrade` → `BEFORE_CLUSTER_UPGRADE`, the per-hook variable infix. */
export function hookEnvName(hook: HookName): string {
  return defaultHandlerName(hook).replace(/-/g, '_').toUpperCase();
}

/** HOOK_SERVER_*, TLS_* and HOOK_CLIENT_ALLOWED_SUBJECTS. */
export function readServerConfig(read: EnvReader): ServerConfig {
  const certDir = read.str('TLS_CERT_DIR', '/tmp/k8s-webhook-server/serving-certs');
  const clientCaFile = read.env.TLS_CLIENT_CA_FILE || undefined;
  const server: ServerConfig = {
    host: read.str('HOOK_SERVER_HOST', '0.0.0.0'),
    port: read.int('HOOK_SERVER_PORT', 9443, 0, 65535),
    certFile: read.str('TLS_CERT_FILE', `${certDir}/tls.crt`),
    keyFile: read.str('TLS_KEY_FILE', `${certDir}/tls.key`),
    ...(clientCaFile ? { clientCaFile } : {}),
    ...clientAllowList(read, clientCaFile),
    tlsReloadIntervalMs: read.int('TLS_RELOAD_INTERVAL_SECONDS', 10, 1, 3600) * 1000,
    insecureHttp: read.bool('HOOK_SERVER_INSECURE_HTTP', false),
    ...bodyBounds(read),
    bodyMaxJsonItems: read.int('HOOK_SERVER_BODY_MAX_JSON_ITEMS', DEFAULT_BODY_MAX_JSON_ITEMS, 1024, 64 * 1024 * 1024),
    requestTimeoutMs: read.duration('HOOK_SERVER_REQUEST_TIMEOUT', 30_000, 1_000, 300_000),
    maxConnections: read.int('HOOK_SERVER_MAX_CONNECTIONS', 512, 1, 65_536),
    unavailableRetryAfterSeconds: read.int('HOOK_UNAVAILABLE_RETRY_AFTER_SECONDS', 30, 1, 3600),
    waitRetryAfterMaxSeconds: read.int('HOOK_WAIT_RETRY_AFTER_MAX_SECONDS', 60, 10, 3600),
  };

  if (server.insecureHttp && (clientCaFile || server.clientAllowedSubjects))
    read.problems.push(
      'HOOK_SERVER_INSECURE_HTTP=true serves plain HTTP: TLS_CLIENT_CA_FILE and HOOK_CLIENT_ALLOWED_SUBJECTS need TLS',
    );
  return server;
}

/** Body limits (one for every hook family when set) and the bytes in flight they need. */
function bodyBounds(read: EnvReader): Pick<ServerConfig, 'bodyLimits' | 'bodyBytesInFlight'> {
  const MiB = 1024 * 1024;
  const given = read.env.HOOK_SERVER_BODY_LIMIT_BYTES
    ? read.int('HOOK_SERVER_BODY_LIMIT_BYTES', DEFAULT_BODY_LIMITS['in-place'], 1024, 256 * MiB)
    : undefined;
  const bodyLimits: Record<HookFamily, number> = given
    ? { lifecycle: given, 'upgrade-plan': given, 'in-place': given }
    : { ...DEFAULT_BODY_LIMITS };
  // Room for one body at the largest limit beside the small bodies' reserve.
  const needed = Math.max(...Object.values(bodyLimits)) + SMALL_BODY_RESERVE_BYTES;
  const bodyBytesInFlight = read.int(
    'HOOK_SERVER_BODY_BYTES_IN_FLIGHT',
    Math.max(DEFAULT_BODY_BYTES_IN_FLIGHT, needed),
    64 * 1024,
    1024 * MiB,
  );
  if (bodyBytesInFlight < needed)
    read.problems.push(
      `HOOK_SERVER_BODY_BYTES_IN_FLIGHT=${bodyBytesInFlight}: must be at least the largest body limit plus ${SMALL_BODY_RESERVE_BYTES} bytes (${needed})`,
    );
  return { bodyLimits, bodyBytesInFlight };
}

/** HOOK_CLIENT_ALLOWED_SUBJECTS: comma-separated `CN=name`, `DNS=name` or `name` (either); exact, case-sensitive. */
function clientAllowList(
  read: EnvReader,
  clientCaFile: string | undefined,
): Pick<ServerConfig, 'clientAllowedSubjects'> {
  const raw = read.env.HOOK_CLIENT_ALLOWED_SUBJECTS;
  if (raw === undefined || raw.trim() === '') return {};
  const name = 'HOOK_CLIENT_ALLOWED_SUBJECTS';
  if (!clientCaFile) {
    read.problems.push(`${name}: needs TLS_CLIENT_CA_FILE (the allow-list applies to verified client certificates)`);
    return {};
  }
  const list: ClientSubjectAllowList = { commonNames: [], dnsNames: [] };
  for (const entry of raw.split(',').map((e) => e.trim())) {
    if (entry === '') {
      read.problems.push(`${name}: empty entry in ${JSON.stringify(raw)} (entries are separated by single commas)`);
      continue;
    }
    const m = /^(?:([A-Za-z]+)[=:])?(.*)$/s.exec(entry)!;
    const kind = m[1]?.toUpperCase();
    const value = m[2]!.trim();
    if (kind !== undefined && kind !== 'CN' && kind !== 'DNS') {
      read.problems.push(`${name}: ${JSON.stringify(entry)}: only CN= and DNS= entries are supported`);
      continue;
    }
    if (value === '' || value.length > 253 || [...value].some((ch) => ch === '*' || ch < ' ' || ch === '\u007f')) {
      read.problems.push(
        `${name}: ${JSON.stringify(entry)}: expected a name of 1 to 253 printable characters, without wildcards`,
      );
      continue;
    }
    if (kind !== 'DNS') list.commonNames.push(value);
    if (kind !== 'CN') list.dnsNames.push(value);
  }
  return { clientAllowedSubjects: list };
}

/** One handler per hook: HOOK_<HOOK>_NAME, _ENABLED, _TIMEOUT_SECONDS, _FAILURE_POLICY, and HOOKS_DISABLED. */
export function readHandlers(read: EnvReader): HandlerConfig[] {
  const disabled = new Set(
    read
      .str('HOOKS_DISABLED', '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
  );
  for (const name of disabled) {
    if (!(hookNames as string[]).includes(name))
      read.problems.push(`HOOKS_DISABLED: unknown hook ${JSON.stringify(name)}`);
  }
  const handlers = hookNames.map((hook): HandlerConfig => {
    const infix = hookEnvName(hook);
    const name = read.str(`HOOK_${infix}_NAME`, defaultHandlerName(hook));
    if (!DNS1123_LABEL.test(name)) {
      read.problems.push(`HOOK_${infix}_NAME=${JSON.stringify(name)}: must be a DNS-1123 label`);
    }
    const policy = read.str(`HOOK_${infix}_FAILURE_POLICY`, hookDefaults[hook].defaultFailurePolicy);
    if (policy !== 'Fail' && policy !== 'Ignore') {
      read.problems.push(`HOOK_${infix}_FAILURE_POLICY=${JSON.stringify(policy)}: expected Fail or Ignore`);
    }
    return {
      hook,
      name,
      enabled: !disabled.has(hook) && read.bool(`HOOK_${infix}_ENABLED`, true),
      timeoutSeconds: read.int(`HOOK_${infix}_TIMEOUT_SECONDS`, 10, 0, 30),
      failurePolicy: policy === 'Ignore' ? 'Ignore' : 'Fail',
    };
  });
  const seen = new Map<string, HookName>();
  for (const h of handlers) {
    const other = seen.get(h.name);
    if (other) read.problems.push(`handler name ${JSON.stringify(h.name)} is used by both ${other} and ${h.hook}`);
    seen.set(h.name, h.hook);
  }
  return handlers;
}
