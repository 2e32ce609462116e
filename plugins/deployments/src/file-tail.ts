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
/**
 * Bytes of one line kept at most: a container writes these files, and a file without a newline is one line. Longer
 * lines are cut (marked with `…` where the cut is): their other bytes are read and skipped, never gathered, so a
 * line of any length costs time in proportion to its length and bounded memory.
 */
export const MAX_LINE_BYTES = 1024 * 1024;
const CUT = '…';

/** The last `count` lines (0 = all) containing `filter`, oldest first. */
export async function readLastLines(open: Opener, count: number, filter?: string): Promise<string[]> {
  return (await readLastLinesAt(open, count, filter)).lines;
}

/**
 * Like `readLastLines`, with the size the lines were read up to (where a follow must continue). `maxScan` bounds the
 * bytes read from the end when a filter matches little. Read backwards in chunks: the bytes of the line a chunk
 * ends inside are kept as parts (newest first) and joined once, when its start is found; a line past
 * MAX_LINE_BYTES keeps its last MAX_LINE_BYTES bytes.
 */
export async function readLastLinesAt(open: Opener, count: number, filter?: string, maxScan = MAX_SCAN): Promise<{ lines: string[]; size: number }> {
  const fh = await open();
  try {
    const { size } = await fh.stat();
    const out: string[] = [];
    const wanted = () => count === 0 || out.length < count;
    const keep = (line: string) => {
      if (wanted() && (!filter || line.includes(filter))) out.push(line);
    };
    // The end of the line being read backwards: parts in file order, their bytes, whether its middle was skipped.
    let carry: Buffer[] = [];
    let carried = 0;
    let cut = false;
    const line = (head: Buffer) => {
      const text = Buffer.concat(cut ? carry : [head, ...carry]).toString('utf8');
      return (cut ? CUT + text : text).replace(/\r$/, '');
    };
    let position = size;
    let scanned = 0;
    let last = true;
    while (position > 0 && wanted() && scanned < maxScan) {
      const length = Math.min(CHUNK, position);
      position -= length;
      const buf = Buffer.alloc(length);
      await fh.read(buf, 0, length, position);
      scanned += length;
      let end = length;
      // The file's own final newline ends the last line; it does not start an empty one.
      if (last && buf[end - 1] === 0x0a) end--;
      last = false;
      // (`lastIndexOf` with a negative offset would count from the end: an empty rest has no newline.)
      const newline = () => (end > 0 ? buf.lastIndexOf(0x0a, end - 1) : -1);
      for (let nl = newline(); nl !== -1 && wanted(); nl = newline()) {
        keep(line(buf.subarray(nl + 1, end)));
        carry = [];
        carried = 0;
        cut = false;
        end = nl;
      }
      if (!wanted()) break;
      // What is left of the chunk starts the line that continues into the next chunk read (earlier in the file).
      const head = buf.subarray(0, end);
      if (carried + head.length <= MAX_LINE_BYTES) {
        carry.unshift(Buffer.from(head));
        carried += head.length;
      } else if (!cut) {
        const room = MAX_LINE_BYTES - carried;
        if (room > 0) carry.unshift(Buffer.from(head.subarray(head.length - room)));
        carried = MAX_LINE_BYTES;
        cut = true;
      }
      // The start of the file starts the first line (empty if the file starts with a newline).
      if (position === 0) keep(line(Buffer.alloc(0)));
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
  // The line being read: its parts in file order (joined once, at its newline), their bytes, whether bytes past
  // MAX_LINE_BYTES were skipped. Never a string grown chunk by chunk: a file without newlines would cost its square.
  let parts: Buffer[] = [];
  let held = 0;
  let cut = false;
  const hold = (bytes: Buffer) => {
    if (held + bytes.length <= MAX_LINE_BYTES) {
      if (bytes.length) parts.push(bytes);
      held += bytes.length;
    } else if (!cut) {
      parts.push(bytes.subarray(0, MAX_LINE_BYTES - held));
      held = MAX_LINE_BYTES;
      cut = true;
    }
  };
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
            parts = [];
            held = 0;
            cut = false;
            generation++;
          }
          while (offset < size && !signal.aborted) {
            const buf = Buffer.alloc(Math.min(CHUNK, size - offset));
            const { bytesRead } = await fh.read(buf, 0, buf.length, offset);
            if (bytesRead === 0) break;
            const chunk = buf.subarray(0, bytesRead);
            const base = offset;
            offset += bytesRead;
            let start = 0;
            for (let nl = chunk.indexOf(0x0a); nl !== -1; nl = chunk.indexOf(0x0a, start)) {
              hold(chunk.subarray(start, nl));
              const line = Buffer.concat(parts).toString('utf8') + (cut ? CUT : '');
              parts = [];
              held = 0;
              cut = false;
              start = nl + 1;
              if (!filter || line.includes(filter)) await onLine(line.replace(/\r$/, ''), { end: base + start, generation });
            }
            hold(chunk.subarray(start));
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
