// `make help` (the default goal) is where a new user looks for what they can run: it lists every
// target the Makefile has, and every `make X` the README names is one of them.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from '@jest/globals';

const ROOT = join(import.meta.dirname, '../..');

/** The Makefile's targets: `name:` at the start of a line (not .PHONY and friends). */
function makefileTargets(makefile: string): string[] {
  return [...makefile.matchAll(/^([a-z][a-z0-9-]*):/gm)].map((m) => m[1]!);
}

/** The targets the README tells a user to run: `make X …` inside backticks or a code block. */
function readmeTargets(readme: string): string[] {
  const code = [...readme.matchAll(/```[a-z]*\n([\s\S]*?)```|`([^`\n]+)`/g)].map((m) => m[1] ?? m[2] ?? '');
  const named = new Set<string>();
  for (const c of code) for (const m of c.matchAll(/(?:^|[\s(;&|"$])make ([a-z][a-z0-9-]*)/gm)) named.add(m[1]!);
  return [...named].sort();
}

/** The targets `make help` lists: lines `make <target>  …`. */
function helpTargets(help: string): string[] {
  return [...help.matchAll(/^make ([a-z][a-z0-9-]*)/gm)].map((m) => m[1]!);
}

describe('make help', () => {
  const makefile = readFileSync(join(ROOT, 'Makefile'), 'utf8');
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const help = execFileSync('make', ['--no-print-directory', '-s', 'help'], { cwd: ROOT, encoding: 'utf8' });

  it('is the default goal', () => {
    expect(execFileSync('make', ['--no-print-directory', '-s'], { cwd: ROOT, encoding: 'utf8' })).toBe(help);
  });

  it('lists every target of the Makefile', () => {
    const targets = makefileTargets(makefile).filter((t) => t !== 'help');
    expect(targets.length).toBeGreaterThan(10);
    expect(targets.filter((t) => !helpTargets(help).includes(t))).toEqual([]);
  });

  it('lists every target the README names, and the README names only targets that exist', () => {
    const named = readmeTargets(readme);
    expect(named).toEqual(expect.arrayContaining(['dev', 'test', 'test-unit', 'lint', 'env', 'release']));
    expect(named.filter((t) => !makefileTargets(makefile).includes(t))).toEqual([]);
    expect(named.filter((t) => t !== 'help' && !helpTargets(help).includes(t))).toEqual([]);
  });

  it('declares every target .PHONY, and nothing else', () => {
    const phony = /^\.PHONY:(.*)$/m.exec(makefile)?.[1]?.trim().split(/\s+/).sort();
    expect(phony).toEqual(makefileTargets(makefile).sort());
  });
});
