// Node pacing policy: the blocking pod selector, its timeout
// and the delay after each node, from ExtensionConfig settings and from a
// Cluster's annotations; a bad value is refused naming the setting or the
// annotation (CAPI gets that message as the hook's Failure).
import { describe, expect, it } from '@jest/globals';
import { resolveMachineUpdatePolicy } from '../../src/domain/machine-update-policy.ts';
import {
  blockingPodsDetail,
  blockingSelectorText,
  nodePacingKeys,
  parseNodePacing,
} from '../../src/domain/node-pacing.ts';

const A = 'upgrades.capi-orchestrator.io/';

describe('node pacing settings', () => {
  it('are unset by default: nothing holds, nothing waits', () => {
    expect(resolveMachineUpdatePolicy({})).toMatchObject({ ok: true, policy: { pacing: {} } });
    expect(parseNodePacing({ blockingPodSelector: '  ', postUpdateDelay: '' }, 'setting')).toEqual({
      ok: true,
      pacing: {},
    });
  });

  it('reads the selector, the timeout and the delay', () => {
    const settings = { blockingPodSelector: 'app in (batch,etl)', blockingPodTimeout: '45m', postUpdateDelay: '2m30s' };
    expect(resolveMachineUpdatePolicy(settings)).toMatchObject({
      ok: true,
      policy: {
        pacing: {
          blockingPodSelector: 'app in (batch,etl)',
          blockingPodTimeoutMs: 2_700_000,
          postUpdateDelayMs: 150_000,
        },
      },
    });
  });

  it('refuses bad values naming each setting, all at once', () => {
    expect(
      resolveMachineUpdatePolicy({
        blockingPodSelector: 'app in batch',
        blockingPodTimeout: 'soon',
        postUpdateDelay: '25h',
      }),
    ).toEqual({
      ok: false,
      message:
        'setting blockingPodSelector="app in batch": not a usable label selector: expected "(" after app in, found "batch"; ' +
        'setting blockingPodTimeout="soon": not a duration (use e.g. 30m, 2h); ' +
        'setting postUpdateDelay="25h": at most 24h',
    });
  });

  it('refuses a selector that would hold for every pod without a label, and one over 1024 characters', () => {
    expect(parseNodePacing({ blockingPodSelector: '!batch' }, 'setting')).toEqual({
      ok: false,
      message:
        'setting blockingPodSelector="!batch": a blocking selector needs a requirement on a label pods have ' +
        '(=, ==, in, a key, >, <): one of only !=, notin and !key holds the node for every pod without that label',
    });
    expect(parseNodePacing({ blockingPodSelector: `a=${'b'.repeat(1100)}` }, 'setting')).toEqual({
      ok: false,
      message: 'setting blockingPodSelector is 1102 characters, over the 1024-character limit',
    });
  });

  it('reads annotations by their names and names the Cluster in what it refuses', () => {
    expect(
      parseNodePacing({ [`${A}blocking-pod-selector`]: 'app=batch', [`${A}post-update-delay`]: '10m' }, 'annotation'),
    ).toEqual({ ok: true, pacing: { blockingPodSelector: 'app=batch', postUpdateDelayMs: 600_000 } });
    // A setting's name on a Cluster is no annotation: ignored.
    expect(parseNodePacing({ blockingPodSelector: 'app=batch' }, 'annotation')).toEqual({ ok: true, pacing: {} });
    expect(parseNodePacing({ [`${A}blocking-pod-timeout`]: '-1m' }, 'annotation', 'Cluster ns/c ')).toEqual({
      ok: false,
      message: `Cluster ns/c annotation ${A}blocking-pod-timeout="-1m": not a duration (use e.g. 30m, 2h)`,
    });
    expect(nodePacingKeys.postUpdateDelay).toEqual({ setting: 'postUpdateDelay', annotation: `${A}post-update-delay` });
  });
});

describe('what a held update says', () => {
  it('names the selector, where it came from, the node, the count and the first pod', () => {
    expect(blockingPodsDetail('w-0', blockingSelectorText('app=batch', false), { count: 2, first: 'jobs/etl-1' })).toBe(
      '2 pod(s) matching blocking pod selector "app=batch" (setting blockingPodSelector) run on node w-0, first jobs/etl-1',
    );
    expect(blockingSelectorText('app=batch', true)).toBe(`"app=batch" (annotation ${A}blocking-pod-selector)`);
  });
});
