// Small string helpers that scan by index where a regular expression would
// backtrack (`/x+$/` tries every position of a run of x that is not at the
// end: quadratic in the run). Pure: no I/O.

/** `text` without the run of `char` (one character) at its end. */
export function trimTrailing(text: string, char: string): string {
  const code = char.charCodeAt(0);
  let end = text.length;
  while (end > 0 && text.charCodeAt(end - 1) === code) end--;
  return text.slice(0, end);
}

/** At most `max` characters (code points), with an ellipsis when cut. */
export function truncate(text: string, max: number): string {
  const chars = [...text];
  return chars.length <= max ? text : `${chars.slice(0, max - 1).join('')}…`;
}
