// Just enough Markdown for the documentation tests: the links a page makes and
// the anchors its headings get, read the way GitHub renders them (code is not
// Markdown, so links and headings inside code spans or fenced blocks do not count).

const FENCE = /^\s{0,3}(```|~~~)/;

/** The page with fenced blocks blanked (lines kept, so line numbers stay right). */
export function withoutFencedBlocks(text: string): string[] {
  let fenced = false;
  return text.split('\n').map((line) => {
    if (FENCE.test(line)) {
      fenced = !fenced;
      return '';
    }
    return fenced ? '' : line;
  });
}

/** The page's prose: fenced blocks blanked and code spans (which may wrap lines) removed, lines kept. */
export function proseLines(text: string): string[] {
  return withoutFencedBlocks(text)
    .join('\n')
    .replace(/(`+)[\s\S]*?\1/g, (span) => span.replace(/[^\n]/g, ''))
    .split('\n');
}

export interface MarkdownLink {
  target: string;
  line: number;
}

/** Inline links and images, reference definitions and autolinks, outside code. */
export function markdownLinks(text: string): MarkdownLink[] {
  const found: MarkdownLink[] = [];
  proseLines(text).forEach((line, i) => {
    const inline = /\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g;
    const autolink = /<([a-z][a-z0-9+.-]*:[^>\s]+)>/gi;
    for (const m of line.matchAll(inline)) found.push({ target: m[1]!, line: i + 1 });
    for (const m of line.matchAll(autolink)) found.push({ target: m[1]!, line: i + 1 });
    const definition = /^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)/.exec(line);
    if (definition) found.push({ target: definition[1]!, line: i + 1 });
    // GitHub links bare URLs too.
    const rest = line.replace(inline, '').replace(autolink, '');
    for (const m of rest.matchAll(/(?<!\w)(https?:\/\/[^\s)>\]]+)/g))
      found.push({ target: m[1]!.replace(/[.,;:!?]+$/, ''), line: i + 1 });
  });
  return found;
}

/** GitHub's anchor for a heading's text: lower case, punctuation dropped, spaces to hyphens. */
export function headingSlug(heading: string): string {
  return heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/<[^>]+>/g, '')
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
    .replace(/ /g, '-');
}

/** Every anchor the page's headings define (a repeated heading gets `-1`, `-2`, … as on GitHub). */
export function headingAnchors(text: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const line of withoutFencedBlocks(text)) {
    const m = /^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!m) continue;
    const slug = headingSlug(m[1]!);
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    anchors.add(n === 0 ? slug : `${slug}-${n}`);
  }
  return anchors;
}
