// The documentation lives in the repository and a user who clones it has all of it:
// every link in README.md and docs/ resolves to a file here (and to a heading of that
// page when it names one), no link leaves the repository, every file a page names in
// code exists, every docs/ page is found from the README, and the README stays short.
import { existsSync, readdirSync, readFileSync, realpathSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { headingAnchors, markdownLinks, proseLines } from '../support/markdown.ts';

const ROOT = resolve('.');
const README_MAX_LINES = 250;

const pages = [
  'README.md',
  ...readdirSync('docs')
    .filter((f) => f.endsWith('.md'))
    .map((f) => join('docs', f)),
];
const text = (page: string): string => readFileSync(join(ROOT, page), 'utf8');

const anchorCache = new Map<string, Set<string>>();
const anchorsOf = (page: string): Set<string> => {
  let anchors = anchorCache.get(page);
  if (!anchors) anchorCache.set(page, (anchors = headingAnchors(text(page))));
  return anchors;
};

/** Why a link of `page` does not resolve inside the repository, or undefined when it does. */
function problem(page: string, target: string): string | undefined {
  if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('//')) return 'leaves the repository';
  const hash = target.indexOf('#');
  const path = decodeURIComponent(hash < 0 ? target : target.slice(0, hash));
  const anchor = hash < 0 ? undefined : decodeURIComponent(target.slice(hash + 1));
  const file = path === '' ? join(ROOT, page) : resolve(ROOT, dirname(page), path);
  const inRepo = relative(ROOT, file);
  if (inRepo.startsWith('..') || inRepo.split(sep)[0] === 'node_modules') return 'leaves the repository';
  if (!existsSync(file)) return 'no such file';
  if (relative(ROOT, realpathSync(file)).startsWith('..')) return 'leaves the repository (symbolic link)';
  if (anchor !== undefined && file.endsWith('.md') && !anchorsOf(inRepo).has(anchor)) return 'no such heading';
  return undefined;
}

describe('README.md and docs/', () => {
  it('has pages to check', () => {
    expect(pages).toContain('docs/architecture.md');
    expect(pages).toContain('docs/configuration.md');
    expect(pages.length).toBeGreaterThan(10);
  });

  it.each(pages)('%s: every link resolves to a file (and heading) inside the repository', (page) => {
    const broken = markdownLinks(text(page))
      .map((link) => ({ ...link, problem: problem(page, link.target) }))
      .filter((link) => link.problem !== undefined)
      .map((link) => `${page}:${link.line}: ${link.target}: ${link.problem}`);
    expect(broken).toEqual([]);
  });

  it.each(pages)('%s: names no design file from outside the repository', (page) => {
    const lines = text(page)
      .split('\n')
      .map((line, i) => ({ line, n: i + 1 }))
      .filter(({ line }) => /DESIGN\.md|\.\.\/shared\//.test(line))
      .map(({ line, n }) => `${page}:${n}: ${line.trim()}`);
    expect(lines).toEqual([]);
  });

  it.each(pages)('%s: every repository path it names in code exists', (page) => {
    // `src/api/hooks/contract.ts`, `config/default`, `scripts/capi.sh up`: the first word of a code span under a
    // top-level folder; patterns (`<family>`, `*`, `…`) are not paths.
    const missing = [...text(page).matchAll(/`((?:src|test|bench|scripts|config|docs|tools)\/[^`\s]*)/g)]
      .map((m) => m[1]!.replace(/:\d+$/, ''))
      .filter((path) => !/[<>*…$]/.test(path) && !existsSync(join(ROOT, path)));
    expect(missing).toEqual([]);
  });

  it(`keeps README.md to at most ${README_MAX_LINES} lines`, () => {
    expect(text('README.md').trimEnd().split('\n').length).toBeLessThanOrEqual(README_MAX_LINES);
  });

  it('links every docs/ page from the README', () => {
    const linked = new Set(
      markdownLinks(text('README.md')).map((link) => relative(ROOT, resolve(ROOT, link.target.split('#')[0]!))),
    );
    const unlinked = pages.filter((page) => page !== 'README.md' && !linked.has(page));
    expect(unlinked).toEqual([]);
  });
});

describe('the Markdown reader the checks above rely on', () => {
  const page = [
    '# Title',
    'See [a](docs/a.md#x), ![i](img.png), <https://example.com>, and https://example.org/x.',
    '`[not a link](nowhere.md)` and `https://in-code.example`',
    '```sh',
    '# not a heading [nor a link](nowhere.md)',
    '```',
    '## Settings (`worker`)',
    '## Settings (`worker`)',
    '[ref]: ../outside.md',
  ].join('\n');

  it('finds links outside code only, with their lines', () => {
    expect(markdownLinks(page)).toEqual([
      { target: 'docs/a.md#x', line: 2 },
      { target: 'img.png', line: 2 },
      { target: 'https://example.com', line: 2 },
      { target: 'https://example.org/x', line: 2 },
      { target: '../outside.md', line: 9 },
    ]);
    expect(proseLines(page)[2]).toBe(' and ');
  });

  it("makes GitHub's anchors, numbering repeated headings", () => {
    expect([...headingAnchors(page)]).toEqual(['title', 'settings-worker', 'settings-worker-1']);
  });

  it('refuses links that leave the repository or name nothing', () => {
    expect(problem('README.md', 'https://example.com')).toBe('leaves the repository');
    expect(problem('README.md', '../shared/DESIGN.md')).toBe('leaves the repository');
    expect(problem('docs/security.md', '../../x.md')).toBe('leaves the repository');
    expect(problem('README.md', 'docs/no-such-page.md')).toBe('no such file');
    expect(problem('README.md', 'docs/architecture.md#no-such-heading')).toBe('no such heading');
    expect(problem('docs/security.md', '../src/config/index.ts')).toBeUndefined();
    expect(problem('README.md', '#the-two-commands')).toBeUndefined();
  });
});
