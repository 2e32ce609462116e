/**
 * Streaming tar writer and reader. The writer turns entries (with streamed bodies of a declared size) into tar
 * bytes; the reader turns tar bytes into entries whose bodies must be consumed (or are skipped) in order.
 * Neither holds more than one chunk of the stream in memory.
 */
import { BLOCK, TarError, decodeHeader, encodeHeader, isZeroBlock, padding, parsePax, type TarHeader } from './tar-format.js';

export interface TarInput {
  path: string;
  type: 'file' | 'directory' | 'symlink';
  mode: number;
  /** Seconds since the epoch. */
  mtime: number;
  /** Files: the exact number of body bytes written (a longer body is cut, a shorter one padded). */
  size?: number;
  linkname?: string;
  body?: AsyncIterable<Buffer>;
  /** Called when the body did not have the declared size (a file that changed while it was read). */
  onSizeMismatch?: (actual: number) => void;
}

const ZEROS = Buffer.alloc(BLOCK * 2);

/** Tar bytes for a sequence of entries, ending with the two zero blocks. */
export async function* writeTar(entries: AsyncIterable<TarInput> | Iterable<TarInput>): AsyncGenerator<Buffer> {
  for await (const entry of entries) {
    const size = entry.type === 'file' ? (entry.size ?? 0) : 0;
    yield encodeHeader({ path: entry.path, type: entry.type, size, mode: entry.mode, mtime: entry.mtime, linkname: entry.linkname ?? '' });
    if (entry.type !== 'file') continue;
    let written = 0;
    let seen = 0;
    if (entry.body) {
      for await (const chunk of entry.body) {
        seen += chunk.length;
        if (written >= size) continue;
        const part = written + chunk.length > size ? chunk.subarray(0, size - written) : chunk;
        written += part.length;
        yield part;
      }
    }
    if (seen !== size) entry.onSizeMismatch?.(seen);
    let missing = size - written;
    while (missing > 0) {
      const n = Math.min(missing, ZEROS.length);
      yield ZEROS.subarray(0, n);
      missing -= n;
    }
    const pad = padding(size);
    if (pad) yield ZEROS.subarray(0, pad);
  }
  yield ZEROS;
}

/** Reads exact byte counts from a chunked source, keeping only the current chunk. */
class ByteSource {
  private buffer: Buffer = Buffer.alloc(0);
  private done = false;
  constructor(private readonly iterator: AsyncIterator<Buffer>) {}

  private async fill(): Promise<boolean> {
    if (this.done) return false;
    const next = await this.iterator.next();
    if (next.done) {
      this.done = true;
      return false;
    }
    this.buffer = this.buffer.length ? Buffer.concat([this.buffer, next.value]) : next.value;
    return true;
  }

  /** Exactly `n` bytes, or null at a clean end of stream (no byte read). */
  async read(n: number): Promise<Buffer | null> {
    while (this.buffer.length < n) {
      if (!(await this.fill())) {
        if (this.buffer.length === 0) return null;
        throw new TarError('unexpected end of archive');
      }
    }
    const out = this.buffer.subarray(0, n);
    this.buffer = this.buffer.subarray(n);
    return out;
  }

  /** `n` bytes as they arrive. */
  async *chunks(n: number): AsyncGenerator<Buffer> {
    let left = n;
    while (left > 0) {
      if (this.buffer.length === 0 && !(await this.fill())) throw new TarError('unexpected end of archive');
      const take = Math.min(left, this.buffer.length);
      const out = this.buffer.subarray(0, take);
      this.buffer = this.buffer.subarray(take);
      left -= take;
      yield out;
    }
  }

  async skip(n: number): Promise<void> {
    for await (const _ of this.chunks(n)) void _;
  }
}

export interface TarEntry extends TarHeader {
  /** The body; consume it before asking for the next entry (the reader skips whatever is left). */
  body: AsyncGenerator<Buffer>;
}

/** Entries of a tar stream. Pax headers are applied to the entry they describe, never returned. */
export async function* readTar(source: AsyncIterable<Buffer>): AsyncGenerator<TarEntry> {
  const bytes = new ByteSource(source[Symbol.asyncIterator]());
  let pax: Record<string, string> = {};
  for (;;) {
    const block = await bytes.read(BLOCK);
    if (block === null) throw new TarError('archive ends without its end-of-archive marker');
    if (isZeroBlock(block)) return;
    const header = decodeHeader(block);
    if (header.type === 'pax') {
      const body = await bytes.read(header.size + padding(header.size));
      if (body === null) throw new TarError('unexpected end of archive');
      pax = { ...pax, ...parsePax(body.subarray(0, header.size)) };
      continue;
    }
    if (pax.path) header.path = pax.path;
    if (pax.linkpath) header.linkname = pax.linkpath;
    if (pax.size) header.size = Number(pax.size);
    pax = {};
    const size = header.type === 'file' || header.type === 'other' ? header.size : 0;
    let consumed = 0;
    const body = (async function* () {
      for await (const chunk of bytes.chunks(size)) {
        consumed += chunk.length;
        yield chunk;
      }
    })();
    yield { ...header, body };
    // Whatever the consumer left unread is skipped.
    if (consumed < size) await bytes.skip(size - consumed);
    const pad = padding(size);
    if (pad) await bytes.skip(pad);
  }
}
