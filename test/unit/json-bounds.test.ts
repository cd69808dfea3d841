import { describe, expect, it } from '@jest/globals';
import { measureJson } from '../../src/domain/json-bounds.ts';

const unbounded = { maxItems: Number.MAX_SAFE_INTEGER, maxDepth: Number.MAX_SAFE_INTEGER };
const measure = (text: string, bounds = unbounded) => measureJson(Buffer.from(text, 'utf8'), bounds);

describe('measureJson', () => {
  it('counts one item per object or array, per member (its colon) and per separating comma', () => {
    expect(measure('{}')).toEqual({ items: 1, depth: 1 });
    expect(measure('[1,2,3]')).toEqual({ items: 3, depth: 1 });
    expect(measure('{"a":1,"b":[{}, {}]}')).toEqual({ items: 8, depth: 3 });
    expect(measure('"just a string"')).toEqual({ items: 0, depth: 0 });
    expect(measure('[{},{},{}]').items).toBe(6);
  });

  it('does not count what is inside strings, escaped quotes and backslashes included', () => {
    expect(measure('{"k:{[,":"v,]}:["}')).toEqual({ items: 2, depth: 1 });
    expect(measure(String.raw`["a\"[,{", "b\\", {}]`)).toEqual({ items: 4, depth: 2 });
    expect(measure(String.raw`["\\\"]"]`)).toEqual({ items: 1, depth: 1 });
  });

  it('reads multi-byte UTF-8 text as text', () => {
    expect(measure('{"ключ":"значение, [да]","🙂":["é","字"]}')).toEqual({ items: 6, depth: 2 });
  });

  it('stops at the first bound passed and names it', () => {
    const dense = Buffer.from(`[${'{},'.repeat(1_000_000)}{}]`);
    expect(measureJson(dense, { maxItems: 1000, maxDepth: 100 })).toEqual({
      items: 1001,
      depth: 2,
      exceeded: 'maxItems',
    });
    const deep = '['.repeat(101) + ']'.repeat(101);
    expect(measure(deep, { maxItems: 1000, maxDepth: 100 })).toEqual({ items: 101, depth: 101, exceeded: 'maxDepth' });
    expect(measure('['.repeat(100) + ']'.repeat(100), { maxItems: 1000, maxDepth: 100 })).toEqual({
      items: 100,
      depth: 100,
    });
    expect(measure(`[${'1,'.repeat(999)}1]`, { maxItems: 1000, maxDepth: 100 })).toEqual({ items: 1000, depth: 1 });
  });

  it('measures anything, valid JSON or not (the parse judges that)', () => {
    expect(measure(']]]')).toEqual({ items: 0, depth: 0 });
    expect(measure('["unterminated')).toEqual({ items: 1, depth: 1 });
  });
});
