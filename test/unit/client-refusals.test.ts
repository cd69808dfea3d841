// The pieces of the hook server's caller checks that need no socket: the log
// budget (a scanner cannot flood the log), the allow-list match and the 403 message.
// test/e2e/hook-server.test.ts drives them over real TLS.
import { describe, expect, it } from '@jest/globals';
import { subjectAllowed } from '../../src/api/http/caller.ts';
import { LogBudget, notAllowedMessage } from '../../src/api/http/client-refusals.ts';

describe('LogBudget', () => {
  it('admits a fixed number of lines per window, then reports how many it held back', () => {
    let now = 0;
    const budget = new LogBudget(3, 60_000, () => now);
    const first = Array.from({ length: 1000 }, () => budget.take());
    expect(first.filter((t) => t.log)).toHaveLength(3);
    expect(first.every((t) => t.heldBack === 0)).toBe(true);
    now = 59_999;
    expect(budget.take()).toEqual({ log: false, heldBack: 0 });
    now = 60_000;
    expect(budget.take()).toEqual({ log: true, heldBack: 998 });
    expect(budget.take()).toEqual({ log: true, heldBack: 0 });
  });
});

describe('the client subject allow-list', () => {
  const allowed = { commonNames: ['capi-controller-manager'], dnsNames: ['kcp.capi.svc'] };

  it('matches a CN entry against common names and a DNS entry against DNS names, exactly', () => {
    expect(subjectAllowed({ commonNames: ['capi-controller-manager'], dnsNames: [] }, allowed)).toBe(true);
    expect(subjectAllowed({ commonNames: ['x'], dnsNames: ['y', 'kcp.capi.svc'] }, allowed)).toBe(true);
    expect(subjectAllowed({ commonNames: ['kcp.capi.svc'], dnsNames: [] }, allowed)).toBe(false);
    expect(subjectAllowed({ commonNames: [], dnsNames: ['capi-controller-manager'] }, allowed)).toBe(false);
    expect(subjectAllowed({ commonNames: ['CAPI-controller-manager'], dnsNames: [] }, allowed)).toBe(false);
  });

  it('answers a refused subject with a message that names it and nothing else', () => {
    expect(notAllowedMessage('tenant')).toBe(
      'client certificate "tenant" is not allowed to call this extension (HOOK_CLIENT_ALLOWED_SUBJECTS)',
    );
    expect(notAllowedMessage('x'.repeat(1000))).toHaveLength(notAllowedMessage('x'.repeat(128)).length);
    expect(notAllowedMessage(undefined)).toContain('(no CN or DNS name)');
  });
});
