import { randomUUID } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import { Connection } from '@temporalio/client';
import { msToTs } from '@temporalio/common/lib/time.js';
import { ensureSearchAttributes } from '../../src/temporal-setup.ts';
import { allSearchAttributeKeys } from '../../src/model/search-attributes.ts';
import { requireEnv } from '../support/services.ts';

describe('ensureSearchAttributes', () => {
  it('registers the missing attributes on a fresh namespace once, then finds them all', async () => {
    const connection = await Connection.connect({ address: requireEnv('TEMPORAL_ADDRESS') });
    try {
      const namespace = `sa-${randomUUID().slice(0, 8)}`;
      await connection.workflowService.registerNamespace({
        namespace,
        workflowExecutionRetentionPeriod: msToTs('1 day'),
      });
      // Namespace registration propagates asynchronously on the server.
      let first: { added: string[] } | undefined;
      for (let i = 0; i < 50 && !first; i++) {
        first = await ensureSearchAttributes(connection, namespace).catch(async () => {
          await new Promise((r) => setTimeout(r, 200));
          return undefined;
        });
      }
      expect(first?.added.sort()).toEqual(allSearchAttributeKeys.map((k) => k.name).sort());
      expect(await ensureSearchAttributes(connection, namespace)).toEqual({ added: [] });
      const listed = await connection.operatorService.listSearchAttributes({ namespace });
      for (const key of allSearchAttributeKeys) expect(Object.keys(listed.customAttributes ?? {})).toContain(key.name);
    } finally {
      await connection.close();
    }
  });
});
