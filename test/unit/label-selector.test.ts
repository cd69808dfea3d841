// Label selectors in their string form, as k8s.io/apimachinery/pkg/labels parses and matches them,
// except that an empty selector selects nothing (a blank policy never changes a drain).
import { describe, expect, it } from '@jest/globals';
import {
  LABEL_SELECTOR_MAX_LENGTH,
  namesAPresentLabel,
  parseLabelSelector,
  selectorMatches,
} from '../../src/domain/label-selector.ts';

function parsed(text: string) {
  const r = parseLabelSelector(text);
  if (!r.ok) throw new Error(`${JSON.stringify(text)}: ${r.message}`);
  return r.requirements;
}

const matches = (text: string, labels: Record<string, string>) => selectorMatches(parsed(text), labels);

describe('parseLabelSelector', () => {
  it('reads every operator of the Kubernetes syntax', () => {
    expect(parsed('a=b, c==d,e!=f, g in (h, i), j notin (k), l, !m, n>1, o<2')).toEqual([
      { key: 'a', operator: '=', values: ['b'] },
      { key: 'c', operator: '==', values: ['d'] },
      { key: 'e', operator: '!=', values: ['f'] },
      { key: 'g', operator: 'in', values: ['h', 'i'] },
      { key: 'j', operator: 'notin', values: ['k'] },
      { key: 'l', operator: 'exists', values: [] },
      { key: 'm', operator: '!', values: [] },
      { key: 'n', operator: '>', values: ['1'] },
      { key: 'o', operator: '<', values: ['2'] },
    ]);
  });

  it('reads prefixed keys, empty values, and in/notin as values inside a list', () => {
    expect(parsed('example.com/tier=,x in (in,notin,),y in ()')).toEqual([
      { key: 'example.com/tier', operator: '=', values: [''] },
      { key: 'x', operator: 'in', values: ['', 'in', 'notin'] },
      { key: 'y', operator: 'in', values: [''] },
    ]);
  });

  it('reads a blank selector as no requirement', () => {
    expect(parsed('')).toEqual([]);
    expect(parsed('  \t')).toEqual([]);
  });

  it.each([
    ['a=b,', 'expected a requirement after ","'],
    [',a', 'expected a label key, found ","'],
    ['a b', 'expected an operator (=, ==, !=, in, notin, >, <) after a, found "b"'],
    ['a in b', 'expected "(" after a in, found "b"'],
    ['a in (b', 'expected a value, "," or ")" in the values of a, found the end'],
    ['a in (b c)', 'expected a value, "," or ")" in the values of a, found "c"'],
    ['!a=b', 'expected "," or the end after !a, found "="'],
    ['a=b=c', 'expected "," or the end after the requirement on a, found "="'],
    ['a>b', 'a>b: the value must be an integer'],
    ['-a=b', 'label key "-a": the name must be 1-63 characters, alphanumeric at both ends, with - _ . inside'],
    ['Example.com/a=b', 'label key "Example.com/a": the prefix must be a DNS subdomain'],
    ['/a', 'label key "/a": the prefix must be a DNS subdomain'],
    [
      `a=${'v'.repeat(64)}`,
      `label value "${'v'.repeat(64)}" of a: at most 63 characters, alphanumeric at both ends, with - _ . inside`,
    ],
    ['a=b$', 'label value "b$" of a: at most 63 characters, alphanumeric at both ends, with - _ . inside'],
  ])('refuses %j: %s', (text, message) => {
    expect(parseLabelSelector(text)).toEqual({ ok: false, message });
  });

  it('refuses a selector longer than the bound before reading it', () => {
    const long = `a in (${Array.from({ length: 400 }, (_, i) => `v${i}`).join(',')})`;
    expect(long.length).toBeGreaterThan(LABEL_SELECTOR_MAX_LENGTH);
    expect(parseLabelSelector(long)).toEqual({
      ok: false,
      message: `longer than ${LABEL_SELECTOR_MAX_LENGTH} characters`,
    });
  });
});

describe('selectorMatches', () => {
  const kubeApiserver = { component: 'kube-apiserver', tier: 'control-plane' };

  it('matches as Kubernetes does', () => {
    expect(matches('tier=control-plane', kubeApiserver)).toBe(true);
    expect(matches('tier=control-plane,component in (etcd,kube-apiserver)', kubeApiserver)).toBe(true);
    expect(matches('tier=control-plane,component in (etcd)', kubeApiserver)).toBe(false);
    expect(matches('tier!=control-plane', {})).toBe(true);
    expect(matches('tier notin (control-plane)', { tier: 'node' })).toBe(true);
    expect(matches('tier notin (control-plane)', kubeApiserver)).toBe(false);
    expect(matches('tier', kubeApiserver)).toBe(true);
    expect(matches('!tier', kubeApiserver)).toBe(false);
    expect(matches('tier=', { tier: '' })).toBe(true);
    expect(matches('tier=', {})).toBe(false);
    expect(matches('n>10', { n: '11' })).toBe(true);
    expect(matches('n>10', { n: '10' })).toBe(false);
    expect(matches('n<10', { n: 'x' })).toBe(false);
    expect(matches('n<10', {})).toBe(false);
  });

  it('an empty selector selects nothing, unlike apimachinery Parse("")', () => {
    expect(selectorMatches([], kubeApiserver)).toBe(false);
    expect(selectorMatches([], {})).toBe(false);
  });

  it('reads inherited object keys as absent labels', () => {
    expect(matches('constructor', {})).toBe(false);
    expect(matches('!toString', {})).toBe(true);
  });
});

describe('namesAPresentLabel', () => {
  it('is false only for selectors made of !=, notin and !key', () => {
    expect(namesAPresentLabel(parsed('a!=b,c notin (d),!e'))).toBe(false);
    expect(namesAPresentLabel(parsed('a!=b,c'))).toBe(true);
    expect(namesAPresentLabel(parsed('a in (b)'))).toBe(true);
  });
});
