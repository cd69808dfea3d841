// The removed-API gate's pure half: the streaming Prometheus-text reader (hostile
// input bounded and never quoted), the verdict over every hop of the chain, and the
// deterministic, capped message.
import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import {
  DeprecatedApiScanner,
  findingsText,
  MAX_DEPRECATED_API_USES,
  MAX_FINDINGS_NAMED,
  MAX_METRICS_LINE,
  removedApiFindings,
  removedApisMessage,
  scanDeprecatedApis,
  type DeprecatedApiUse,
} from '../../src/domain/deprecated-apis.ts';
import { parseGateOverride } from '../../src/domain/gate-overrides.ts';
import { resolveUpgradePolicy } from '../../src/domain/upgrade-policy.ts';

// As kube-apiserver v1.36 writes it (test bed, after a client read networking.k8s.io/v1beta1).
const REAL = `# HELP apiserver_request_total [STABLE] Counter of apiserver requests.
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",verb="GET"} 12
# HELP apiserver_requested_deprecated_apis [STABLE] Gauge of deprecated APIs that have been requested, broken out by API group, version, resource, subresource, and removed_release.
# TYPE apiserver_requested_deprecated_apis gauge
apiserver_requested_deprecated_apis{group="",removed_release="",resource="endpoints",subresource="",version="v1"} 1
apiserver_requested_deprecated_apis{group="networking.k8s.io",removed_release="1.37",resource="ipaddresses",subresource="",version="v1beta1"} 1
apiserver_requested_deprecated_apis{group="networking.k8s.io",removed_release="1.37",resource="servicecidrs",subresource="",version="v1beta1"} 1
# HELP apiserver_response_sizes [STABLE] Response size distribution in bytes for each group, version, verb, resource, subresource, scope and component.
# TYPE apiserver_response_sizes histogram
apiserver_response_sizes_bucket{le="1000"} 3
`;

const use = (group: string, version: string, resource: string, removedRelease: string, subresource = '') =>
  ({ group, version, resource, subresource, removedRelease }) satisfies DeprecatedApiUse;

const line = (labels: string, value = '1') => `apiserver_requested_deprecated_apis{${labels}} ${value}\n`;

describe('scanning /metrics', () => {
  it('keeps the requested deprecated APIs, sorted, and stops after the family', () => {
    const scanner = new DeprecatedApiScanner();
    scanner.push(REAL);
    expect(scanner.done).toBe(true);
    expect(scanner.end()).toEqual({
      uses: [
        use('', 'v1', 'endpoints', ''),
        use('networking.k8s.io', 'v1beta1', 'ipaddresses', '1.37'),
        use('networking.k8s.io', 'v1beta1', 'servicecidrs', '1.37'),
      ],
      malformed: 0,
      dropped: 0,
    });
  });

  it('reads the same whatever the chunking (property)', () => {
    const whole = scanDeprecatedApis(REAL);
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: REAL.length }), { maxLength: 20 }), (cuts) => {
        const points = [...new Set(cuts)].sort((a, b) => a - b);
        const scanner = new DeprecatedApiScanner();
        let at = 0;
        for (const p of [...points, REAL.length]) {
          scanner.push(REAL.slice(at, p));
          at = p;
        }
        expect(scanner.end()).toEqual(whole);
      }),
    );
  });

  it('counts refused samples without quoting them: bad values, escapes, duplicates, over-long lines', () => {
    const text = [
      line('group="evil\\nco",removed_release="1.2",resource="x",subresource="",version="v1"'),
      line('group="",removed_release="1.32; rm -rf",resource="x",subresource="",version="v1"'),
      line('group="",removed_release="1.32",resource="X-Upper",subresource="",version="v1"'),
      line('group="",removed_release="1.32",resource="pods",subresource="",version="v1",group="again"'),
      line('group="",removed_release="1.32",resource="pods",subresource="",version="v1"', 'NaN'),
      line('group="",removed_release="1.32",resource="pods",subresource="",version="v1"', ''),
      line(
        `group="${'a'.repeat(MAX_METRICS_LINE)}",removed_release="1.32",resource="pods",subresource="",version="v1"`,
      ),
      line('group="",removed_release="1.32",resource="pods",subresource="",version="v1"', '0'),
      line('group="batch",removed_release="1.25",resource="cronjobs",subresource="status",version="v1beta1"'),
    ].join('');
    expect(scanDeprecatedApis(text)).toEqual({
      uses: [use('batch', 'v1beta1', 'cronjobs', '1.25', 'status')],
      malformed: 7,
      dropped: 0,
    });
  });

  it('keeps memory bounded: uses capped, a line with no end skipped whole', () => {
    const many = Array.from({ length: MAX_DEPRECATED_API_USES + 7 }, (_, i) =>
      line(`group="g${i}.example.com",removed_release="1.40",resource="things",subresource="",version="v1beta1"`),
    ).join('');
    const scan = scanDeprecatedApis(many);
    expect(scan.uses).toHaveLength(MAX_DEPRECATED_API_USES);
    expect(scan.dropped).toBe(7);

    const scanner = new DeprecatedApiScanner();
    scanner.push('apiserver_requested_deprecated_apis{group="');
    for (let i = 0; i < 100; i++) scanner.push('x'.repeat(10_000));
    scanner.push('"} 1\n');
    scanner.push(line('group="",removed_release="1.40",resource="pods",subresource="",version="v1"'));
    expect(scanner.end()).toEqual({ uses: [use('', 'v1', 'pods', '1.40')], malformed: 1, dropped: 0 });
  });

  it('never throws on random input (property)', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 400 }), (junk) => {
        const scan = scanDeprecatedApis(`apiserver_requested_deprecated_apis{${junk}\n${junk}`);
        for (const u of scan.uses) expect(`${u.group}${u.resource}`).toMatch(/^[a-z0-9.-]*$/);
      }),
    );
  });
});

describe('the verdict over the chain', () => {
  const uses = [
    use('networking.k8s.io', 'v1beta1', 'ipaddresses', '1.37'),
    use('', 'v1', 'endpoints', ''),
    use('resource.k8s.io', 'v1beta1', 'resourceclaims', '1.38'),
    use('flowcontrol.apiserver.k8s.io', 'v1beta3', 'flowschemas', '1.32'),
  ];

  it('finds what any hop removes, naming the first hop that does; a planned-less deprecation never holds', () => {
    expect(removedApiFindings(uses, ['v1.36.4'])).toEqual([
      { ...use('flowcontrol.apiserver.k8s.io', 'v1beta3', 'flowschemas', '1.32'), removedAt: 'v1.36.4' },
    ]);
    // A chained plan: the control plane passes v1.37 on the way to v1.38.
    expect(removedApiFindings(uses, ['v1.38.1', 'v1.37.2', 'v1.38.1']).map((f) => [f.resource, f.removedAt])).toEqual([
      ['flowschemas', 'v1.37.2'],
      ['ipaddresses', 'v1.37.2'],
      ['resourceclaims', 'v1.38.1'],
    ]);
    expect(removedApiFindings(uses.slice(0, 3), ['v1.36.9', 'not-a-version'])).toEqual([]);
  });

  it('says which APIs and when, sorted and capped', () => {
    const many = Array.from({ length: MAX_FINDINGS_NAMED + 3 }, (_, i) =>
      use(`g${String.fromCharCode(104 - i)}.io`, 'v1beta1', 'things', '1.37'),
    );
    const findings = removedApiFindings(many, ['v1.37.0']);
    const text = findingsText(findings);
    expect(text).toMatch(/^ga\.io\/v1beta1 things \(removed in 1\.37, reached at v1\.37\.0\), gb\.io/);
    expect(text.endsWith(' … and 3 more')).toBe(true);
    expect(removedApisMessage('v1.37.0', removedApiFindings(uses, ['v1.37.0']))).toBe(
      'removed-apis: clients of the workload cluster requested APIs the upgrade to v1.37.0 removes: ' +
        'flowcontrol.apiserver.k8s.io/v1beta3 flowschemas (removed in 1.32, reached at v1.37.0), ' +
        'networking.k8s.io/v1beta1 ipaddresses (removed in 1.37, reached at v1.37.0)',
    );
  });
});

describe('policy and overrides', () => {
  const P = 'upgrades.capi-orchestrator.io/';
  it('reads removedApiPolicy (setting ← annotation) and refuses other values, naming the key', () => {
    const r = resolveUpgradePolicy({
      settings: { removedApiPolicy: 'fail' },
      annotations: { [`${P}removed-api-policy`]: 'off' },
    });
    expect(r.ok && r.policy.removedApiPolicy).toBe('off');
    expect(resolveUpgradePolicy({ settings: { removedApiPolicy: 'hold' } })).toEqual({
      ok: false,
      message: 'setting removedApiPolicy="hold": expected fail, warn or off',
    });
    // Unset: the field is absent (the workflow applies DEFAULT_REMOVED_API_POLICY), so the hash of an old policy stays.
    const d = resolveUpgradePolicy({});
    expect(d.ok && 'removedApiPolicy' in d.policy).toBe(false);
  });

  it('reads an override with its reason into the policy, with the grant that allows it', () => {
    const annotations = {
      [`${P}override-gates`]: ' removed-apis, alerts,removed-apis ',
      [`${P}override-reason`]: 'CVE-2026-1 fix, approved in CHG-42',
    };
    for (const listed of ['team-b, team-a', '*']) {
      const r = resolveUpgradePolicy({
        settings: { gateOverrideNamespaces: listed },
        annotations,
        namespace: 'team-a',
      });
      expect(r.ok && r.policy.gateOverride).toEqual({
        gates: ['alerts', 'removed-apis'],
        reason: 'CVE-2026-1 fix, approved in CHG-42',
        grantedBy: 'setting gateOverrideNamespaces',
      });
    }
    // Not granted: unset, or another namespace listed.
    for (const settings of [{}, { gateOverrideNamespaces: 'team-b' }] as Record<string, string>[]) {
      const r = resolveUpgradePolicy({ settings, annotations, namespace: 'team-a' });
      expect(r).toEqual({
        ok: false,
        message: `annotation ${P}override-gates: this Cluster's namespace may not override gates (setting gateOverrideNamespaces does not list it)`,
      });
    }
  });

  it.each([
    [
      { 'override-gates': 'removed-apis' },
      'annotation upgrades.capi-orchestrator.io/override-reason is required with upgrades.capi-orchestrator.io/override-gates',
    ],
    [
      { 'override-gates': 'health', 'override-reason': 'x' },
      'annotation upgrades.capi-orchestrator.io/override-gates="health": "health" is not a gate that can be overridden (expected alerts, maintenance-window, removed-apis)',
    ],
    [
      { 'override-gates': ' , ', 'override-reason': 'x' },
      'annotation upgrades.capi-orchestrator.io/override-gates=",": names no gate',
    ],
    [
      { 'override-gates': 'alerts', 'override-reason': 'two\nlines' },
      'annotation upgrades.capi-orchestrator.io/override-reason: holds control characters (one line of printable text)',
    ],
    [
      { 'override-gates': 'alerts', 'override-reason': 'x'.repeat(257) },
      'annotation upgrades.capi-orchestrator.io/override-reason: longer than 256 characters',
    ],
    [
      { 'override-reason': 'why' },
      'annotation upgrades.capi-orchestrator.io/override-reason is set without upgrades.capi-orchestrator.io/override-gates',
    ],
  ])('refuses %j', (short, message) => {
    const annotations = Object.fromEntries(Object.entries(short).map(([k, v]) => [`${P}${k}`, v]));
    expect(parseGateOverride(annotations)).toEqual({ ok: false, message });
    expect(resolveUpgradePolicy({ annotations })).toEqual({ ok: false, message });
  });

  it('is off without the annotations', () => {
    expect(parseGateOverride(undefined)).toEqual({ ok: true, value: undefined });
    expect(parseGateOverride({ [`${P}override-gates`]: '  ' })).toEqual({ ok: true, value: undefined });
  });
});
