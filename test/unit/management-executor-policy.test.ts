// The management executor's policy: the setting is accepted, and CanUpdate* may claim only what
// both the ExtensionConfig allow-list and the node upgrader's declared paths cover.
import { describe, expect, it } from '@jest/globals';
import {
  allowedForExecutor,
  InPlaceSettingsError,
  parseDeclaredPaths,
  parseInPlacePolicy,
} from '../../src/domain/in-place-policy.ts';
import { resolveMachineUpdatePolicy } from '../../src/domain/machine-update-policy.ts';

const entries = (paths: readonly { kind: string; pointer: string }[]) => paths.map((p) => `${p.kind}:${p.pointer}`);
const cut = (settings: string | undefined, declared: string | undefined) =>
  entries(
    allowedForExecutor(
      parseInPlacePolicy(settings === undefined ? {} : { inPlaceAllowedPaths: settings }),
      'management',
      parseDeclaredPaths(declared, 'test'),
    ).allowedPaths,
  );

describe('nodeUpgradeExecutor=management', () => {
  it('is a valid executor; an unknown one names all three', () => {
    expect(resolveMachineUpdatePolicy({ nodeUpgradeExecutor: 'management' })).toMatchObject({
      ok: true,
      policy: { executor: 'management' },
    });
    expect(resolveMachineUpdatePolicy({ nodeUpgradeExecutor: 'trident' })).toEqual({
      ok: false,
      message: 'setting nodeUpgradeExecutor="trident": expected delegate, job or management',
    });
  });
});

describe('allowedForExecutor(management)', () => {
  it('an upgrader that declares nothing (annotation absent) applies the defaults', () => {
    expect(cut(undefined, undefined)).toEqual(cut(undefined, 'defaults'));
    expect(cut(undefined, '  ')).toEqual([
      'KubeadmConfig:/spec/files',
      'KubeadmConfigTemplate:/spec/template/spec/files',
      'Machine:/spec/version',
      'MachineSet:/spec/template/spec/version',
    ]);
  });

  it('keeps only what both lists cover: a narrower declaration narrows the settings', () => {
    expect(cut(undefined, 'KubeadmConfig:/spec/files')).toEqual(['KubeadmConfig:/spec/files']);
    // Settings wider than the declaration: the declared (deeper) path.
    expect(
      cut('KubeadmConfig:/spec,Machine:/spec/version', 'KubeadmConfig:/spec/files,DevMachine:/spec/image'),
    ).toEqual(['KubeadmConfig:/spec/files']);
    // A declaration wider than the settings: the settings' path.
    expect(cut('defaults,DevMachine:/spec/image', 'defaults,DevMachine:/spec')).toEqual([
      'DevMachine:/spec/image',
      'KubeadmConfig:/spec/files',
      'KubeadmConfigTemplate:/spec/template/spec/files',
      'Machine:/spec/version',
      'MachineSet:/spec/template/spec/version',
    ]);
    // Nothing in common: nothing in place.
    expect(cut('Machine:/spec/version', 'KubeadmConfig:/spec/files')).toEqual([]);
  });

  it('other executors ignore declarations: delegate keeps the settings, job its own paths', () => {
    const policy = parseInPlacePolicy({ inPlaceAllowedPaths: 'defaults,DevMachine:/spec/image' });
    const declared = parseDeclaredPaths('KubeadmConfig:/spec/files', 'test');
    expect(allowedForExecutor(policy, 'delegate', declared)).toBe(policy);
    expect(entries(allowedForExecutor(policy, 'job', declared).allowedPaths)).not.toContain('DevMachine:/spec/image');
  });

  it('a declaration that does not parse is an error naming where it came from', () => {
    expect(() => parseDeclaredPaths('Machine:/status/x', 'the annotation of Lease ns/x')).toThrow(
      new InPlaceSettingsError(
        'the annotation of Lease ns/x',
        'Machine:/status/x',
        'entry "Machine:/status/x": a Machine path must start with /spec (only that part is copied back)',
      ),
    );
  });
});
