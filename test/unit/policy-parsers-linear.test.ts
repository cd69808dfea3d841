// Every parser of a Cluster annotation or an ExtensionConfig setting runs in time linear in its
// input: a tenant writes annotations up to Kubernetes' 256 KiB, and a parse that backtracks
// quadratically on one of them held the api's event loop for seconds (parseFreezes on
// "a/a/a/…", the Go trim of a version on "v1<100,000 spaces>x"). Each parser gets adversarial
// values of 256 KiB (runs of spaces, slashes, separators, near misses of its own syntax) and
// must finish within a bound per byte taken from a linear baseline measured on the same input,
// generous for a loaded 2-core machine (quadratic cases take seconds; the bound is tens of ms).
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

const SIZE = 256 * 1024;

const fill = (unit: string, size = SIZE) => unit.repeat(Math.ceil(size / unit.length)).slice(0, size);
const between = (head: string, unit: string, tail: string) =>
  head + fill(unit, SIZE - head.length - tail.length) + tail;

/** Values a tenant could write, each 256 KiB. */
const ADVERSARIAL: Record<string, string> = {
  spaces: fill(' '),
  'inner spaces': between('v1', ' ', 'x'),
  'unicode spaces': between('v1', '\u2000\u00a0\u0085', 'x'),
  tabs: between('a', '\t', 'b'),
  'a/a/a': fill('a/'),
  slashes: fill('/'),
  'url with slashes': between('http://x/', '/', 'a'),
  commas: fill(','),
  semicolons: fill(';'),
  'separated blanks': fill(' , ; '),
  equals: fill('='),
  parens: fill('('),
  bangs: fill('!'),
  dashes: between('a', '-', '!'),
  'dotted labels': between('', 'a.', '-'),
  digits: fill('1'),
  'digits and dots': fill('1.'),
  'near-miss duration': fill('1h1'),
  'near-miss freeze': fill('2026-12-20T00:00:00Z/2027-01-04T00:00:00Z '),
  'near-miss window': fill('Sat,Sun '),
  'near-miss matcher': between('a="', 'x\\"', ''),
  'near-miss selector': fill('a in (b,'),
  'near-miss versions': fill('v1.2.3-'),
  'near-miss pointer': between('Machine:/', '~', ''),
  'near-miss zone': fill('Europe/'),
  tildes: fill('~2'),
  quotes: fill('"'),
  backslashes: fill('\\'),
};

/** A linear pass over `s` of the kind every parser does at least (read each character, build a copy). */
function baseline(s: string): number {
  let h = 0;
  for (let i = 0; i < s.length; i++) h = (h * 31 + s.charCodeAt(i)) | 0;
  return h + s.split(',').length + JSON.stringify(s).length;
}

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
function timeParse(parse: (v: string) => unknown, value: string): number {
  return fastest(() => {
    try {
      parse(value);
    } catch {
      // A refusal is an answer.
    }
  });
}

// Every parser of a setting or annotation value (found with grep: lookupPolicy, settings[…],
// annotations[…], and the parse* functions they call).
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

describe('policy parsers on 256 KiB adversarial values', () => {
  it('covers every policy key', () => {
    const names = Object.keys(PARSERS).join('\n');
    for (const k of [...Object.values(policyKeys), ...Object.values(alertPolicyKeys), ...Object.values(nodePacingKeys)])
      expect(names).toContain(k.annotation);
    expect(names).toContain(`${P}override-gates`);
  });

  it.each(Object.keys(PARSERS))('%s: linear time on every value', (name) => {
    const parse = PARSERS[name] as (v: string) => unknown;
    const slow: string[] = [];
    for (const [shape, value] of Object.entries(ADVERSARIAL)) {
      const base = fastest(() => baseline(value), 3);
      // 20 linear passes' worth, plus 40 ms for a scheduler's hiccup: a quadratic parse of
      // 256 KiB takes seconds; a linear one a few ms.
      const bound = 40 + 20 * base;
      const ms = timeParse(parse, value);
      if (ms > bound)
        slow.push(`${shape}: ${ms.toFixed(1)} ms > ${bound.toFixed(1)} ms (${((ms * 1e6) / SIZE).toFixed(0)} ns/byte)`);
    }
    expect(slow).toEqual([]);
  });
});
