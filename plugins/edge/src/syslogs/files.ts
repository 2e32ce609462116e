/** Reading log files: the last N lines (read backwards in chunks) and following appended lines. */
import { open, stat } from 'node:fs/promises';

const CHUNK = 256 * 1024;
/** Bound on what one read returns (`tail=0` on a huge file). */
const MAX_BYTES = 64 * 1024 * 1024;

/** The last `n` lines that pass `keep` (n = 0: all, bounded to the last 64 MiB), oldest first; and the end offset. */
export async function tailLines(path: string, n: number, keep: (line: string) => boolean): Promise<{ lines: string[]; end: number }> {
  const st = await stat(path);
  const fh = await open(path, 'r');
  try {
    const out: string[] = [];
    let pos = st.size;
    let carry = Buffer.alloc(0);
    while (pos > 0 && (n === 0 || out.length < n) && st.size - pos < MAX_BYTES) {
      const len = Math.min(CHUNK, pos);
      pos -= len;
      const buf = Buffer.alloc(len);
      await fh.read(buf, 0, len, pos);
      let data = Buffer.concat([buf, carry]);
      // Keep the first (possibly partial) line for the next round unless we reached the start of the file.
      const firstNl = pos > 0 ? data.indexOf(10) : -1;
      carry = firstNl >= 0 ? data.subarray(0, firstNl) : Buffer.alloc(0);
      if (pos > 0 && firstNl < 0) {
        carry = data;
        continue;
      }
      data = firstNl >= 0 ? data.subarray(firstNl + 1) : data;
      const lines = data.toString('utf8').split('\n');
      if (lines.at(-1) === '') lines.pop();
      for (let i = lines.length - 1; i >= 0 && (n === 0 || out.length < n); i--) if (keep(lines[i]!)) out.push(lines[i]!);
    }
    if (pos === 0 && carry.length && (n === 0 || out.length < n)) {
      const line = carry.toString('utf8');
      if (keep(line)) out.push(line);
    }
    return { lines: out.reverse(), end: st.size };
  } finally {
    await fh.close();
  }
}

/** Calls `onLines` with complete lines appended after `from`, until `signal` aborts. */
export async function followFile(path: string, from: number, onLines: (lines: string[]) => Promise<void>, signal: AbortSignal, everyMs = 250): Promise<void> {
  let offset = from;
  let ino = (await stat(path).catch(() => null))?.ino ?? -1;
  while (!signal.aborted) {
    await new Promise((r) => setTimeout(r, everyMs));
    const st = await stat(path).catch(() => null);
    if (!st) continue;
    if (st.ino !== ino || st.size < offset) {
      ino = st.ino;
      offset = 0;
    }
    if (st.size <= offset) continue;
    const fh = await open(path, 'r');
    try {
      const len = Math.min(st.size - offset, 4 * 1024 * 1024);
      const buf = Buffer.alloc(len);
      await fh.read(buf, 0, len, offset);
      const lastNl = buf.lastIndexOf(10);
      if (lastNl < 0) continue;
      offset += lastNl + 1;
      await onLines(buf.toString('utf8', 0, lastNl).split('\n'));
    } finally {
      await fh.close();
    }
  }
}
