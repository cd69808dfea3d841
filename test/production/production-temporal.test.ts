// The production-shaped Temporal itself: four services as separate processes
// on PostgreSQL, with SQL visibility serving the extension's search attributes.
import { describe, expect, it } from '@jest/globals';
import { allSearchAttributeKeys } from '../../src/model/search-attributes.ts';
import { productionPids } from '../support/production-temporal.ts';
import { temporalCli } from '../support/temporal-cli.ts';

describe('the production-shaped Temporal', () => {
  it('runs frontend, history, matching and worker as separate processes on PostgreSQL', async () => {
    const pids = productionPids();
    const services = ['frontend', 'history', 'matching', 'worker', 'postgres'] as const;
    expect(new Set(services.map((s) => pids[s])).size).toBe(services.length);
    for (const s of services) expect(() => process.kill(pids[s], 0)).not.toThrow();
    const info = JSON.parse(await temporalCli(['operator', 'cluster', 'describe', '--output', 'json'])) as {
      persistenceStore?: string;
      visibilityStore?: string;
    };
    expect(info.persistenceStore).toBe('postgres12');
    expect(info.visibilityStore).toBe('postgres12');
  });

  it('has the extension search attributes, and a visibility query on them is accepted', async () => {
    const listed = await temporalCli(['operator', 'search-attribute', 'list', '--output', 'json']);
    for (const key of allSearchAttributeKeys) expect(listed).toContain(key.name);
    const count = await temporalCli(['workflow', 'count', '--query', "CapiClusterName = 'nothing-here'"]);
    expect(count).toMatch(/Total: 0/);
  });
});
