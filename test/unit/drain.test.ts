import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import type { V1Pod } from '@kubernetes/client-node';
import {
  DRAIN_REASONS,
  filterPodsForDrain,
  parseSkipPodSelector,
  podKey,
  summarizeDrain,
} from '../../src/domain/drain.ts';
import type { DrainFilterResult, DrainOptions, DrainPod } from '../../src/domain/drain.ts';

interface PodOpts {
  ns?: string;
  owner?: string | null;
  emptyDir?: boolean;
  phase?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  deleting?: boolean;
}

/** A V1Pod on node worker-1, by default owned by a ReplicaSet and Running. */
function pod(name: string, o: PodOpts = {}): V1Pod {
  const owner = o.owner === undefined ? 'ReplicaSet' : o.owner;
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      namespace: o.ns ?? 'default',
      ...(o.labels ? { labels: o.labels } : {}),
      ...(o.annotations ? { annotations: o.annotations } : {}),
      ...(owner
        ? {
            ownerReferences: [
              { apiVersion: 'apps/v1', kind: owner, name: `${name}-owner`, uid: 'u1', controller: true },
            ],
          }
        : {}),
      ...(o.deleting ? { deletionTimestamp: new Date('2026-01-01T00:00:00Z') } : {}),
    },
    spec: {
      nodeName: 'worker-1',
      terminationGracePeriodSeconds: 30,
      containers: [{ name: 'c', image: 'registry.k8s.io/pause:3.10' }],
      volumes: [
        { name: 'token', projected: { sources: [] } },
        ...(o.emptyDir ? [{ name: 'scratch', emptyDir: {} }] : []),
      ],
    },
    status: { phase: o.phase ?? 'Running' },
  };
}

const STRICT: DrainOptions = { deleteEmptyDirData: false, force: false };
const LENIENT: DrainOptions = { deleteEmptyDirData: true, force: true };

function verdict(p: V1Pod, options: DrainOptions): string {
  const r = filterPodsForDrain([p], options);
  if (r.evict.length === 1) return 'evict';
  if (r.skip.length === 1) return `skip: ${r.skip[0]?.reason}`;
  return `block: ${r.blockers[0]?.reason}`;
}

describe('filterPodsForDrain', () => {
  it.each([
    ['ReplicaSet pod', pod('web'), STRICT, 'evict'],
    ['StatefulSet pod', pod('db', { owner: 'StatefulSet' }), STRICT, 'evict'],
    ['DaemonSet pod', pod('ds', { owner: 'DaemonSet' }), STRICT, `skip: ${DRAIN_REASONS.daemonSet}`],
    [
      'DaemonSet pod with emptyDir',
      pod('ds', { owner: 'DaemonSet', emptyDir: true }),
      STRICT,
      `skip: ${DRAIN_REASONS.daemonSet}`,
    ],
    [
      'mirror pod',
      pod('kube-apiserver-w1', { owner: 'Node', annotations: { 'kubernetes.io/config.mirror': 'abc' } }),
      STRICT,
      `skip: ${DRAIN_REASONS.mirror}`,
    ],
    [
      'mirror pod without owner',
      pod('static', { owner: null, annotations: { 'kubernetes.io/config.mirror': '' } }),
      STRICT,
      `skip: ${DRAIN_REASONS.mirror}`,
    ],
    [
      'drain: skip label',
      pod('keep', { owner: null, labels: { 'cluster.x-k8s.io/drain': 'skip' } }),
      STRICT,
      `skip: ${DRAIN_REASONS.skipLabel}`,
    ],
    ['drain label with another value', pod('other', { labels: { 'cluster.x-k8s.io/drain': 'wait' } }), STRICT, 'evict'],
    [
      'terminating pod',
      pod('going', { deleting: true, owner: null, emptyDir: true }),
      STRICT,
      `skip: ${DRAIN_REASONS.terminating}`,
    ],
    [
      'Succeeded bare pod with emptyDir',
      pod('job', { owner: null, emptyDir: true, phase: 'Succeeded' }),
      STRICT,
      'evict',
    ],
    ['Failed bare pod', pod('crash', { owner: null, phase: 'Failed' }), STRICT, 'evict'],
    ['emptyDir pod', pod('cache', { emptyDir: true }), STRICT, `block: ${DRAIN_REASONS.emptyDir}`],
    [
      'emptyDir pod, deleteEmptyDirData',
      pod('cache', { emptyDir: true }),
      { ...STRICT, deleteEmptyDirData: true },
      'evict',
    ],
    ['bare pod', pod('bare', { owner: null }), STRICT, `block: ${DRAIN_REASONS.noController}`],
    ['bare pod, force', pod('bare', { owner: null }), { ...STRICT, force: true }, 'evict'],
    [
      'bare pod with emptyDir',
      pod('bare', { owner: null, emptyDir: true }),
      STRICT,
      `block: ${DRAIN_REASONS.emptyDir}, ${DRAIN_REASONS.noController}`,
    ],
    [
      'bare pod with emptyDir, force only',
      pod('bare', { owner: null, emptyDir: true }),
      { ...STRICT, force: true },
      `block: ${DRAIN_REASONS.emptyDir}`,
    ],
    ['bare pod with emptyDir, both options', pod('bare', { owner: null, emptyDir: true }), LENIENT, 'evict'],
  ])('%s → %s', (_name, p, options, expected) => {
    expect(verdict(p, options as DrainOptions)).toBe(expected);
  });

  it('honours a custom skip label', () => {
    const options = { ...STRICT, skipLabel: { key: 'example.com/drain', value: 'never' } };
    expect(verdict(pod('a', { labels: { 'example.com/drain': 'never' } }), options)).toBe(
      `skip: ${DRAIN_REASONS.skipLabel}`,
    );
    expect(verdict(pod('b', { labels: { 'cluster.x-k8s.io/drain': 'skip' } }), options)).toBe('evict');
  });

  it('only a controller owner counts, and only a DaemonSet controller is skipped', () => {
    const p = pod('owned-not-controlled', { owner: null });
    p.metadata!.ownerReferences = [{ apiVersion: 'apps/v1', kind: 'DaemonSet', name: 'ds', uid: 'u' }];
    expect(verdict(p, STRICT)).toBe(`block: ${DRAIN_REASONS.noController}`);
  });

  it('warns about pods evicted with local data or without controller', () => {
    const r = filterPodsForDrain([pod('bare', { owner: null, emptyDir: true }), pod('web')], LENIENT);
    expect(r.evict.map(podKey)).toEqual(['default/bare', 'default/web']);
    expect(r.warnings.map((w) => [podKey(w.pod), w.reason])).toEqual([
      ['default/bare', `${DRAIN_REASONS.emptyDir}, ${DRAIN_REASONS.noController}`],
    ]);
  });

  it('orders every list by namespace, then name, whatever the input order', () => {
    const pods = [
      pod('b', { ns: 'z' }),
      pod('a', { ns: 'z', owner: 'DaemonSet' }),
      pod('c', { ns: 'a', owner: null }),
      pod('a', { ns: 'a' }),
      pod('B', { ns: 'a' }),
      pod('x', { ns: 'm', owner: null }),
      pod('y', { ns: 'a', owner: 'DaemonSet' }),
    ];
    const expected = filterPodsForDrain(pods, STRICT);
    expect(expected.evict.map(podKey)).toEqual(['a/B', 'a/a', 'z/b']);
    expect(expected.skip.map((s) => podKey(s.pod))).toEqual(['a/y', 'z/a']);
    expect(expected.blockers.map((s) => podKey(s.pod))).toEqual(['a/c', 'm/x']);
    fc.assert(
      fc.property(fc.shuffledSubarray(pods, { minLength: pods.length, maxLength: pods.length }), (shuffled) => {
        const r = filterPodsForDrain(shuffled, STRICT);
        expect(r).toEqual(expected);
        expect(summarizeDrain(r)).toBe(summarizeDrain(expected));
      }),
    );
  });

  it('puts every pod in exactly one of evict, skip or blockers', () => {
    const podArb = fc
      .record({
        name: fc.constantFrom('a', 'b', 'c', 'd'),
        ns: fc.constantFrom('x', 'y'),
        owner: fc.constantFrom<string | null>(null, 'ReplicaSet', 'DaemonSet', 'Job'),
        emptyDir: fc.boolean(),
        phase: fc.constantFrom('Pending', 'Running', 'Succeeded', 'Failed', 'Unknown'),
        deleting: fc.boolean(),
        skip: fc.boolean(),
        mirror: fc.boolean(),
      })
      .map((r) =>
        pod(r.name, {
          ns: r.ns,
          owner: r.owner,
          emptyDir: r.emptyDir,
          phase: r.phase,
          deleting: r.deleting,
          ...(r.skip ? { labels: { 'cluster.x-k8s.io/drain': 'skip' } } : {}),
          ...(r.mirror ? { annotations: { 'kubernetes.io/config.mirror': 'm' } } : {}),
        }),
      );
    fc.assert(
      fc.property(
        fc.array(podArb, { maxLength: 12 }),
        fc.boolean(),
        fc.boolean(),
        (pods, deleteEmptyDirData, force) => {
          const r = filterPodsForDrain(pods, { deleteEmptyDirData, force });
          expect(r.evict.length + r.skip.length + r.blockers.length).toBe(pods.length);
          if (deleteEmptyDirData && force) expect(r.blockers).toEqual([]);
          for (const w of r.warnings) expect(r.evict).toContain(w.pod);
        },
      ),
    );
  });

  it('accepts minimal pods without metadata or spec', () => {
    const bare: DrainPod = {};
    const r = filterPodsForDrain([bare], STRICT);
    expect(r.blockers.map((b) => b.reason)).toEqual([DRAIN_REASONS.noController]);
    expect(podKey(bare)).toBe('/');
  });
});

describe('summarizeDrain', () => {
  const empty: DrainFilterResult = { evict: [], skip: [], blockers: [], warnings: [] };

  it('says when nothing blocks', () => {
    expect(summarizeDrain(empty)).toBe('drain: 0 to evict, 0 skipped, none blocking');
    const r = filterPodsForDrain([pod('web'), pod('ds', { owner: 'DaemonSet' })], STRICT);
    expect(summarizeDrain(r)).toBe('drain: 1 to evict, 1 skipped, none blocking');
  });

  it('names blocking pods with reasons, then the PDBs', () => {
    const r = filterPodsForDrain(
      [pod('web-1'), pod('web-0'), pod('cache', { emptyDir: true }), pod('bare', { owner: null, ns: 'tools' })],
      STRICT,
    );
    const pdbBlocked = [
      { namespace: 'default', pod: 'web-1', pdb: 'web' },
      { namespace: 'default', pod: 'web-0', pdb: 'web' },
    ];
    expect(summarizeDrain(r, pdbBlocked)).toBe(
      'drain: 2 to evict, 0 skipped, 4 blocking: default/cache (has emptyDir volumes (local data)), ' +
        'default/web-0 (PDB web), default/web-1 (PDB web), tools/bare (declares no controller); PDBs: default/web',
    );
    expect(summarizeDrain(r, [...pdbBlocked].reverse())).toBe(summarizeDrain(r, pdbBlocked));
  });

  it('names at most five pods and five PDBs', () => {
    const pods = Array.from({ length: 7 }, (_, i) => pod(`bare-${i}`, { owner: null }));
    const pdbBlocked = Array.from({ length: 7 }, (_, i) => ({ namespace: 'apps', pod: `p-${i}`, pdb: `pdb-${i}` }));
    const line = summarizeDrain(filterPodsForDrain(pods, STRICT), pdbBlocked);
    expect(line).toBe(
      'drain: 0 to evict, 0 skipped, 14 blocking: apps/p-0 (PDB pdb-0), apps/p-1 (PDB pdb-1), apps/p-2 (PDB pdb-2), ' +
        'apps/p-3 (PDB pdb-3), apps/p-4 (PDB pdb-4) and 9 more; ' +
        'PDBs: apps/pdb-0, apps/pdb-1, apps/pdb-2, apps/pdb-3, apps/pdb-4 and 2 more',
    );
    expect(line).not.toContain('\n');
  });

  it('merges a pod blocked by several PDBs', () => {
    const r = filterPodsForDrain([pod('web-0')], STRICT);
    const line = summarizeDrain(r, [
      { namespace: 'default', pod: 'web-0', pdb: 'b' },
      { namespace: 'default', pod: 'web-0', pdb: 'a' },
    ]);
    expect(line).toBe(
      'drain: 1 to evict, 0 skipped, 1 blocking: default/web-0 (PDB a; PDB b); PDBs: default/a, default/b',
    );
  });
});

describe('drain skip selector (drainSkipPodSelector)', () => {
  const selector = (text: string) => {
    const r = parseSkipPodSelector('setting drainSkipPodSelector', text);
    if (!r.ok) throw new Error(r.message);
    return r.selector;
  };
  // CAPD's in-memory "static pods": plain kube-system pods with no controller and no mirror annotation.
  const capdApiServer = pod('kube-apiserver-cp-0', {
    ns: 'kube-system',
    owner: null,
    labels: { component: 'kube-apiserver', tier: 'control-plane' },
  });
  const CAPD = 'tier=control-plane,component in (etcd,kube-apiserver,kube-controller-manager,kube-scheduler)';

  it('leaves matching pods alone: neither evicted nor blocking', () => {
    expect(verdict(capdApiServer, STRICT)).toBe(`block: ${DRAIN_REASONS.noController}`);
    expect(verdict(capdApiServer, { ...STRICT, skipSelector: selector(CAPD) })).toBe(
      `skip: ${DRAIN_REASONS.skipSelector}`,
    );
    expect(
      verdict(pod('web', { labels: { tier: 'control-plane', component: 'web' } }), {
        ...STRICT,
        skipSelector: selector(CAPD),
      }),
    ).toBe('evict');
  });

  it('an empty selector skips nothing', () => {
    expect(verdict(capdApiServer, { ...STRICT, skipSelector: selector('') })).toBe(
      `block: ${DRAIN_REASONS.noController}`,
    );
    expect(verdict(pod('web'), { ...LENIENT, skipSelector: selector('  ') })).toBe('evict');
  });

  it('refuses a bad selector naming where it came from, and one that would skip every unlabelled pod', () => {
    expect(parseSkipPodSelector('setting drainSkipPodSelector', 'tier in control-plane')).toEqual({
      ok: false,
      message:
        'setting drainSkipPodSelector="tier in control-plane": not a usable label selector: expected "(" after tier in, found "control-plane"',
    });
    expect(parseSkipPodSelector('setting drainSkipPodSelector', '!app')).toEqual({
      ok: false,
      message:
        'setting drainSkipPodSelector="!app": a skip selector needs a requirement on a label pods have (=, ==, in, a key, >, <): ' +
        'one of only !=, notin and !key skips every pod without that label',
    });
    expect(parseSkipPodSelector('annotation x', `a=${'b'.repeat(2000)}`)).toEqual({
      ok: false,
      message: 'annotation x(2002 characters): not a usable label selector: longer than 1024 characters',
    });
  });
});
