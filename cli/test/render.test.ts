/**
 * Tables (cli-table3, widths by string-width): columns line up on the screen for wide characters and colour codes,
 * which padding by string length got wrong (a CJK character or an emoji takes two columns, a colour code none).
 */
import stringWidth from 'string-width';
import { describe, expect, it } from 'vitest';
import { makeStyle } from '../src/style.js';
import { renderTable, twoColumns } from '../src/render.js';

/** The screen column where `text` starts on `line`. */
const columnOf = (line: string, text: string) => stringWidth(line.slice(0, line.indexOf(text)));

describe('tables', () => {
  it('line up wide characters and colour codes by their width on the screen', () => {
    const rows = [
      { name: '数据库', status: 'running' },
      { name: 'web-🚀', status: 'stopped' },
      { name: 'api', status: 'running' },
    ];
    const lines = renderTable(rows, makeStyle(true), 80).split('\n');
    expect(lines).toHaveLength(4);
    const at = [columnOf(lines[1]!, 'running'), columnOf(lines[2]!, 'stopped'), columnOf(lines[3]!, 'running')];
    expect(new Set(at).size).toBe(1);
    expect(columnOf(lines[0]!, 'STATUS')).toBe(at[0]);
    // No trailing blanks, and the header in bold.
    for (const l of lines) expect(l).toBe(l.trimEnd());
    expect(lines[0]).toContain('\u001b[1m');
  });

  it('cuts long cells with … to fit, never the identifiers, and names the columns left out', () => {
    const rows = [{ id: 'a-very-long-identifier-that-stays-whole', note: 'x'.repeat(100), extra: { nested: { deep: 1 } } }];
    const text = renderTable(rows, makeStyle(false), 70);
    expect(text).toContain('a-very-long-identifier-that-stays-whole');
    expect(text).toMatch(/x+…/);
    expect(text).toContain('(not shown: extra; -o json shows everything)');
    for (const l of text.split('\n')) expect(stringWidth(l)).toBeLessThanOrEqual(70);
  });

  it('aligns two-column lists by screen width too', () => {
    const lines = twoColumns([
      ['数据', 'one'],
      ['ab', 'two'],
    ]).split('\n');
    expect(columnOf(lines[0]!, 'one')).toBe(columnOf(lines[1]!, 'two'));
  });
});
