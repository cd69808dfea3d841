// The workflow type names the api, CLIs and gauges use are the names the worker registers: the
// functions src/workflows/index.ts exports. A rename on one side only would start workflows no
// worker runs, or query for types no run has.
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import * as workflows from '../../src/workflows/index.ts';
import { workflowTypes } from '../../src/model/workflow-types.ts';

// Checked by the compiler as well: every name is an export of the workflow bundle's entry point.
const names: readonly (keyof typeof workflows)[] = Object.values(workflowTypes);

describe('workflowTypes', () => {
  it('names exactly the workflows the worker serves', () => {
    expect([...names].sort()).toEqual(Object.keys(workflows).sort());
    for (const name of names) expect(typeof workflows[name]).toBe('function');
  });

  it('is spelled as a string only in model/ (a copy elsewhere drifts from the constant on a rename)', () => {
    const quoted = new RegExp(`['"\`](${names.join('|')})['"\`]`);
    const found: string[] = [];
    const walk = (dir: string): void => {
      for (const entry of readdirSync(dir, { withFileTypes: true })) {
        const path = join(dir, entry.name);
        if (entry.isDirectory()) {
          if (path !== join('src', 'model')) walk(path);
        } else if (path.endsWith('.ts')) {
          readFileSync(path, 'utf8')
            .split('\n')
            .forEach((line, i) => {
              if (quoted.test(line)) found.push(`${path}:${i + 1}: ${line.trim()}`);
            });
        }
      }
    };
    walk('src');
    expect(found).toEqual([]);
  });
});
