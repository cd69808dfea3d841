// What a workload cluster's kubeconfig (the `<cluster>-kubeconfig` Secret) may
// hold. The Secret is tenant-adjacent data, and a kubeconfig can be code:
// client-node runs `exec` credential plugins, calls `auth-provider`s, reads
// `token-file` and certificate paths from the worker's disk while loading, and
// dials through `proxy-url`. So only data is accepted: a server URL, CA data,
// client certificate/key data or a bearer token, which is all Cluster API
// writes (KubeadmControlPlane's kubeconfig: server + CA data + client cert/key;
// managed control planes such as EKS: a token). Anything else is refused by
// its path, checked here on the parsed YAML before client-node sees any of it.

/** A cluster entry as accepted: the fields client-node's `Cluster` needs. */
export interface AcceptedCluster {
  name: string;
  server: string;
  caData?: string;
}

export interface AcceptedUser {
  name: string;
  certData?: string;
  keyData?: string;
  token?: string;
}

export interface AcceptedContext {
  name: string;
  cluster: string;
  user?: string;
  namespace?: string;
}

export interface AcceptedKubeconfig {
  clusters: AcceptedCluster[];
  users: AcceptedUser[];
  contexts: AcceptedContext[];
  currentContext: string;
}

export type KubeconfigCheck =
  | { ok: true; config: AcceptedKubeconfig }
  /** `field` is the path of the first refused field (`users[0].user.exec`); `reason` never quotes a value. */
  | { ok: false; field: string; reason: string };

/** Largest kubeconfig parsed (bytes): Cluster API's are a few KiB; a Secret holds at most 1 MiB. */
export const MAX_WORKLOAD_KUBECONFIG_BYTES = 256 * 1024;

/** Fields that are never data, with why; any other unknown field is refused as well. */
const CODE_OR_FILES: Record<string, string> = {
  exec: 'runs a credential plugin command',
  'auth-provider': 'calls an authentication provider',
  'token-file': 'reads a file from the worker',
  tokenFile: 'reads a file from the worker',
  'client-certificate': 'reads a file from the worker',
  'client-key': 'reads a file from the worker',
  'certificate-authority': 'reads a file from the worker',
  'proxy-url': 'sends the traffic through a proxy',
  username: 'basic authentication is not accepted',
  password: 'basic authentication is not accepted',
  as: 'impersonation is not accepted',
  'as-groups': 'impersonation is not accepted',
  'as-uid': 'impersonation is not accepted',
  'as-user-extra': 'impersonation is not accepted',
  'insecure-skip-tls-verify': 'turns off server certificate verification',
  'tls-server-name': 'overrides the name the server certificate is verified against',
  'disable-compression': 'is not accepted',
};

// Extensions are opaque to client-node (it never reads them); preferences likewise.
const TOP_FIELDS = new Set([
  'apiVersion',
  'kind',
  'clusters',
  'users',
  'contexts',
  'current-context',
  'preferences',
  'extensions',
]);
const ENTRY_FIELDS = { clusters: 'cluster', users: 'user', contexts: 'context' } as const;
const CLUSTER_FIELDS = new Set(['server', 'certificate-authority-data', 'extensions']);
const USER_FIELDS = new Set(['client-certificate-data', 'client-key-data', 'token', 'extensions']);
// (client-node's exportConfig repeats the context's name inside it; nothing reads it.)
const CONTEXT_FIELDS = new Set(['cluster', 'user', 'namespace', 'name', 'extensions']);

const ACCEPTED =
  'a workload kubeconfig may hold only a server URL, CA data, client certificate/key data or a bearer token';

class Refused extends Error {
  readonly field: string;
  readonly reason: string;
  constructor(field: string, reason: string) {
    super(`${field}: ${reason}`);
    this.field = field;
    this.reason = reason;
  }
}

/**
 * Checks a parsed kubeconfig (the YAML document as a plain value) and returns only the accepted
 * fields, or the first refused field. Every entry is checked, not only the current context's:
 * client-node acts on all of them when it loads a file.
 */
export function checkWorkloadKubeconfig(doc: unknown): KubeconfigCheck {
  try {
    return { ok: true, config: accepted(doc) };
  } catch (err) {
    if (err instanceof Refused) return { ok: false, field: err.field, reason: err.reason };
    throw err;
  }
}

/** The message for a refused field: names the field and the rule, never a value. */
export function refusedKubeconfigMessage(where: string, check: { field: string; reason: string }): string {
  return `${where}: ${check.field} is refused (${check.reason}); ${ACCEPTED}`;
}

function accepted(doc: unknown): AcceptedKubeconfig {
  const top = record(doc, '(document)');
  onlyFields(top, TOP_FIELDS, '');
  const clusters = entries(top, 'clusters').map(({ name, body, path }): AcceptedCluster => {
    onlyFields(body, CLUSTER_FIELDS, path);
    const server = text(body.server, `${path}.server`, true);
    let url: URL;
    try {
      url = new URL(server);
    } catch {
      throw new Refused(`${path}.server`, 'is not a URL');
    }
    if (url.protocol !== 'https:') throw new Refused(`${path}.server`, 'is not an https:// URL');
    if (url.username || url.password) throw new Refused(`${path}.server`, 'carries credentials');
    const caData = text(body['certificate-authority-data'], `${path}.certificate-authority-data`, false);
    return { name, server: server.replace(/\/$/, ''), ...(caData ? { caData } : {}) };
  });
  const users = entries(top, 'users').map(({ name, body, path }): AcceptedUser => {
    onlyFields(body, USER_FIELDS, path);
    const certData = text(body['client-certificate-data'], `${path}.client-certificate-data`, false);
    const keyData = text(body['client-key-data'], `${path}.client-key-data`, false);
    const token = text(body.token, `${path}.token`, false);
    if (Boolean(certData) !== Boolean(keyData))
      throw new Refused(
        `${path}.${certData ? 'client-key-data' : 'client-certificate-data'}`,
        'is missing (set both or neither)',
      );
    return { name, ...(certData ? { certData } : {}), ...(keyData ? { keyData } : {}), ...(token ? { token } : {}) };
  });
  const contexts = entries(top, 'contexts').map(({ name, body, path }): AcceptedContext => {
    onlyFields(body, CONTEXT_FIELDS, path);
    const cluster = text(body.cluster, `${path}.cluster`, true);
    if (!clusters.some((c) => c.name === cluster))
      throw new Refused(`${path}.cluster`, 'names no cluster of the kubeconfig');
    const user = text(body.user, `${path}.user`, false);
    if (user && !users.some((u) => u.name === user))
      throw new Refused(`${path}.user`, 'names no user of the kubeconfig');
    const namespace = text(body.namespace, `${path}.namespace`, false);
    return { name, cluster, ...(user ? { user } : {}), ...(namespace ? { namespace } : {}) };
  });
  const currentContext = text(top['current-context'], 'current-context', true);
  if (!contexts.some((c) => c.name === currentContext))
    throw new Refused('current-context', 'names no context of the kubeconfig');
  return { clusters, users, contexts, currentContext };
}

/** The named entries of `clusters`, `users` or `contexts`: `{name, <cluster|user|context>: {...}}`. */
function entries(
  top: Record<string, unknown>,
  list: keyof typeof ENTRY_FIELDS,
): { name: string; body: Record<string, unknown>; path: string }[] {
  const value = top[list];
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) throw new Refused(list, 'is not a list');
  const inner = ENTRY_FIELDS[list];
  const names = new Set<string>();
  return value.map((entry, i) => {
    const at = `${list}[${i}]`;
    const e = record(entry, at);
    onlyFields(e, new Set(['name', inner]), at);
    const name = text(e.name, `${at}.name`, true);
    if (names.has(name)) throw new Refused(`${at}.name`, 'is used twice');
    names.add(name);
    return { name, body: record(e[inner] ?? {}, `${at}.${inner}`), path: `${at}.${inner}` };
  });
}

function onlyFields(obj: Record<string, unknown>, allowed: ReadonlySet<string>, path: string): void {
  for (const [key, value] of Object.entries(obj)) {
    if (allowed.has(key)) continue;
    const known = Object.hasOwn(CODE_OR_FILES, key);
    // Switched off is not acted on: client-node's own exportConfig writes `insecure-skip-tls-verify: false`.
    if (known && (value === null || value === false)) continue;
    const field = path ? `${path}.${key}` : key;
    throw new Refused(field, known ? CODE_OR_FILES[key]! : 'is not a known data field');
  }
}

function record(v: unknown, path: string): Record<string, unknown> {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new Refused(path, 'is not a mapping');
  return v as Record<string, unknown>;
}

function text(v: unknown, path: string, required: true): string;
function text(v: unknown, path: string, required: false): string | undefined;
function text(v: unknown, path: string, required: boolean): string | undefined {
  if (v === undefined || v === null || v === '') {
    if (required) throw new Refused(path, 'is missing');
    return undefined;
  }
  if (typeof v !== 'string') throw new Refused(path, 'is not a string');
  return v;
}
