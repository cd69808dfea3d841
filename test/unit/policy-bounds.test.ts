// What a tenant who may write Clusters in its own namespace can make the api do with annotations:
// values are capped before any parse (and parsed in linear time), list-valued keys are capped in
// items, and a platform's binding settings cannot be lifted by an annotation.
import { describe, expect, it } from '@jest/globals';
import { resolvePlanPolicy } from '../../src/domain/plan-policy.ts';
import { resolveUpgradePolicy } from '../../src/domain/upgrade-policy.ts';

const P = 'upgrades.capi-orchestrator.io/';
const iso = (ms: number) => new Date(ms).toISOString();

/** Runs `f` and returns its result and how long it took (ms). */
function timed<T>(f: () => T): { result: T; ms: number } {
  const start = performance.now();
  const result = f();
  return { result, ms: performance.now() - start };
}

describe('annotation values a tenant writes', () => {
  it('refuses critical-namespaces with 4,000 names (23 KB), naming the annotation and its cap', () => {
    const names = Array.from({ length: 4000 }, (_, i) => `ns-${i}`).join(',');
    const r = resolveUpgradePolicy({ annotations: { [`${P}critical-namespaces`]: names } });
    expect(r).toEqual({
      ok: false,
      message: `annotation ${P}critical-namespaces is ${names.length} characters, over the 4096-character limit`,
    });
    // Short names within the characters: the item cap (64, as many as 4096 characters of 63-character names).
    const short = Array.from({ length: 65 }, (_, i) => `n${i}`).join(', ');
    expect(resolveUpgradePolicy({ annotations: { [`${P}critical-namespaces`]: short } })).toEqual({
      ok: false,
      message: `annotation ${P}critical-namespaces lists 65 items, over the 64-item limit`,
    });
    const settings = { criticalNamespaces: short };
    expect(resolveUpgradePolicy({ settings })).toEqual({
      ok: false,
      message: 'setting criticalNamespaces lists 65 items, over the 64-item limit',
    });
  });

  it.each([
    // The issue's rows: 6.8 s and 6.9 s before, with the event loop blocked.
    ['maintenance-freezes', 'a/'.repeat(65_536), resolveUpgradePolicy, 8192],
    ['kubernetes-versions', `v1${' '.repeat(100_000)}x`, resolvePlanPolicy, 16_384],
  ] as const)(
    'answers %s of a quadratic shape at once with a Failure naming the cap',
    (suffix, value, resolve, limit) => {
      const { result, ms } = timed(() => resolve({ annotations: { [`${P}${suffix}`]: value } }));
      expect(result).toEqual({
        ok: false,
        message: `annotation ${P}${suffix} is ${value.length} characters, over the ${limit}-character limit`,
      });
      expect(ms).toBeLessThan(100);
    },
  );
});

describe('a platform freeze a tenant cannot lift', () => {
  const now = Date.now();
  const platformFreeze = `${iso(now - 60_000)}/${iso(now + 30 * 86_400_000)} platform freeze`;
  const settings = { maintenanceFreezes: platformFreeze };

  it('refuses a tenant override of the maintenance-window gate without the platform granting it', () => {
    const r = resolveUpgradePolicy({
      settings,
      annotations: { [`${P}override-gates`]: 'maintenance-window', [`${P}override-reason`]: 'we are in a hurry' },
    });
    expect(r.ok).toBe(false);
    expect(!r.ok && r.message).toBe(
      `annotation ${P}override-gates: this Cluster's namespace may not override gates (setting gateOverrideNamespaces does not list it)`,
    );
  });

  it("keeps the platform's freeze when a tenant sets its own (one freeze in 2000)", () => {
    const own = `${iso(Date.parse('2000-01-01T00:00:00Z'))}/${iso(Date.parse('2000-01-02T00:00:00Z'))} our freeze`;
    const r = resolveUpgradePolicy({ settings, annotations: { [`${P}maintenance-freezes`]: own } });
    expect(r.ok).toBe(true);
    const reasons = r.ok ? (r.policy.maintenanceFreezes ?? []).map((f) => f.reason) : [];
    expect(reasons).toEqual(['our freeze', 'platform freeze']);
  });
});

describe('docs/configuration.md, Limits of values', () => {
  it('lists every limit as the code has it', async () => {
    const { readFileSync } = await import('node:fs');
    const { DEFAULT_VALUE_LIMIT, POLICY_VALUE_LIMITS } = await import('../../src/domain/policy-keys.ts');
    const rows = readFileSync('docs/configuration.md', 'utf8')
      .split('\n')
      .map((l) => /^\| (`[^`]+`|every other setting) +\| ([^|]+?) +\|$/.exec(l))
      .filter((m): m is RegExpExecArray => m !== null && m[2]!.includes(' characters'))
      .map((m): [string, string] => [m[1]!.replace(/`/g, ''), m[2]!]);
    const documented = new Map(rows.filter(([k]) => k! in POLICY_VALUE_LIMITS || k === 'every other setting'));
    const expected = new Map(
      Object.entries(POLICY_VALUE_LIMITS).map(([k, l]) => [
        k,
        `${l.chars} characters${l.items ? `, ${l.items} items (\`${l.separator}\`-separated)` : ''}`,
      ]),
    );
    expected.set('every other setting', `${DEFAULT_VALUE_LIMIT.chars} characters`);
    expect(documented).toEqual(expected);
  });
});
