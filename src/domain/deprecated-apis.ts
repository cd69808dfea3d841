// The removed-API gate's pure half (an upgrade to a version that removed an API
// its clients still call breaks them): a streaming reader of the
// Prometheus text format that keeps only kube-apiserver's
// `apiserver_requested_deprecated_apis` samples, and the verdict over an
// upgrade's chain of versions. The workload API server is not trusted: every
// label value is validated and length-capped before it can reach a message,
// lines and sample counts are bounded, and the whole body is capped by the
// activity that streams it (activities/deprecated-apis.ts).
import { majorOf, minorOf, tryParseVersion } from './versions.ts';

export const DEPRECATED_APIS_METRIC = 'apiserver_requested_deprecated_apis';

/** One deprecated API a client requested since this API server process started. */
export interface DeprecatedApiUse {
  /** API group; '' for the core group. */
  group: string;
  version: string;
  resource: string;
  subresource: string;
  /** `1.32`; '' when no removal is planned. */
  removedRelease: string;
}

export interface DeprecatedApiScan {
  /** Sorted, unique, at most MAX_DEPRECATED_API_USES. */
  uses: DeprecatedApiUse[];
  /** Samples of the metric refused (bad label values, too long, unparsable): never quoted. */
  malformed: number;
  /** Uses beyond MAX_DEPRECATED_API_USES, dropped. */
  dropped: number;
}

/** Longest line kept (a longer one is skipped whole, counted malformed when it is ours). */
export const MAX_METRICS_LINE = 4_096;
/** Uses kept from one scan; a real API server has a few dozen deprecated resources at most. */
export const MAX_DEPRECATED_API_USES = 200;
/** Bytes of /metrics read at most (kube-apiserver's are a few MB; ours is early in the sorted output). */
export const MAX_METRICS_BYTES = 64 * 1024 * 1024;

const LABEL_PATTERNS: Record<keyof DeprecatedApiUse, RegExp> = {
  group: /^(?:[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*)?$/,
  version: /^v[0-9]{1,4}((alpha|beta)[0-9]{1,4})?$/,
  resource: /^[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?$/,
  subresource: /^([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)?$/,
  removedRelease: /^([0-9]{1,3}\.[0-9]{1,4})?$/,
};
const LABEL_NAMES: Record<string, keyof DeprecatedApiUse> = {
  group: 'group',
  version: 'version',
  resource: 'resource',
  subresource: 'subresource',
  removed_release: 'removedRelease',
};
const MAX_GROUP = 253;

/** Parses `{a="x",b="y"}` (Prometheus escaping); undefined when malformed. */
function parseLabels(text: string): Map<string, string> | undefined {
  const labels = new Map<string, string>();
  let i = 0;
  const n = text.length;
  while (i < n) {
    while (text[i] === ' ' || text[i] === ',') i++;
    if (i >= n) break;
    const nameMatch = /^[a-zA-Z_][a-zA-Z0-9_]*/.exec(text.slice(i, i + 128));
    if (!nameMatch) return undefined;
    const name = nameMatch[0];
    i += name.length;
    while (text[i] === ' ') i++;
    if (text[i] !== '=') return undefined;
    i++;
    while (text[i] === ' ') i++;
    if (text[i] !== '"') return undefined;
    i++;
    let value = '';
    for (;;) {
      if (i >= n) return undefined;
      const c = text[i]!;
      if (c === '"') break;
      if (c === '\\') {
        const next = text[i + 1];
        if (next === 'n') value += '\n';
        else if (next === '\\' || next === '"') value += next;
        else return undefined;
        i += 2;
      } else {
        value += c;
        i++;
      }
    }
    i++; // closing quote
    if (labels.has(name)) return undefined;
    labels.set(name, value);
  }
  return labels;
}

/** One sample line of our metric: the use when it is valid and requested (value > 0). */
export function parseDeprecatedApiLine(
  line: string,
): { kind: 'use'; use: DeprecatedApiUse } | { kind: 'zero' } | { kind: 'malformed' } {
  const open = line.indexOf('{');
  const close = line.lastIndexOf('}');
  if (open !== DEPRECATED_APIS_METRIC.length || close < open) return { kind: 'malformed' };
  const labels = parseLabels(line.slice(open + 1, close));
  if (!labels) return { kind: 'malformed' };
  const [valueText] = line
    .slice(close + 1)
    .trim()
    .split(/\s+/);
  const value = Number(valueText);
  if (valueText === undefined || valueText === '' || Number.isNaN(value)) return { kind: 'malformed' };
  const use: DeprecatedApiUse = { group: '', version: '', resource: '', subresource: '', removedRelease: '' };
  for (const [name, key] of Object.entries(LABEL_NAMES)) {
    const v = labels.get(name) ?? '';
    if (v.length > (key === 'group' ? MAX_GROUP : 63) || !LABEL_PATTERNS[key].test(v)) return { kind: 'malformed' };
    use[key] = v;
  }
  if (use.version === '' || use.resource === '') return { kind: 'malformed' };
  return value > 0 ? { kind: 'use', use } : { kind: 'zero' };
}

const useKey = (u: DeprecatedApiUse) => `${u.group}\u0000${u.version}\u0000${u.resource}\u0000${u.subresource}`;

export function compareUses(a: DeprecatedApiUse, b: DeprecatedApiUse): number {
  const ka = `${useKey(a)}\u0000${a.removedRelease}`;
  const kb = `${useKey(b)}\u0000${b.removedRelease}`;
  return ka < kb ? -1 : ka > kb ? 1 : 0;
}

/**
 * Reads Prometheus text exposition in chunks, keeping only our metric's samples; memory stays
 * bounded whatever the input (one partial line of at most MAX_METRICS_LINE, at most
 * MAX_DEPRECATED_API_USES uses). `done` turns true once the family has been read (client_golang
 * writes each family once, together), so the caller may stop reading.
 */
export class DeprecatedApiScanner {
  private partial = '';
  private skipping = false;
  private seen = false;
  done = false;
  private readonly uses = new Map<string, DeprecatedApiUse>();
  private malformed = 0;
  private dropped = 0;

  push(chunk: string): void {
    if (this.done) return;
    let start = 0;
    for (;;) {
      const nl = chunk.indexOf('\n', start);
      if (nl < 0) break;
      const piece = chunk.slice(start, nl);
      start = nl + 1;
      if (this.skipping) {
        this.skipping = false;
        this.partial = '';
        continue;
      }
      const line = this.partial + piece;
      this.partial = '';
      if (line.length > MAX_METRICS_LINE) this.tooLong(line);
      else this.line(line);
      if (this.done) return;
    }
    if (this.skipping) return;
    this.partial += chunk.slice(start);
    if (this.partial.length > MAX_METRICS_LINE) {
      this.tooLong(this.partial);
      this.partial = '';
      this.skipping = true;
    }
  }

  end(): DeprecatedApiScan {
    if (!this.done && !this.skipping && this.partial !== '') this.line(this.partial);
    this.partial = '';
    this.done = true;
    return {
      uses: [...this.uses.values()].sort(compareUses),
      malformed: this.malformed,
      dropped: this.dropped,
    };
  }

  private tooLong(line: string): void {
    if (line.startsWith(`${DEPRECATED_APIS_METRIC}{`)) this.malformed++;
  }

  private line(raw: string): void {
    const line = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
    if (line.startsWith('#')) {
      // `# HELP name ...` / `# TYPE name ...` of the family after ours: ours is complete.
      const m = /^#\s+(?:HELP|TYPE)\s+(\S+)/.exec(line);
      if (this.seen && m && m[1] !== DEPRECATED_APIS_METRIC) this.done = true;
      return;
    }
    if (!line.startsWith(`${DEPRECATED_APIS_METRIC}{`)) {
      if (this.seen && line.trim() !== '' && !line.startsWith(DEPRECATED_APIS_METRIC)) this.done = true;
      return;
    }
    this.seen = true;
    const parsed = parseDeprecatedApiLine(line);
    if (parsed.kind === 'malformed') this.malformed++;
    if (parsed.kind !== 'use') return;
    const key = `${useKey(parsed.use)}\u0000${parsed.use.removedRelease}`;
    if (this.uses.has(key)) return;
    if (this.uses.size >= MAX_DEPRECATED_API_USES) this.dropped++;
    else this.uses.set(key, parsed.use);
  }
}

/** Scans a whole text at once (tests, small inputs). */
export function scanDeprecatedApis(text: string): DeprecatedApiScan {
  const scanner = new DeprecatedApiScanner();
  scanner.push(text);
  return scanner.end();
}

// ---- the verdict ---------------------------------------------------------------------

/** `flowcontrol.apiserver.k8s.io/v1beta3 flowschemas/status`, `v1 componentstatuses`. */
export function apiName(u: DeprecatedApiUse): string {
  return `${u.group ? `${u.group}/` : ''}${u.version} ${u.resource}${u.subresource ? `/${u.subresource}` : ''}`;
}

export interface RemovedApiFinding extends DeprecatedApiUse {
  /** The first version of the upgrade's chain that no longer serves it. */
  removedAt: string;
}

/**
 * The requested APIs that some version of the chain (every hop, control plane and workers, and the
 * target) no longer serves: removed_release `1.32` is gone in every `v1.32.x` and later. Sorted.
 */
export function removedApiFindings(uses: readonly DeprecatedApiUse[], chain: readonly string[]): RemovedApiFinding[] {
  const versions: { version: string; major: bigint; minor: bigint }[] = [];
  for (const v of chain) {
    const parsed = tryParseVersion(v);
    if (parsed.ok) versions.push({ version: v, major: majorOf(parsed.version), minor: minorOf(parsed.version) });
  }
  versions.sort((a, b) => (a.major !== b.major ? (a.major < b.major ? -1 : 1) : a.minor < b.minor ? -1 : 1));
  const findings: RemovedApiFinding[] = [];
  for (const u of uses) {
    const m = /^([0-9]+)\.([0-9]+)$/.exec(u.removedRelease);
    if (!m) continue;
    const major = BigInt(m[1]!);
    const minor = BigInt(m[2]!);
    const hit = versions.find((v) => v.major > major || (v.major === major && v.minor >= minor));
    if (hit) findings.push({ ...u, removedAt: hit.version });
  }
  return findings.sort(compareUses);
}

/** Findings named in a message, at most; the rest are counted. */
export const MAX_FINDINGS_NAMED = 5;

/** `flowcontrol.apiserver.k8s.io/v1beta3 flowschemas (removed in 1.32, reached at v1.32.0), … and 2 more`. */
export function findingsText(findings: readonly RemovedApiFinding[]): string {
  const named = findings
    .slice(0, MAX_FINDINGS_NAMED)
    .map((f) => `${apiName(f)} (removed in ${f.removedRelease}, reached at ${f.removedAt})`);
  const more = findings.length - named.length;
  return `${named.join(', ')}${more > 0 ? ` … and ${more} more` : ''}`;
}

/** What the gate says when it holds (policy fail) or warns: deterministic for a given scan and chain. */
export function removedApisMessage(targetVersion: string, findings: readonly RemovedApiFinding[]): string {
  return `removed-apis: clients of the workload cluster requested APIs the upgrade to ${targetVersion} removes: ${findingsText(findings)}`;
}
