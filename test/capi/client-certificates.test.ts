// Real CAPI calls the extension with client certificates: the tier starts core
// CAPI and KCP with --runtime-extension-client-cert-file / -key-file (the test
// PKI's certificates, subjects as config/default issues them) against an
// extension that requires one (TLS_CLIENT_CA_FILE, HOOK_CLIENT_ALLOWED_SUBJECTS).
// Every other test in this tier is such a call; here, that CAPI discovered the
// extension that way, and that a call without a certificate is refused.
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from '@jest/globals';
import { defaultHandlerName } from '../../src/api/hooks/contract.ts';
import { hookPath } from '../../src/api/hooks/hook-route.ts';
import { callHook } from '../../support/capi-client.ts';
import { CapiTierClient, type Condition } from '../support/capi-cluster.ts';
import { sampleRequest } from '../../support/capi-fixtures.ts';
import { requireEnv } from '../support/services.ts';

const capi = new CapiTierClient();
afterAll(async () => await capi.close());

interface ManagerState {
  pid: number;
}

describe('CAPI authenticates to the extension with a client certificate', () => {
  it('runs core CAPI and KCP with their client certificates, and CAPI discovered the extension with them', async () => {
    const state = JSON.parse(readFileSync(requireEnv('CAPI_TIER_STATE'), 'utf8')) as {
      managers: Record<string, ManagerState>;
    };
    for (const manager of ['capi', 'kcp']) {
      const args = readFileSync(`/proc/${state.managers[manager]!.pid}/cmdline`, 'utf8').split('\0');
      expect(args).toEqual(
        expect.arrayContaining([
          expect.stringMatching(new RegExp(`^--runtime-extension-client-cert-file=.*/${manager}/tls\\.crt$`)),
          expect.stringMatching(new RegExp(`^--runtime-extension-client-key-file=.*/${manager}/tls\\.key$`)),
        ]),
      );
    }
    const ext = JSON.parse(
      await capi.kubectl(['get', 'extensionconfig', requireEnv('CAPI_TIER_EXTENSION_NAME'), '-o', 'json']),
    ) as { status?: { conditions?: Condition[]; handlers?: unknown[] } };
    expect(ext.status?.conditions?.find((c) => c.type === 'Discovered')?.status).toBe('True');
    expect(ext.status?.handlers?.length).toBeGreaterThan(0);
  });

  it('refuses a call without a client certificate in the TLS handshake, and starts nothing', async () => {
    const namespace = `no-cert-${randomUUID().slice(0, 8)}`;
    const body = sampleRequest('UpdateMachine');
    body.desired.machine = {
      ...body.desired.machine,
      metadata: { ...body.desired.machine.metadata, namespace },
    };
    await expect(
      callHook(requireEnv('CAPI_TIER_HOOK_URL'), hookPath('UpdateMachine', defaultHandlerName('UpdateMachine')), body, {
        ca: readFileSync(requireEnv('CAPI_TIER_HOOK_CA_FILE'), 'utf8'),
        timeout: '10s',
      }),
    ).rejects.toMatchObject({ code: 'ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED' });
    const client = await capi.temporal();
    const started: string[] = [];
    for await (const wf of client.workflow.list({ query: `WorkflowId STARTS_WITH "machine-update/${namespace}/"` }))
      started.push(wf.workflowId);
    expect(started).toEqual([]);
    const log = readFileSync(requireEnv('CAPI_TIER_EXTENSION_LOG'), 'utf8');
    expect(log).not.toContain(namespace);
    expect(log).toMatch(/"reason":"no_certificate".*"msg":"hook client refused in the TLS handshake"/);
  });
});
