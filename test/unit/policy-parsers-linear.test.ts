// Every parser of a Cluster annotation or an ExtensionConfig setting runs in time linear in its
// input: a tenant writes annotations up to Kubernetes' 256 KiB, and a parse that backtracks
// quadratically on one of them held the api's event loop for seconds (parseFreezes on
// "a/a/a/…", the Go trim of a version on "v1<100,000 spaces>x"). Each parser gets adversarial
// values (runs of spaces, slashes, separators, near misses of its own syntax) and must take about
// four times as long on a value four times as long; a quadratic parse takes sixteen times as long
// (the old parseFreezes: ~1.5 s on 64 KiB, ~0.1 s on 16 KiB).
// The raw parsers are called directly (they must be linear without the caps), and the resolvers
// through every key of every source (they must refuse over-long values before parsing them).
import { describe, expect, it } from '@jest/globals';
import {
  parseAlertUrl,
  parseObjectKeyRef,
  resolveAlertPolicy,
  alertPolicyKeys,
} from '../../src/domain/alert-policy.ts';
import { checkAlertFilter, parseSilenceMatchers } from '../../src/domain/alert-gate.ts';
import { parseFreezes, parseTimeZone, parseWindows } from '../../src/domain/calendar.ts';
import { parseSkipPodSelector } from '../../src/domain/drain.ts';
import { parseGoDuration } from '../../src/domain/durations.ts';
import {
  parseGateOverride,
  OVERRIDE_GATES_ANNOTATION,
  OVERRIDE_REASON_ANNOTATION,
} from '../../src/domain/gate-overrides.ts';
import { parseDeclaredPaths, resolveInPlacePolicy } from '../../src/domain/in-place-policy.ts';
import { parsePointer } from '../../src/domain/json-pointer.ts';
import { parseLabelSelector } from '../../src/domain/label-selector.ts';
import { machineUpdateSettings, resolveMachineUpdatePolicy } from '../../src/domain/machine-update-policy.ts';
import { parseMaintenanceWindow } from '../../src/domain/maintenance-window.ts';
import { nodePacingKeys, parseNodePacing } from '../../src/domain/node-pacing.ts';
import { resolvePlanPolicy } from '../../src/domain/plan-policy.ts';
import { bindingSettings, policyKeys, valueOverLimit } from '../../src/domain/policy-keys.ts';
import { parseControlPlaneStrategy, parseWorkersStrategy } from '../../src/domain/upgrade-plan.ts';
import { isNamespaceName, resolveUpgradePolicy } from '../../src/domain/upgrade-policy.ts';
import { parseCatalog } from '../../src/domain/version-catalog.ts';
import { tryParseVersion } from '../../src/domain/versions.ts';

/** Values are timed at two sizes: a linear parse takes ~4x as long on the larger, a quadratic one ~16x. */
const SMALL = 16 * 1024;
const LARGE = 64 * 1024;

const fill = (unit: string, size: number) => unit.repeat(Math.ceil(size / unit.length)).slice(0, size);

/** Values a tenant could write, each `size` characters. */
const adversarial = (size: number): Record<string, string> => {
  const f = (unit: string) => fill(unit, size);
  const between = (head: string, unit: string, tail: string) =>
    head + fill(unit, size - head.length - tail.length) + tail;
  return {
    spaces: f(' '),
    'inner spaces': between('v1', ' ', 'x'),
    'unicode spaces': between('v1', '\u2000\u00a0\u0085', 'x'),
    tabs: between('a', '\t', 'b'),
    'a/a/a': f('a/'),
    slashes: f('/'),
    'url with slashes': between('http://x/', '/', 'a'),
    commas: f(','),
    semicolons: f(';'),
    'separated blanks': f(' , ; '),
    equals: f('='),
    parens: f('('),
    bangs: f('!'),
    dashes: between('a', '-', '!'),
    'dotted labels': between('', 'a.', '-'),
    digits: f('1'),
    'digits and dots': f('1.'),
    'near-miss duration': f('1h1'),
    'near-miss freeze': f('2026-12-20T00:00:00Z/2027-01-04T00:00:00Z '),
    'near-miss window': f('Sat,Sun '),
    'near-miss matcher': between('a="', 'x\\"', ''),
    'near-miss selector': f('a in (b,'),
    'near-miss versions': f('v1.2.3-'),
    'near-miss pointer': between('Machine:/', '~', ''),
    'near-miss zone': f('Europe/'),
    tildes: f('~2'),
    quotes: f('"'),
    backslashes: f('\\'),
  };
};

function fastest(f: () => unknown, runs = 2): number {
  let best = Infinity;
  for (let i = 0; i < runs; i++) {
    const start = performance.now();
    f();
    best = Math.min(best, performance.now() - start);
  }
  return best;
}

/** Runs `parse` on `value`, which may throw or refuse: only the time counts. */
function timeParse(parse: (v: string) => unknown, value: string, runs = 2): number {
  return fastest(() => {
    try {
      parse(value);
    } catch {
      // A refusal is an answer.
    }
  }, runs);
}

// Every parser of a setting or annotation value (found with grep: lookupPolicy, settings[…],
// annotations[…], and the parse* functions they call).
const SMALL_VALUES = adversarial(SMALL);
const LARGE_VALUES = adversarial(LARGE);

const P = 'upgrades.capi-orchestrator.io/';
const PROM = 'http://prometheus.monitoring:9090';
const alertSettings = { alertPrometheusUrl: PROM, alertmanagerUrl: 'http://am:9093' };
const PARSERS: Record<string, (v: string) => unknown> = {
  parseFreezes,
  parseWindows,
  parseMaintenanceWindow,
  parseTimeZone,
  parseGoDuration,
  tryParseVersion,
  parseCatalog: (v) => parseCatalog(v, 'fuzz'),
  parseWorkersStrategy,
  parseControlPlaneStrategy,
  isNamespaceName,
  parseAlertUrl,
  'parseObjectKeyRef (annotation)': (v) => parseObjectKeyRef(v, { fromAnnotation: true, kinds: ['Secret'] }),
  'parseObjectKeyRef (setting)': (v) => parseObjectKeyRef(v, { fromAnnotation: false, kinds: ['Secret', 'ConfigMap'] }),
  checkAlertFilter,
  parseSilenceMatchers,
  parseLabelSelector,
  parseSkipPodSelector: (v) => parseSkipPodSelector('setting drainSkipPodSelector', v),
  parsePointer,
  parseDeclaredPaths: (v) => parseDeclaredPaths(v, 'lease'),
  valueOverLimit: (v) => valueOverLimit('annotation x', 'criticalNamespaces', v),
  bindingSettings: (v) => bindingSettings({ bindingPolicies: v }),
  [`parseGateOverride, annotation ${OVERRIDE_GATES_ANNOTATION}`]: (v) =>
    parseGateOverride({ [OVERRIDE_GATES_ANNOTATION]: v, [OVERRIDE_REASON_ANNOTATION]: 'x' }),
  [`parseGateOverride, annotation ${OVERRIDE_REASON_ANNOTATION}`]: (v) =>
    parseGateOverride({ [OVERRIDE_GATES_ANNOTATION]: 'alerts', [OVERRIDE_REASON_ANNOTATION]: v }),
  'gateOverrideNamespaces setting': (v) =>
    resolveUpgradePolicy({
      settings: { gateOverrideNamespaces: v },
      annotations: { [OVERRIDE_GATES_ANNOTATION]: 'alerts', [OVERRIDE_REASON_ANNOTATION]: 'x' },
      namespace: 'a',
    }),
  'alertAllowedUrls setting': (v) => resolveAlertPolicy({ settings: { ...alertSettings, alertAllowedUrls: v } }),
};
// Every key of every resolver, as annotation and as setting.
for (const k of Object.values(policyKeys)) {
  PARSERS[`upgrade policy, annotation ${k.annotation}`] = (v) =>
    resolveUpgradePolicy({ annotations: { [k.annotation]: v } });
  PARSERS[`upgrade policy, setting ${k.setting}`] = (v) => resolveUpgradePolicy({ settings: { [k.setting]: v } });
  PARSERS[`plan policy, annotation ${k.annotation}`] = (v) => resolvePlanPolicy({ annotations: { [k.annotation]: v } });
  PARSERS[`plan policy, setting ${k.setting}`] = (v) => resolvePlanPolicy({ settings: { [k.setting]: v } });
  // Bound by the platform: both values are read and compared.
  PARSERS[`bound ${k.setting}`] = (v) =>
    resolveUpgradePolicy({ settings: { bindingPolicies: '*', [k.setting]: v }, annotations: { [k.annotation]: v } });
}
for (const k of Object.values(alertPolicyKeys)) {
  PARSERS[`alert policy, annotation ${k.annotation}`] = (v) =>
    resolveAlertPolicy({ settings: alertSettings, annotations: { [k.annotation]: v } });
  PARSERS[`alert policy, setting ${k.setting}`] = (v) =>
    resolveAlertPolicy({ settings: { ...alertSettings, [k.setting]: v } });
}
for (const k of Object.values(nodePacingKeys)) {
  PARSERS[`node pacing, annotation ${k.annotation}`] = (v) => parseNodePacing({ [k.annotation]: v }, 'annotation');
  PARSERS[`node pacing, setting ${k.setting}`] = (v) => parseNodePacing({ [k.setting]: v }, 'setting');
}
for (const setting of Object.values(machineUpdateSettings))
  PARSERS[`machine update, setting ${setting}`] = (v) => resolveMachineUpdatePolicy({ [setting]: v });
for (const setting of ['inPlaceUpdates', 'inPlaceAllowedPaths'])
  PARSERS[`in place, setting ${setting}`] = (v) => resolveInPlacePolicy({ [setting]: v });

describe('policy parsers on long adversarial values', () => {
  it('covers every policy key', () => {
    const names = Object.keys(PARSERS).join('\n');
    for (const k of [...Object.values(policyKeys), ...Object.values(alertPolicyKeys), ...Object.values(nodePacingKeys)])
      expect(names).toContain(k.annotation);
    expect(names).toContain(`${P}override-gates`);
  });

  it.each(Object.keys(PARSERS))('%s: linear time on every value', (name) => {
    const parse = PARSERS[name] as (v: string) => unknown;
    const slow: string[] = [];
    for (const [shape, value] of Object.entries(LARGE_VALUES)) {
      // Under 250 ms is no harm whatever the ratio, and too short to time on a loaded machine (a
      // linear parse measured 55 ms there): the quadratic parses took about 1.5 s.
      if (timeParse(parse, value) <= 250) continue;
      // Slow once: timed again at more runs, so that one busy moment is not a verdict.
      const large = timeParse(parse, value, 5);
      if (large <= 250) continue;
      const small = timeParse(parse, SMALL_VALUES[shape] ?? '', 5);
      // 4x the input: ~4x the time when linear, ~16x when quadratic; 8x leaves room for a loaded machine.
      if (large > 8 * small + 50)
        slow.push(`${shape}: ${large.toFixed(1)} ms at ${LARGE} characters, ${small.toFixed(1)} ms at ${SMALL}`);
    }
    expect(slow).toEqual([]);
  });
});
