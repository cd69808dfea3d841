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
  /** Body bytes being read, parsed and handled at once, all requests together (src/api/http/body-budget.ts). */
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
  const certDir = read.get('TLS_CERT_DIR');
  const clientCaFile = read.get('TLS_CLIENT_CA_FILE');
  const server: ServerConfig = {
    host: read.get('HOOK_SERVER_HOST'),
    port: read.get('HOOK_SERVER_PORT'),
    certFile: read.get('TLS_CERT_FILE') ?? `${certDir}/tls.crt`,
    keyFile: read.get('TLS_KEY_FILE') ?? `${certDir}/tls.key`,
    ...(clientCaFile ? { clientCaFile } : {}),
    ...clientAllowList(read, clientCaFile),
    tlsReloadIntervalMs: read.get('TLS_RELOAD_INTERVAL_SECONDS') * 1000,
    insecureHttp: read.get('HOOK_SERVER_INSECURE_HTTP'),
    ...bodyBounds(read),
    bodyMaxJsonItems: read.get('HOOK_SERVER_BODY_MAX_JSON_ITEMS'),
    requestTimeoutMs: read.get('HOOK_SERVER_REQUEST_TIMEOUT'),
    maxConnections: read.get('HOOK_SERVER_MAX_CONNECTIONS'),
    unavailableRetryAfterSeconds: read.get('HOOK_UNAVAILABLE_RETRY_AFTER_SECONDS'),
    waitRetryAfterMaxSeconds: read.get('HOOK_WAIT_RETRY_AFTER_MAX_SECONDS'),
  };

  if (server.insecureHttp && (clientCaFile || server.clientAllowedSubjects))
    read.problems.push(
      'HOOK_SERVER_INSECURE_HTTP=true serves plain HTTP: TLS_CLIENT_CA_FILE and HOOK_CLIENT_ALLOWED_SUBJECTS need TLS',
    );
  return server;
}

/** Body limits (one for every hook family when set) and the bytes in flight they need. */
function bodyBounds(read: EnvReader): Pick<ServerConfig, 'bodyLimits' | 'bodyBytesInFlight'> {
  // A bad limit is reported; the defaults stand meanwhile.
  const given = read.get('HOOK_SERVER_BODY_LIMIT_BYTES');
  const bodyLimits: Record<HookFamily, number> = given
    ? { lifecycle: given, 'upgrade-plan': given, 'in-place': given }
    : { ...DEFAULT_BODY_LIMITS };
  // Room for one body at the largest limit beside the small bodies' reserve.
  const needed = Math.max(...Object.values(bodyLimits)) + SMALL_BODY_RESERVE_BYTES;
  const bodyBytesInFlight =
    read.get('HOOK_SERVER_BODY_BYTES_IN_FLIGHT') ?? Math.max(DEFAULT_BODY_BYTES_IN_FLIGHT, needed);
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
  const raw = read.get('HOOK_CLIENT_ALLOWED_SUBJECTS');
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
    (read.get('HOOKS_DISABLED') ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
  );
  for (const name of disabled) {
    if (!(hookNames as string[]).includes(name))
      read.problems.push(`HOOKS_DISABLED: unknown hook ${JSON.stringify(name)}`);
  }
  const handlers = hookNames.map((hook): HandlerConfig => {
    const name = read.hook('HOOK_<HOOK>_NAME', hook) ?? defaultHandlerName(hook);
    const failurePolicy = read.hook('HOOK_<HOOK>_FAILURE_POLICY', hook) ?? hookDefaults[hook].defaultFailurePolicy;
    return {
      hook,
      name,
      enabled: !disabled.has(hook) && read.hook('HOOK_<HOOK>_ENABLED', hook),
      timeoutSeconds: read.hook('HOOK_<HOOK>_TIMEOUT_SECONDS', hook),
      failurePolicy,
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
