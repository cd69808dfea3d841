// The alert gate's policy and pure rules: settings and annotations,
// refusals naming them, the filter's safety checks, which alerts hold and what the gate says.
import { describe, expect, it } from '@jest/globals';
import {
  alertsHeldMessage,
  alertText,
  alertTimeoutCause,
  candidateAlerts,
  checkAlertFilter,
  holdingNames,
  parseSilenceMatchers,
  silenceMatchers,
} from '../../src/domain/alert-gate.ts';
import { resolveAlertPolicy } from '../../src/domain/alert-policy.ts';
import { policyHash, resolveUpgradePolicy } from '../../src/domain/upgrade-policy.ts';

const P = 'upgrades.capi-orchestrator.io/';
const cluster = { namespace: 'team-a', name: 'prod-1' };

describe('alert policy', () => {
  it('is off by default and leaves the policy hash of a cluster without it unchanged', () => {
    const plain = resolveUpgradePolicy({});
    expect(plain).toMatchObject({ ok: true });
    if (!plain.ok) return;
    expect(plain.policy.alerts).toBeUndefined();
    expect(policyHash(plain.policy)).toBe(policyHash({ ...plain.policy }));
  });

  it('reads settings, and annotations win over them', () => {
    const r = resolveAlertPolicy({
      settings: {
        alertPrometheusUrl: 'https://prometheus.monitoring.svc:9090/',
        alertHoldTimeout: '2h',
        alertTokenSecret: 'monitoring/prom-token/token',
        alertCa: 'ConfigMap/monitoring/prom-ca/ca.crt',
        alertAllowedUrls: 'http://alertmanager:9093, https://alertmanager.other:9093',
      },
      annotations: {
        [`${P}alert-filter`]: '^Kube',
        [`${P}alert-firing-only`]: 'false',
        [`${P}alert-ignore`]: 'Watchdog, KubeCPUOvercommit',
        [`${P}alert-hold-timeout`]: '15m',
        [`${P}alertmanager-url`]: 'http://alertmanager:9093',
        [`${P}alert-silence-matchers`]: 'alertname=~"KubeNode.*", severity!="info"',
      },
    });
    expect(r).toEqual({
      ok: true,
      policy: {
        prometheusUrl: 'https://prometheus.monitoring.svc:9090',
        alertmanagerUrl: 'http://alertmanager:9093',
        tokenSecret: { kind: 'Secret', namespace: 'monitoring', name: 'prom-token', key: 'token' },
        ca: { kind: 'ConfigMap', namespace: 'monitoring', name: 'prom-ca', key: 'ca.crt' },
        filter: '^Kube',
        firingOnly: false,
        ignore: ['KubeCPUOvercommit', 'Watchdog'],
        holdTimeoutMs: 15 * 60_000,
        clusterLabel: 'cluster',
        silenceMatchers: [
          { name: 'alertname', value: 'KubeNode.*', isRegex: true, isEqual: true },
          { name: 'severity', value: 'info', isRegex: false, isEqual: false },
        ],
        silenceDurationMs: 2 * 3_600_000,
      },
    });
  });

  it.each([
    ['alert-prometheus-url', 'ftp://prom', 'must be an http or https URL'],
    ['alert-prometheus-url', 'https://user:secret@prom', 'must not hold credentials'],
    ['alert-prometheus-url', 'https://prom/?token=x', 'must not hold a query'],
    ['alert-prometheus-url', 'not a url', 'not a URL'],
    ['alert-token-secret', 'other-ns/token/key', "an annotation may only name a Secret in the Cluster's namespace"],
    ['alert-ca', 'ConfigMap/other/ca/ca.crt', "an annotation may only name a ConfigMap in the Cluster's namespace"],
    ['alert-filter', '(a+)+$', 'a repeated group may hold neither a quantifier nor |'],
    ['alert-filter', '(a|aa)*', 'a repeated group may hold neither a quantifier nor |'],
    ['alert-filter', '(x)\\1', 'backreferences are not allowed'],
    ['alert-filter', 'a(?=b)', 'lookarounds are not allowed'],
    ['alert-filter', 'x'.repeat(257), 'longer than 256 characters'],
    ['alert-filter', '([a-z', 'not a regular expression'],
    ['alert-firing-only', 'maybe', 'expected true or false'],
    ['alert-hold-timeout', '0s', 'must be greater than zero'],
    ['alert-silence-duration', '48h', 'must be at most 24h'],
    ['alert-silence-matchers', 'alertname~"x"', 'expected name="value"'],
    ['alert-cluster-label', 'cluster-name', 'not a Prometheus label name'],
  ])('refuses annotation %s=%j naming it', (suffix, value, reason) => {
    const r = resolveUpgradePolicy({
      settings: { alertAllowedUrls: 'http://prom:9090' },
      annotations: { [`${P}alert-prometheus-url`]: 'http://prom:9090', [`${P}${suffix}`]: value },
    });
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.message).toContain(`annotation ${P}${suffix}=${JSON.stringify(value)}: `);
    expect(r.message).toContain(reason);
    // A URL's credentials are never echoed back past the value itself being named.
    expect(r.message).not.toMatch(/Bearer/);
  });

  it('lets a setting name a Secret in another namespace, and an annotation one in the Cluster namespace', () => {
    const fromSetting = resolveAlertPolicy({
      settings: { alertPrometheusUrl: 'http://prom', alertTokenSecret: 'monitoring/t/token' },
    });
    expect(fromSetting.ok && fromSetting.policy?.tokenSecret).toEqual({
      kind: 'Secret',
      namespace: 'monitoring',
      name: 't',
      key: 'token',
    });
    const fromAnnotation = resolveAlertPolicy({
      settings: { alertAllowedUrls: 'http://prom' },
      annotations: { [`${P}alert-prometheus-url`]: 'http://prom', [`${P}alert-token-secret`]: 't/token' },
    });
    expect(fromAnnotation.ok && fromAnnotation.policy?.tokenSecret).toEqual({
      kind: 'Secret',
      name: 't',
      key: 'token',
    });
  });
});

describe('alert URLs an annotation may name (no SSRF)', () => {
  const allowed = 'http://prom-eu.monitoring:9090,http://alertmanager-eu.monitoring:9093';
  it.each([
    ['alert-prometheus-url', 'http://169.254.169.254/latest/meta-data', {}],
    ['alert-prometheus-url', 'http://kubernetes.default.svc', { alertAllowedUrls: allowed }],
    ['alertmanager-url', 'http://10.0.0.1:9093', { alertPrometheusUrl: 'http://prom:9090' }],
    // The Prometheus setting's URL is not thereby an Alertmanager an annotation may post to, and back:
    // both settings' URLs are allowed for either, as the platform named them.
    ['alertmanager-url', 'http://prom-eu.monitoring:9091', { alertAllowedUrls: allowed }],
  ])('refuses annotation %s=%j that the ExtensionConfig does not allow, naming it', (suffix, value, settings) => {
    const r = resolveUpgradePolicy({ settings, annotations: { [`${P}${suffix}`]: value } });
    expect(r).toEqual({
      ok: false,
      message: expect.stringContaining(
        `annotation ${P}${suffix}=${JSON.stringify(value)}: an annotation may only name a URL the ExtensionConfig allows`,
      ) as unknown as string,
    });
  });

  it('accepts an annotation naming an allowed URL or a setting’s own, compared as URLs', () => {
    const chosen = resolveAlertPolicy({
      settings: { alertPrometheusUrl: 'http://prom:9090', alertAllowedUrls: allowed },
      annotations: {
        [`${P}alert-prometheus-url`]: 'HTTP://Prom-EU.monitoring:9090/',
        [`${P}alertmanager-url`]: 'http://alertmanager-eu.monitoring:9093',
      },
    });
    expect(chosen.ok && chosen.policy).toMatchObject({
      prometheusUrl: 'http://prom-eu.monitoring:9090',
      alertmanagerUrl: 'http://alertmanager-eu.monitoring:9093',
    });
    const own = resolveAlertPolicy({
      settings: { alertPrometheusUrl: 'http://prom:9090/' },
      annotations: { [`${P}alert-prometheus-url`]: 'http://prom:9090' },
    });
    expect(own.ok && own.policy?.prometheusUrl).toBe('http://prom:9090');
  });

  it('refuses an allow-list entry that is not a plain http(s) URL, naming the setting', () => {
    const r = resolveAlertPolicy({ settings: { alertAllowedUrls: 'http://ok:1, https://u:p@x' } });
    expect(r).toEqual({
      ok: false,
      message: 'setting alertAllowedUrls: "https://u:p@x": must not hold credentials (use alertTokenSecret)',
    });
  });

  it('refuses an annotation CA while the platform’s token comes from the setting', () => {
    const r = resolveAlertPolicy({
      settings: { alertPrometheusUrl: 'https://prom', alertTokenSecret: 'monitoring/t/token' },
      annotations: { [`${P}alert-ca`]: 'ConfigMap/my-ca/ca.crt' },
    });
    expect(r).toEqual({
      ok: false,
      message: `annotation ${P}alert-ca="ConfigMap/my-ca/ca.crt": an annotation may not replace the CA while the token comes from setting alertTokenSecret`,
    });
    // With its own token (from its own namespace) a cluster may bring its own CA.
    const own = resolveAlertPolicy({
      settings: { alertPrometheusUrl: 'https://prom' },
      annotations: { [`${P}alert-ca`]: 'ConfigMap/my-ca/ca.crt', [`${P}alert-token-secret`]: 't/token' },
    });
    expect(own.ok).toBe(true);
  });
});

describe('alert filter safety', () => {
  it.each(['^Kube', 'KubeNode(NotReady|Unreachable)', '(?:foo)+bar', 'severity="critical"', '^(Kube.*)$', '[a-z]+x'])(
    'accepts %j',
    (p) => expect(checkAlertFilter(p)).toBeUndefined(),
  );
  it.each(['(a+)+', '(a*)*b', '(?:a|b)+c', '(x+){2,}', '((ab)*)+'])('refuses %j', (p) =>
    expect(checkAlertFilter(p)).toBeDefined(),
  );
});

describe('which alerts hold', () => {
  const alert = (name: string, state = 'firing', labels: Record<string, string> = {}) => ({
    state,
    labels: { alertname: name, ...labels },
  });
  const policy = { firingOnly: true, ignore: ['Watchdog'], clusterLabel: 'cluster' };

  it('drops pending (firing-only), ignored and other clusters’ alerts', () => {
    const alerts = [
      alert('KubeNodeNotReady', 'firing', { cluster: 'team-a/prod-1' }),
      alert('SlowBurn', 'pending'),
      alert('Watchdog'),
      alert('KubePodCrashLooping', 'firing', { cluster: 'team-b/prod-1' }),
      alert('TargetDown'),
    ];
    expect(candidateAlerts(alerts, policy, cluster).map((a) => a.labels.alertname)).toEqual([
      'KubeNodeNotReady',
      'TargetDown',
    ]);
    expect(candidateAlerts(alerts, { ...policy, firingOnly: false }, cluster).map((a) => a.labels.alertname)).toContain(
      'SlowBurn',
    );
  });

  it('matches the filter against name{labels} with labels sorted', () => {
    expect(alertText(alert('A', 'firing', { z: '1', b: 'x"y' }))).toBe('A{b="x\\"y",z="1"}');
  });

  it('says the same for the same alerts in any order, names sorted and capped', () => {
    const a = holdingNames([alert('B'), alert('A'), alert('B'), alert('D'), alert('C'), alert('E')]);
    expect(a).toEqual({ firing: ['A', 'B', 'C', 'D', 'E'], firingCount: 5 });
    expect(alertsHeldMessage('v1.35.0', ['KubeNodeNotReady'], 1)).toBe(
      'upgrade to v1.35.0 held: alert KubeNodeNotReady firing in prometheus (gate alerts)',
    );
    expect(alertsHeldMessage('v1.35.0', a.firing, a.firingCount)).toBe(
      'upgrade to v1.35.0 held: alerts A, B, C and 2 more firing in prometheus (gate alerts)',
    );
    expect(alertTimeoutCause({ cause: 'connection refused' }, '30m')).toBe(
      'the alert source prometheus was unreachable for 30m: connection refused (gate alerts)',
    );
  });
});

describe('silence matchers', () => {
  it('always scope the silence to the cluster label, whatever is configured', () => {
    const parsed = parseSilenceMatchers('cluster="someone/else", alertname="KubeNodeNotReady"');
    expect(parsed.ok).toBe(true);
    if (!parsed.ok) return;
    expect(silenceMatchers({ silenceMatchers: parsed.value, clusterLabel: 'cluster' }, cluster)).toEqual([
      { name: 'alertname', value: 'KubeNodeNotReady', isRegex: false, isEqual: true },
      { name: 'cluster', value: 'team-a/prod-1', isRegex: false, isEqual: true },
    ]);
  });
});
