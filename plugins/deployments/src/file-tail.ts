/**
 * Log files read from the end: the last N (matching) lines without reading the whole file, and following
 * appended lines (truncation and rotation restart from the beginning of the new file). Files are reached through
 * an opener (never a path): a deployment's log file may be replaced by a symlink at any moment, and every read
 * opens it again the safe way.
 */
import { watch, type FSWatcher } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';

export type Opener = () => Promise<FileHandle>;

const CHUNK = 64 * 1024;
/** A filter that matches nothing must not scan a huge file forever. */
const MAX_SCAN = 512 * 1024 * 1024;

/** The last `count` lines (0 = all) containing `filter`, oldest first. */
export async function readLastLines(open: Opener, count: number, filter?: string): Promise<string[]> {
  return (await readLastLinesAt(open, count, filter)).lines;
}

/**
 * Like `readLastLines`, with the size the lines were read up to (where a follow must continue). `maxScan` bounds the
 * bytes read from the end when a filter matches little.
 */
export async function readLastLinesAt(open: Opener, count: number, filter?: string, maxScan = MAX_SCAN): Promise<{ lines: string[]; size: number }> {
  const fh = await open();
  try {
    const { size } = await fh.stat();
    const out: string[] = [];
    let position = size;
    let carry = Buffer.alloc(0);
    let scanned = 0;
    let first = true;
    while (position > 0 && (count === 0 || out.length < count) && scanned < maxScan) {
      const length = Math.min(CHUNK, position);
      position -= length;
      const buf = Buffer.alloc(length);
      await fh.read(buf, 0, length, position);
      scanned += length;
      let data = carry.length ? Buffer.concat([buf, carry]) : buf;
      // Everything before the first newline may continue in the previous chunk: keep it for the next round.
      const nl = data.indexOf(0x0a);
      if (nl === -1 && position > 0) {
        carry = data;
        continue;
      }
      const head = position > 0 ? data.subarray(0, nl + 1) : Buffer.alloc(0);
      carry = position > 0 ? Buffer.from(head.subarray(0, head.length - 1)) : Buffer.alloc(0);
      data = position > 0 ? data.subarray(nl + 1) : data;
      const lines = data.toString('utf8').split('\n');
      if (first) {
        if (lines[lines.length - 1] === '') lines.pop();
        first = false;
      }
      for (let i = lines.length - 1; i >= 0 && (count === 0 || out.length < count); i--) {
        const line = lines[i]!.replace(/\r$/, '');
        if (!filter || line.includes(filter)) out.push(line);
      }
    }
    return { lines: out.reverse(), size };
  } finally {
    await fh.close();
  }
}

/**
 * Where a followed line ends in the file: `end` is the byte offset after its newline; `generation` counts the
 * truncations and rotations seen (offsets restart from 0 with each).
 */
export interface FilePosition {
  end: number;
  generation: number;
}

/**
 * Calls `onLine` for every line appended after `from` (default: the current end), until `signal` aborts. Pass the
 * size an initial tail read up to, so no line written in between is lost.
 */
export async function followFile(
  path: string,
  open: Opener,
  onLine: (line: string, at: FilePosition) => void | Promise<void>,
  signal: AbortSignal,
  filter?: string,
  from?: number,
): Promise<void> {
  let offset = from ?? (await sizeOf(open)) ?? 0;
  let generation = 0;
  let partial = '';
  let busy = false;
  let pending = false;
  let watcher: FSWatcher | null = null;
  const read = async () => {
    if (busy) {
      pending = true;
      return;
    }
    busy = true;
    try {
      do {
        pending = false;
        // A missing (rotated) or unsafe file reads as unchanged until a regular file is back.
        const fh = await open().catch(() => null);
        if (!fh) continue;
        try {
          const { size } = await fh.stat();
          if (size < offset) {
            offset = 0;
            partial = '';
            generation++;
          }
          while (offset < size && !signal.aborted) {
            const buf = Buffer.alloc(Math.min(CHUNK, size - offset));
            const { bytesRead } = await fh.read(buf, 0, buf.length, offset);
            if (bytesRead === 0) break;
            let end = offset - Buffer.byteLength(partial);
            offset += bytesRead;
            const lines = (partial + buf.subarray(0, bytesRead).toString('utf8')).split('\n');
            partial = lines.pop()!;
            for (const line of lines) {
              end += Buffer.byteLength(line) + 1;
              if (!filter || line.includes(filter)) await onLine(line.replace(/\r$/, ''), { end, generation });
            }
          }
        } finally {
          await fh.close();
        }
      } while (pending && !signal.aborted);
    } finally {
      busy = false;
    }
  };
  try {
    // Only a wake-up call: what is read is whatever `open` finds then.
    watcher = watch(path, () => void read().catch(() => undefined));
  } catch {
    watcher = null;
  }
  // Polling as well: watch events are lost on some file systems and after rotation.
  const timer = setInterval(() => void read().catch(() => undefined), 100);
  // Whatever was appended before the watch existed.
  void read().catch(() => undefined);
  await new Promise<void>((resolve) => {
    if (signal.aborted) return resolve();
    signal.addEventListener('abort', () => resolve(), { once: true });
  });
  clearInterval(timer);
  watcher?.close();
}

async function sizeOf(open: Opener): Promise<number | null> {
  const fh = await open().catch(() => null);
  if (!fh) return null;
  try {
    return (await fh.stat()).size;
  } finally {
    await fh.close();
  }
}
