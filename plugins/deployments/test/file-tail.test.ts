/**
 * Log files read from the end and followed (src/file-tail.ts), against a plain split of the file: lines across
 * chunk boundaries, multi-byte characters cut by a chunk, CRLF, empty lines, no final newline, a filter; the byte
 * offsets a follow reports. And lines a container can make as long as it likes: bounded, cut, and read in time
 * proportional to their length while the event loop keeps turning.
 */
import { appendFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { followFile, MAX_LINE_BYTES, readLastLines, readLastLinesAt } from '../src/file-tail.js';
import { seededRandom } from '../../../test/helpers/random.js';

const work = mkdtempSync(join(tmpdir(), 'file-tail-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));
const opener = (path: string) => () => open(path, 'r');

/** What the lines of a file are: split at `\n`, no empty last line for a final newline, `\r` dropped. */
function reference(content: Buffer): string[] {
  const lines = content.toString('utf8').split('\n');
  if (lines.at(-1) === '') lines.pop();
  return lines.map((l) => l.replace(/\r$/, ''));
}

function randomText(rnd: (n: number) => number): Buffer {
  const pieces = ['a', 'bc', 'é', '日本', '😀', '\r\n', '\n', '\n\n', 'x'.repeat(70_000), 'filter-me'];
  let s = rnd(4) === 0 ? '\n' : '';
  const n = rnd(300);
  for (let i = 0; i < n; i++) s += pieces[rnd(pieces.length)];
  return Buffer.from(s, 'utf8');
}

/** Collects what `followFile` reports until `until` says stop. */
async function follow(path: string, from: number, filter: string | undefined, run: () => Promise<void>) {
  const got: { line: string; end: number }[] = [];
  const controller = new AbortController();
  const done = followFile(path, opener(path), (line, at) => void got.push({ line, end: at.end }), controller.signal, filter, from);
  await run();
  return { got, stop: async () => (controller.abort(), await done) };
}

const waitFor = async (ok: () => boolean, ms = 10_000) => {
  for (const end = Date.now() + ms; !ok();) {
    if (Date.now() > end) throw new Error('condition not met');
    await new Promise((r) => setTimeout(r, 20));
  }
};

describe('file tail', () => {
  it('reads the last lines like a plain split, across chunks and multi-byte characters, with and without a filter', async () => {
    const rnd = seededRandom(9);
    for (let i = 0; i < 60; i++) {
      const content = randomText(rnd);
      const path = join(work, `r${i}.log`);
      writeFileSync(path, content);
      const all = reference(content);
      expect(await readLastLines(opener(path), 0), `file ${i}`).toEqual(content.length ? all : []);
      for (const count of [1, 3, 50]) expect(await readLastLines(opener(path), count)).toEqual(all.slice(-count));
      expect(await readLastLines(opener(path), 5, 'filter-me')).toEqual(all.filter((l) => l.includes('filter-me')).slice(-5));
      expect((await readLastLinesAt(opener(path), 1)).size).toBe(content.length);
    }
  });

  it('follows appended lines, split anywhere, with the byte offset after each', async () => {
    const rnd = seededRandom(4);
    const path = join(work, 'follow.log');
    writeFileSync(path, 'before\n');
    const content = Buffer.concat(Array.from({ length: 8 }, () => randomText(rnd)));
    const complete = content.subarray(0, content.lastIndexOf(0x0a) + 1);
    const { got, stop } = await follow(path, 7, undefined, async () => {
      for (let at = 0; at < content.length;) {
        const next = Math.min(content.length, at + 1 + rnd(90_000));
        appendFileSync(path, content.subarray(at, next));
        at = next;
        await new Promise((r) => setTimeout(r, rnd(3) === 0 ? 120 : 0));
      }
    });
    const want = reference(complete);
    await waitFor(() => got.length >= want.length);
    await stop();
    expect(got.map((g) => g.line)).toEqual(want);
    const ends: number[] = [];
    for (let i = complete.indexOf(0x0a); i !== -1; i = complete.indexOf(0x0a, i + 1)) ends.push(7 + i + 1);
    expect(got.map((g) => g.end)).toEqual(ends);
  });

  it('a line without end: cut at MAX_LINE_BYTES, read in time proportional to its length, the event loop turning', async () => {
    const path = join(work, 'long.log');
    const size = 48 * 1024 * 1024;
    writeFileSync(path, Buffer.concat([Buffer.from('first\n'), Buffer.alloc(size, 'a'), Buffer.from('\nlast\n')]));
    let ticks = 0;
    let gap = 0;
    let at = performance.now();
    const timer = setInterval(() => {
      const now = performance.now();
      gap = Math.max(gap, now - at);
      at = now;
      ticks++;
    }, 5);
    const lines = await readLastLines(opener(path), 3);
    const filtered = await readLastLines(opener(path), 3, 'no such text');
    clearInterval(timer);
    expect(lines.map((l) => l.length)).toEqual([5, MAX_LINE_BYTES + 1, 4]);
    expect(lines[1]).toBe(`…${'a'.repeat(MAX_LINE_BYTES)}`);
    expect(filtered).toEqual([]);
    expect(ticks).toBeGreaterThan(10);
    // 64 kB per read: no step of the reader holds the loop (before: every chunk copied the whole line read so far).
    expect(gap).toBeLessThan(250);

    // Followed: the same line appended, then a short one.
    const followed = join(work, 'long-follow.log');
    writeFileSync(followed, '');
    const { got, stop } = await follow(followed, 0, undefined, async () => {
      for (let i = 0; i < 16; i++) appendFileSync(followed, Buffer.alloc(size / 16, 'b'));
      appendFileSync(followed, '\nshort\n');
    });
    await waitFor(() => got.length >= 2, 30_000);
    await stop();
    expect(got.map((g) => g.line.length)).toEqual([MAX_LINE_BYTES + 1, 5]);
    expect(got[0]!.line.endsWith('b…')).toBe(true);
    expect(got.map((g) => g.end)).toEqual([size + 1, size + 7]);
  });
});
