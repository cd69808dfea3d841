// Size limits for src/: no function longer than 80 lines (nested ones included, each measured by
// its own line span) and no file longer than 400 lines. A long function does many jobs a reader
// has to hold at once; a long file holds more than one thing you can name.
//
// Not every offender can be fixed at once, so this is a ratchet: KNOWN lists today's offenders with
// their line counts. The test fails on a new offender, on a listed one that grew, and on a listed
// one that is no longer an offender (delete its entry): the list only ever shrinks. A listed one
// that shrank may have its count lowered. SIZES_LIST=1 prints today's list in KNOWN's form.
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import ts from 'typescript';

const MAX_FUNCTION_LINES = 80;
const MAX_FILE_LINES = 400;

/**
 * Today's offenders, `file` for a file, `file:name` for a function (name: enclosing functions
 * joined by '/', an unnamed function by what it is passed to), with their line counts.
 */
const KNOWN: Readonly<Record<string, number>> = {};

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith('.ts'))
    .map((e) => relative('.', join(e.parentPath, e.name)).split('\\').join('/'))
    .sort();
}

type FunctionNode =
  | ts.FunctionDeclaration
  | ts.MethodDeclaration
  | ts.ArrowFunction
  | ts.FunctionExpression
  | ts.ConstructorDeclaration
  | ts.GetAccessorDeclaration
  | ts.SetAccessorDeclaration;

function isFunction(node: ts.Node): node is FunctionNode {
  return (
    ts.isFunctionDeclaration(node) ||
    ts.isMethodDeclaration(node) ||
    ts.isArrowFunction(node) ||
    ts.isFunctionExpression(node) ||
    ts.isConstructorDeclaration(node) ||
    ts.isGetAccessorDeclaration(node) ||
    ts.isSetAccessorDeclaration(node)
  );
}

function propertyName(name: ts.PropertyName, file: ts.SourceFile): string {
  return ts.isIdentifier(name) || ts.isStringLiteral(name) || ts.isPrivateIdentifier(name)
    ? name.text
    : name.getText(file);
}

/** A stable name for a function: its own, its variable's or property's, or what it is passed to. */
function nameOf(node: FunctionNode, file: ts.SourceFile): string {
  if (ts.isConstructorDeclaration(node)) return 'constructor';
  if (node.name) return propertyName(node.name, file);
  const parent = node.parent;
  if (ts.isVariableDeclaration(parent) && ts.isIdentifier(parent.name)) return parent.name.text;
  if (ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent)) {
    return propertyName(parent.name, file);
  }
  if (ts.isCallExpression(parent) || ts.isNewExpression(parent)) {
    const callee = parent.expression.getText(file).replace(/\s+/g, '');
    return `${callee.length > 40 ? callee.slice(-40) : callee}()`;
  }
  return '<anonymous>';
}

function linesOf(node: ts.Node, file: ts.SourceFile): number {
  const start = file.getLineAndCharacterOfPosition(node.getStart(file)).line;
  const end = file.getLineAndCharacterOfPosition(node.getEnd()).line;
  return end - start + 1;
}

/** Every offender in src/ with its line count. */
function measure(): Map<string, number> {
  const found = new Map<string, number>();
  for (const path of sourceFiles('src')) {
    const text = readFileSync(path, 'utf8');
    const fileLines = text.endsWith('\n') ? text.split('\n').length - 1 : text.split('\n').length;
    if (fileLines > MAX_FILE_LINES) found.set(path, fileLines);
    const file = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true);
    const visit = (node: ts.Node, outer: string): void => {
      let inner = outer;
      if (isFunction(node)) {
        const base = `${path}:${outer ? `${outer}/` : ''}${nameOf(node, file)}`;
        let key = base;
        for (let n = 2; found.has(key); n++) key = `${base}#${n}`;
        inner = key.slice(path.length + 1);
        const lines = linesOf(node, file);
        if (lines > MAX_FUNCTION_LINES) found.set(key, lines);
      }
      ts.forEachChild(node, (child) => visit(child, inner));
    };
    visit(file, '');
  }
  return found;
}

describe('sizes of src/', () => {
  const found = measure();
  const functions = [...found.keys()].filter((k) => k.includes(':')).length;
  const files = found.size - functions;
  const known = Object.keys(KNOWN);
  process.stdout.write(
    `sizes: ${functions} functions over ${MAX_FUNCTION_LINES} lines, ${files} files over ${MAX_FILE_LINES} lines ` +
      `(ratchet lists ${known.filter((k) => k.includes(':')).length} and ${known.filter((k) => !k.includes(':')).length})\n`,
  );

  if (process.env['SIZES_LIST']) {
    const lines = [...found].map(([key, n]) => `  '${key}': ${n},\n`).join('');
    process.stdout.write(`const KNOWN = {\n${lines}};\n`);
  }

  it(`has no new function over ${MAX_FUNCTION_LINES} lines and no new file over ${MAX_FILE_LINES}`, () => {
    const fresh = [...found].filter(([key]) => !(key in KNOWN)).map(([key, n]) => `${key} (${n})`);
    expect(fresh).toEqual([]);
  });

  it('has no listed offender grown', () => {
    const grown = [...found]
      .filter(([key, n]) => key in KNOWN && n > (KNOWN[key] ?? 0))
      .map(([key, n]) => `${key}: ${KNOWN[key]} -> ${n}`);
    expect(grown).toEqual([]);
  });

  it('lists only offenders (delete an entry once it is fixed)', () => {
    const fixed = known.filter((key) => !found.has(key)).map((key) => `${key} (listed ${KNOWN[key]})`);
    expect(fixed).toEqual([]);
  });
});
