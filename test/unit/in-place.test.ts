import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import {
  computeMachinePatches,
  computeMachineSetPatches,
  decodeJsonPatch,
  specHash,
  versionChangeRefusal,
} from '../../src/domain/in-place.ts';
import {
  DEFAULT_ALLOWED_PATHS,
  InPlaceSettingsError,
  parseInPlacePolicy,
  resolveInPlacePolicy,
} from '../../src/domain/in-place-policy.ts';
import { formatPointer, parsePointer } from '../../src/domain/json-pointer.ts';
import { canonicalJson } from '../../src/domain/canonical-json.ts';
import type { JsonPatch, JsonPatchOp, MachineObjects } from '../../src/domain/in-place.ts';
import type { InPlacePolicy } from '../../src/domain/in-place-policy.ts';
import type { HookRequest, HookResult, Patch } from '../../src/api/hooks/contract.ts';
import { infrastructureMachine, kubeadmConfig, machine, machineSet, template } from '../../support/capi-fixtures.ts';

// ---- a tiny RFC 6902 apply (add / replace / remove), independent of the module ----

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

function unescapeTokens(pointer: string): string[] {
  if (pointer === '') return [];
  return pointer
    .slice(1)
    .split('/')
    .map((t) => t.replace(/~1/g, '/').replace(/~0/g, '~'));
}

function applyPatch(doc: unknown, ops: readonly JsonPatchOp[]): unknown {
  const root = structuredClone(doc) as Json;
  for (const op of ops) {
    const tokens = unescapeTokens(op.path);
    const last = tokens.pop();
    if (last === undefined) throw new Error('root ops are not used here');
    let parent: Json = root;
    for (const t of tokens) {
      const next: Json | undefined = Array.isArray(parent)
        ? parent[Number(t)]
        : parent !== null && typeof parent === 'object' && Object.hasOwn(parent, t)
          ? parent[t]
          : undefined;
      if (next === undefined) throw new Error(`${op.op} ${op.path}: parent missing`);
      parent = next;
    }
    if (parent === null || typeof parent !== 'object')
      throw new Error(`${op.op} ${op.path}: parent is not a container`);
    if (Array.isArray(parent)) {
      const i = last === '-' ? parent.length : Number(last);
      if (op.op === 'add') parent.splice(i, 0, op.value as Json);
      else if (op.op === 'replace') parent[i] = op.value as Json;
      else parent.splice(i, 1);
      continue;
    }
    const exists = Object.hasOwn(parent, last);
    if (op.op === 'add') {
      Object.defineProperty(parent, last, { value: op.value, enumerable: true, writable: true, configurable: true });
    } else if (!exists) {
      throw new Error(`${op.op} ${op.path}: target missing`);
    } else if (op.op === 'replace') {
      parent[last] = op.value as Json;
    } else {
      delete parent[last];
    }
  }
  return root;
}

function ops(patch: JsonPatch | Patch | undefined): JsonPatchOp[] {
  expect(patch).toBeDefined();
  expect(patch?.patchType).toBe('JSONPatch');
  const decoded = JSON.parse(Buffer.from(patch?.patch ?? '', 'base64').toString('utf8')) as JsonPatchOp[];
  expect(decodeJsonPatch({ patchType: 'JSONPatch', patch: patch?.patch ?? '' })).toEqual(decoded);
  return decoded;
}

/** Equality that ignores key order. */
const same = (a: unknown, b: unknown) => expect(canonicalJson(a)).toBe(canonicalJson(b));

const DEFAULTS = parseInPlacePolicy();
const policy = (settings: Record<string, string>) => parseInPlacePolicy(settings);

function objects(version = 'v1.33.0', files: { path: string; content: string }[] = []): MachineObjects {
  return {
    machine: machine(undefined, undefined, version),
    infrastructureMachine: infrastructureMachine(),
    bootstrapConfig: kubeadmConfig(undefined, undefined, files),
  };
}

const FILE_A = { path: '/etc/a.conf', content: 'a=1' };
const FILE_B = { path: '/etc/b.conf', content: 'b=2' };

// ---- settings ------------------------------------------------------------------------

describe('parseInPlacePolicy', () => {
  it('defaults to enabled with Machine version, KubeadmConfig files and their template equivalents', () => {
    expect(DEFAULTS.enabled).toBe(true);
    expect(DEFAULTS.allowedPaths.map((p) => `${p.kind}:${p.pointer}`).sort()).toEqual(
      [...DEFAULT_ALLOWED_PATHS].sort(),
    );
  });

  it.each([
    [{ inPlaceUpdates: 'false' }, false],
    [{ inPlaceUpdates: ' FALSE ' }, false],
    [{ inPlaceUpdates: 'true' }, true],
    [{ inPlaceUpdates: '' }, true],
  ])('reads inPlaceUpdates from %j', (settings, enabled) => {
    expect(parseInPlacePolicy(settings).enabled).toBe(enabled);
  });

  it('replaces the list, expands "defaults", sorts and drops covered paths', () => {
    const p = policy({
      inPlaceAllowedPaths: 'KubeadmConfig:/spec/files/0, defaults ,KubeadmConfig:/spec/ntp,Machine:/spec/version,',
    });
    expect(p.allowedPaths.map((x) => `${x.kind}:${x.pointer}`)).toEqual([
      'KubeadmConfig:/spec/files',
      'KubeadmConfig:/spec/ntp',
      'KubeadmConfigTemplate:/spec/template/spec/files',
      'Machine:/spec/version',
      'MachineSet:/spec/template/spec/version',
    ]);
    expect(policy({ inPlaceAllowedPaths: 'Machine:/spec/version' }).allowedPaths).toHaveLength(1);
  });

  it.each([
    ['inPlaceUpdates', 'yes', /^invalid setting inPlaceUpdates "yes": expected "true" or "false"$/],
    ['inPlaceAllowedPaths', '/spec/version', /entry "\/spec\/version": expected <Kind>:<JSON pointer>/],
    ['inPlaceAllowedPaths', 'Machine:spec/version', /invalid JSON pointer "spec\/version"/],
    ['inPlaceAllowedPaths', 'Machine:/spec/a~2b', /invalid JSON pointer/],
    ['inPlaceAllowedPaths', 'Machine:/metadata/labels', /a Machine path must start with \/spec/],
    ['inPlaceAllowedPaths', 'MachineSet:/spec/replicas', /must start with \/spec\/template\/spec/],
    ['inPlaceAllowedPaths', 'KubeadmConfigTemplate:/spec/files', /must start with \/spec\/template\/spec/],
    ['inPlaceAllowedPaths', 'Machine-x:/spec/version', /invalid kind "Machine-x"/],
    ['inPlaceAllowedPaths', ' , ', /lists no paths/],
  ])('rejects %s=%j with a message naming setting and value', (setting, value, message) => {
    const r = resolveInPlacePolicy({ [setting]: value });
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.error).toBeInstanceOf(InPlaceSettingsError);
    expect(r.error.setting).toBe(setting);
    expect(r.error.value).toBe(value);
    expect(r.message).toContain(`invalid setting ${setting} ${JSON.stringify(value)}`);
    expect(r.message).toMatch(message);
    expect(() => parseInPlacePolicy({ [setting]: value })).toThrow(InPlaceSettingsError);
  });

  it('round-trips JSON pointer escapes', () => {
    expect(parsePointer('/spec/a~1b/c~0d/~01')).toEqual(['spec', 'a/b', 'c~d', '~1']);
    expect(formatPointer(['spec', 'a/b', 'c~d', '~1'])).toBe('/spec/a~1b/c~0d/~01');
    expect(parsePointer('/spec/~')).toBeUndefined();
  });
});

// ---- CanUpdateMachine ----------------------------------------------------------------

describe('computeMachinePatches', () => {
  it('declares a one-minor version upgrade on the Machine only', () => {
    const r = computeMachinePatches(objects('v1.33.0'), objects('v1.34.2'), DEFAULTS);
    expect(ops(r.patches.machinePatch)).toEqual([{ op: 'replace', path: '/spec/version', value: 'v1.34.2' }]);
    expect(r.patches.infrastructureMachinePatch).toBeUndefined();
    expect(r.patches.bootstrapConfigPatch).toBeUndefined();
    expect(r.declined).toEqual([]);
    // Assignable to the hook's response fields.
    const response: HookResult<'CanUpdateMachine'> = { status: 'Success', ...r.patches };
    expect(response.machinePatch?.patch).toBe(
      Buffer.from('[{"op":"replace","path":"/spec/version","value":"v1.34.2"}]').toString('base64'),
    );
  });

  it.each([
    ['v1.33.0', 'v1.33.5', true, ''],
    ['v1.33.0', 'v1.34.2', true, ''],
    ['v1.33.4', 'v1.34.0', true, ''],
    ['v1.33.0', 'v1.35.0', false, 'v1.33.0 → v1.35.0: more than one minor'],
    ['v1.33', 'v1.35', false, 'v1.33 → v1.35: more than one minor'],
    ['v1.34.2', 'v1.33.0', false, 'v1.34.2 → v1.33.0: downgrade'],
    ['v1.33.2', 'v1.33.1', false, 'v1.33.2 → v1.33.1: downgrade'],
    ['v1.33.0', 'v2.0.0', false, 'v1.33.0 → v2.0.0: major version change'],
    ['v1.33.0+a', 'v1.33.0+b', false, 'v1.33.0+a → v1.33.0+b: build metadata cannot be ordered'],
    ['v1.33.0', 'latest', false, 'desired version "latest" is not a Kubernetes version'],
  ])('version %s → %s in place: %s', (from, to, inPlace, reason) => {
    const r = computeMachinePatches(objects(from), objects(to), DEFAULTS);
    expect(versionChangeRefusal(from, to)).toBe(inPlace ? undefined : reason);
    if (inPlace) {
      expect(ops(r.patches.machinePatch)).toEqual([{ op: 'replace', path: '/spec/version', value: to }]);
      expect(r.declined).toEqual([]);
    } else {
      expect(r.patches).toEqual({});
      expect(r.declined).toEqual([{ object: 'machine', path: '/spec/version', reason }]);
    }
  });

  it('declares bootstrap file changes (replace, add, remove)', () => {
    const replace = computeMachinePatches(objects('v1.33.0', [FILE_A]), objects('v1.33.0', [FILE_A, FILE_B]), DEFAULTS);
    expect(replace.patches.machinePatch).toBeUndefined();
    expect(ops(replace.patches.bootstrapConfigPatch)).toEqual([
      { op: 'replace', path: '/spec/files', value: [FILE_A, FILE_B] },
    ]);

    const noFiles = objects('v1.33.0');
    delete (noFiles.bootstrapConfig?.spec as { files?: unknown }).files;
    const add = computeMachinePatches(noFiles, objects('v1.33.0', [FILE_A]), DEFAULTS);
    expect(ops(add.patches.bootstrapConfigPatch)).toEqual([{ op: 'add', path: '/spec/files', value: [FILE_A] }]);

    const remove = computeMachinePatches(objects('v1.33.0', [FILE_A]), noFiles, DEFAULTS);
    expect(ops(remove.patches.bootstrapConfigPatch)).toEqual([{ op: 'remove', path: '/spec/files' }]);
  });

  it('adds missing ancestors around the value and keeps sequential ops valid', () => {
    const p = policy({
      inPlaceAllowedPaths:
        'KubeadmConfig:/spec/joinConfiguration/nodeRegistration/kubeletExtraArgs,KubeadmConfig:/spec/joinConfiguration/nodeRegistration/taints',
    });
    const current = objects();
    (current.bootstrapConfig?.spec as Record<string, unknown>).joinConfiguration = undefined;
    const desired = objects();
    const nodeRegistration = (
      desired.bootstrapConfig?.spec as { joinConfiguration: { nodeRegistration: Record<string, unknown> } }
    ).joinConfiguration.nodeRegistration;
    nodeRegistration.taints = [];
    const r = computeMachinePatches(current, desired, p);
    const list = ops(r.patches.bootstrapConfigPatch);
    expect(list).toEqual([
      {
        op: 'add',
        path: '/spec/joinConfiguration',
        value: { nodeRegistration: { kubeletExtraArgs: nodeRegistration.kubeletExtraArgs } },
      },
      { op: 'add', path: '/spec/joinConfiguration/nodeRegistration/taints', value: [] },
    ]);
    same(applyPatch(current.bootstrapConfig, list), desired.bootstrapConfig);
  });

  it('leaves out differences outside the allow-list, and extends or shrinks it by setting', () => {
    const current = objects('v1.33.0', [FILE_A]);
    const desired = objects('v1.33.1', [FILE_B]);
    (desired.machine.spec as Record<string, unknown>).failureDomain = 'fd2';
    (desired.infrastructureMachine.spec as Record<string, unknown>).customImage = 'kindest/node:v1.33.1';

    const byDefault = computeMachinePatches(current, desired, DEFAULTS);
    expect(ops(byDefault.patches.machinePatch)).toEqual([{ op: 'replace', path: '/spec/version', value: 'v1.33.1' }]);
    expect(byDefault.patches.infrastructureMachinePatch).toBeUndefined();
    expect(byDefault.patches.bootstrapConfigPatch).toBeDefined();

    const extended = computeMachinePatches(
      current,
      desired,
      policy({ inPlaceAllowedPaths: 'defaults,Machine:/spec/failureDomain,DockerMachine:/spec/customImage' }),
    );
    expect(ops(extended.patches.machinePatch)).toEqual([
      { op: 'replace', path: '/spec/failureDomain', value: 'fd2' },
      { op: 'replace', path: '/spec/version', value: 'v1.33.1' },
    ]);
    expect(ops(extended.patches.infrastructureMachinePatch)).toEqual([
      { op: 'replace', path: '/spec/customImage', value: 'kindest/node:v1.33.1' },
    ]);

    const shrunk = computeMachinePatches(
      current,
      desired,
      policy({ inPlaceAllowedPaths: 'KubeadmConfig:/spec/files' }),
    );
    expect(Object.keys(shrunk.patches)).toEqual(['bootstrapConfigPatch']);
  });

  it('answers no patches when in-place updates are off', () => {
    const r = computeMachinePatches(
      objects('v1.33.0', [FILE_A]),
      objects('v1.33.1', [FILE_B]),
      policy({ inPlaceUpdates: 'false' }),
    );
    expect(r).toEqual({ patches: {}, declined: [] });
  });

  it('answers no patches when nothing differs', () => {
    expect(computeMachinePatches(objects(), objects(), DEFAULTS)).toEqual({ patches: {}, declined: [] });
  });

  it('keeps a refused version out of a broader allowed path', () => {
    const p = policy({ inPlaceAllowedPaths: 'Machine:/spec' });
    const desired = objects('v1.35.0');
    (desired.machine.spec as Record<string, unknown>).failureDomain = 'fd2';
    const r = computeMachinePatches(objects('v1.33.0'), desired, p);
    const list = ops(r.patches.machinePatch);
    expect(list).toHaveLength(1);
    expect(list[0]).toMatchObject({ op: 'replace', path: '/spec' });
    const patched = applyPatch(objects().machine, list) as { spec: Record<string, unknown> };
    expect(patched.spec.version).toBe('v1.33.0');
    expect(patched.spec.failureDomain).toBe('fd2');
    expect(r.declined).toEqual([
      { object: 'machine', path: '/spec/version', reason: 'v1.33.0 → v1.35.0: more than one minor' },
    ]);
  });

  it('skips paths that go through an array and objects whose kind changed', () => {
    const p = policy({ inPlaceAllowedPaths: 'KubeadmConfig:/spec/files/0/content,DockerMachine:/spec/customImage' });
    const desired = objects('v1.33.0', [{ ...FILE_A, content: 'changed' }]);
    const current = objects('v1.33.0', [FILE_A]);
    const infra = { ...infrastructureMachine(), kind: 'OtherMachine' };
    infra.spec.customImage = 'other';
    expect(computeMachinePatches(current, { ...desired, infrastructureMachine: infra }, p).patches).toEqual({});
  });

  it('handles ~0 and ~1 escaped members', () => {
    const p = policy({
      inPlaceAllowedPaths: 'DockerMachine:/spec/labels/node.kubernetes.io~1role,DockerMachine:/spec/a~0b',
    });
    const current = objects();
    const desired = objects();
    (current.infrastructureMachine.spec as Record<string, unknown>).labels = { 'node.kubernetes.io/role': 'old' };
    Object.assign(desired.infrastructureMachine.spec as Record<string, unknown>, {
      labels: { 'node.kubernetes.io/role': 'new' },
      'a~b': 1,
    });
    const list = ops(computeMachinePatches(current, desired, p).patches.infrastructureMachinePatch);
    expect(list).toEqual([
      { op: 'add', path: '/spec/a~0b', value: 1 },
      { op: 'replace', path: '/spec/labels/node.kubernetes.io~1role', value: 'new' },
    ]);
    same(applyPatch(current.infrastructureMachine, list), desired.infrastructureMachine);
  });

  it('omits the bootstrap patch when either side has no bootstrap object', () => {
    const desired = objects('v1.33.1', [FILE_A]);
    const current = { ...objects('v1.33.0'), bootstrapConfig: undefined };
    const r = computeMachinePatches(current, desired, DEFAULTS);
    expect(Object.keys(r.patches)).toEqual(['machinePatch']);
  });
});

// ---- CanUpdateMachineSet ---------------------------------------------------------------

function setObjects(version = 'v1.33.0', files: unknown[] = []) {
  return {
    machineSet: machineSet(version),
    infrastructureMachineTemplate: template('DockerMachineTemplate', 'infrastructure.cluster.x-k8s.io', {
      customImage: 'kindest/node',
    }),
    bootstrapConfigTemplate: template('KubeadmConfigTemplate', 'bootstrap.cluster.x-k8s.io', { files }),
  };
}

describe('computeMachineSetPatches', () => {
  it('declares template version and files under spec.template.spec', () => {
    const r = computeMachineSetPatches(setObjects('v1.33.0'), setObjects('v1.34.0', [FILE_A]), DEFAULTS);
    expect(ops(r.patches.machineSetPatch)).toEqual([
      { op: 'replace', path: '/spec/template/spec/version', value: 'v1.34.0' },
    ]);
    expect(ops(r.patches.bootstrapConfigTemplatePatch)).toEqual([
      { op: 'replace', path: '/spec/template/spec/files', value: [FILE_A] },
    ]);
    expect(r.patches.infrastructureMachineTemplatePatch).toBeUndefined();
    const response: HookResult<'CanUpdateMachineSet'> = { status: 'Success', ...r.patches };
    expect(response.status).toBe('Success');
  });

  it.each([
    ['v1.33.0', 'v1.35.0', 'v1.33.0 → v1.35.0: more than one minor'],
    ['v1.34.0', 'v1.33.9', 'v1.34.0 → v1.33.9: downgrade'],
  ])('refuses template version %s → %s', (from, to, reason) => {
    const r = computeMachineSetPatches(setObjects(from), setObjects(to), DEFAULTS);
    expect(r.patches).toEqual({});
    expect(r.declined).toEqual([{ object: 'machineSet', path: '/spec/template/spec/version', reason }]);
  });

  it('ignores Machine-kind paths and applies template-kind ones from the setting', () => {
    const p = policy({
      inPlaceAllowedPaths: 'Machine:/spec/version,DockerMachineTemplate:/spec/template/spec/customImage',
    });
    const desired = setObjects('v1.34.0');
    desired.infrastructureMachineTemplate.spec.template.spec = { customImage: 'kindest/node:v1.34.0' };
    const r = computeMachineSetPatches(setObjects(), desired, p);
    expect(Object.keys(r.patches)).toEqual(['infrastructureMachineTemplatePatch']);
    same(
      applyPatch(setObjects().infrastructureMachineTemplate, ops(r.patches.infrastructureMachineTemplatePatch)),
      desired.infrastructureMachineTemplate,
    );
  });

  it('answers no patches when in-place updates are off', () => {
    expect(computeMachineSetPatches(setObjects(), setObjects('v1.34.0'), policy({ inPlaceUpdates: 'false' }))).toEqual({
      patches: {},
      declined: [],
    });
  });
});

// ---- properties -------------------------------------------------------------------------

/** Rebuilds every object with its keys in an order chosen by `seed`. */
function permuteKeys(v: unknown, seed: number): unknown {
  if (Array.isArray(v)) return v.map((x, i) => permuteKeys(x, seed + i + 1));
  if (v === null || typeof v !== 'object') return v;
  const keys = Object.keys(v);
  let s = seed >>> 0;
  for (let i = keys.length - 1; i > 0; i--) {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    const j = s % (i + 1);
    [keys[i], keys[j]] = [keys[j] as string, keys[i] as string];
  }
  const out: Record<string, unknown> = {};
  for (const k of keys) out[k] = permuteKeys((v as Record<string, unknown>)[k], s + k.length);
  return out;
}

const MEMBER = fc.constantFrom('a', 'b', 'c/d', 'e~f', 'version');
const leaf = fc.oneof(fc.integer({ min: -3, max: 3 }), fc.constantFrom('x', 'y', ''), fc.boolean(), fc.constant(null));
const jsonTree: fc.Arbitrary<unknown> = fc.letrec<{ node: unknown }>((tie) => ({
  node: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    leaf,
    fc.array(tie('node'), { maxLength: 2 }),
    fc.dictionary(MEMBER, tie('node'), { maxKeys: 3 }),
  ),
})).node;
const specArb = fc.dictionary(MEMBER, jsonTree, { maxKeys: 4 });
const ALLOWED = ['/spec/a', '/spec/b/a', '/spec/b/c~1d', '/spec/e~0f/version/a', '/spec/c~1d'];

function bootstrap(spec: unknown) {
  return {
    apiVersion: 'bootstrap.cluster.x-k8s.io/v1beta2',
    kind: 'KubeadmConfig',
    metadata: { name: 'm', namespace: 'n' },
    spec,
  };
}

describe('properties', () => {
  it('key order of the input does not change a byte of the output', () => {
    const versions = fc.constantFrom('v1.33.0', 'v1.33.4', 'v1.34.2', 'v1.35.0', 'v1.32.9');
    const p = policy({
      inPlaceAllowedPaths: `defaults,Machine:/spec/failureDomain,${ALLOWED.map((a) => `KubeadmConfig:${a}`).join(',')}`,
    });
    fc.assert(
      fc.property(versions, versions, specArb, specArb, fc.nat(), fc.nat(), (v1, v2, s1, s2, seed1, seed2) => {
        const current: MachineObjects = { ...objects(v1), bootstrapConfig: bootstrap(s1) };
        const desired: MachineObjects = { ...objects(v2), bootstrapConfig: bootstrap(s2) };
        const a = computeMachinePatches(current, desired, p);
        const b = computeMachinePatches(
          permuteKeys(current, seed1) as MachineObjects,
          permuteKeys(desired, seed2) as MachineObjects,
          p,
        );
        expect(JSON.stringify(b)).toBe(JSON.stringify(a));
        expect(specHash(permuteKeys(desired, seed1) as MachineObjects)).toBe(specHash(desired));
      }),
      { numRuns: 300 },
    );
  });

  it('the patch applied to current gives desired at every allowed path it can address', () => {
    const p = policy({ inPlaceAllowedPaths: ALLOWED.map((a) => `KubeadmConfig:${a}`).join(',') });
    fc.assert(
      fc.property(specArb, specArb, (s1, s2) => {
        const current = { ...objects(), bootstrapConfig: bootstrap(s1) };
        const desired = { ...objects(), bootstrapConfig: bootstrap(s2) };
        const r = computeMachinePatches(current, desired, p);
        const patched = r.patches.bootstrapConfigPatch
          ? applyPatch(current.bootstrapConfig, ops(r.patches.bootstrapConfigPatch))
          : current.bootstrapConfig;
        for (const path of ALLOWED) {
          const tokens = parsePointer(path) ?? [];
          const c = resolve(current.bootstrapConfig, tokens);
          const d = resolve(desired.bootstrapConfig, tokens);
          if (c === BLOCKED || d === BLOCKED) continue;
          expect(canonicalJson(resolve(patched, tokens))).toBe(canonicalJson(d));
        }
      }),
      { numRuns: 300 },
    );
  });

  it('when desired differs only at allowed paths, CAPI sees current patched == desired', () => {
    const p = policy({ inPlaceAllowedPaths: ALLOWED.map((a) => `KubeadmConfig:${a}`).join(',') });
    const change = fc.option(jsonTree, { nil: undefined });
    fc.assert(
      fc.property(specArb, fc.array(change, { minLength: ALLOWED.length, maxLength: ALLOWED.length }), (s, changes) => {
        const current = bootstrap(s);
        const desired = structuredClone(current) as { spec: unknown };
        ALLOWED.forEach((path, i) => mutate(desired, parsePointer(path) ?? [], changes[i]));
        const r = computeMachinePatches(
          { ...objects(), bootstrapConfig: current },
          { ...objects(), bootstrapConfig: desired },
          p,
        );
        const patch = r.patches.bootstrapConfigPatch;
        // CAPI: apply to the whole object, copy back spec, compare with desired.
        const patched = patch ? (applyPatch(current, ops(patch)) as { spec: unknown }) : current;
        same({ ...current, spec: patched.spec }, desired);
      }),
      { numRuns: 300 },
    );
  });
});

const BLOCKED = Symbol('blocked');

function resolve(root: unknown, tokens: readonly string[]): unknown {
  let node = root;
  for (const t of tokens) {
    if (node === undefined) return undefined;
    if (node === null || typeof node !== 'object' || Array.isArray(node)) return BLOCKED;
    node = Object.hasOwn(node, t) ? (node as Record<string, unknown>)[t] : undefined;
  }
  return node;
}

/** Sets (or deletes, for undefined) the member at tokens when every ancestor is an object, creating missing ones. */
function mutate(root: unknown, tokens: readonly string[], value: unknown): void {
  let node = root as Record<string, unknown>;
  for (const t of tokens.slice(0, -1)) {
    const next = Object.hasOwn(node, t) ? node[t] : undefined;
    if (next === undefined) {
      if (value === undefined) return;
      node[t] = {};
    } else if (next === null || typeof next !== 'object' || Array.isArray(next)) {
      return;
    }
    node = node[t] as Record<string, unknown>;
  }
  const last = tokens[tokens.length - 1] ?? '';
  if (value === undefined) delete node[last];
  else node[last] = value;
}

// ---- spec hash ---------------------------------------------------------------------------

describe('specHash', () => {
  it('is 16 hex digits, stable, and tells desired specs apart', () => {
    const a = specHash(objects('v1.34.0', [FILE_A]));
    expect(a).toMatch(/^[0-9a-f]{16}$/);
    expect(specHash(objects('v1.34.0', [FILE_A]))).toBe(a);
    expect(specHash(objects('v1.34.1', [FILE_A]))).not.toBe(a);
    expect(specHash(objects('v1.34.0', [FILE_B]))).not.toBe(a);
    // Infrastructure and metadata are not part of it.
    const other = objects('v1.34.0', [FILE_A]);
    const withOtherInfra: MachineObjects = { ...other, infrastructureMachine: { spec: { x: 1 } } };
    expect(specHash(withOtherInfra)).toBe(a);
  });

  it('hashes the empty document like FNV-1a 64 of its canonical JSON', () => {
    // FNV-1a 64 of '{"bootstrapConfig":null,"machine":null}', computed independently.
    let h = 0xcbf29ce484222325n;
    for (const byte of Buffer.from('{"bootstrapConfig":null,"machine":null}')) {
      h = BigInt.asUintN(64, (h ^ BigInt(byte)) * 0x100000001b3n);
    }
    expect(specHash({ machine: {} })).toBe(h.toString(16).padStart(16, '0'));
  });
});

// Type check: the module's inputs accept the contract's request objects.
const _typeCheck = (m: HookRequest<'CanUpdateMachine'>, s: HookRequest<'CanUpdateMachineSet'>, p: InPlacePolicy) => [
  computeMachinePatches(m.current, m.desired, p),
  computeMachineSetPatches(s.current, s.desired, p),
];
