/**
 * Splits engine log output into lines. Containers without a TTY send multiplexed frames
 * (8-byte header: stream, 3 zero bytes, big-endian length); with a TTY the output is raw stdout.
 */
import type { LogLine } from './api.js';

const TIMESTAMP = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})) /;

export class LogLineSplitter {
  private pending = Buffer.alloc(0);
  private partial: Record<'stdout' | 'stderr', string> = { stdout: '', stderr: '' };

  constructor(
    private readonly multiplexed: boolean,
    private readonly timestamps: boolean,
  ) {}

  /** Feeds a chunk; returns the complete lines it finished. */
  push(chunk: Buffer): LogLine[] {
    const out: LogLine[] = [];
    if (!this.multiplexed) {
      this.text('stdout', chunk.toString('utf8'), out);
      return out;
    }
    let buf = this.pending.length ? Buffer.concat([this.pending, chunk]) : chunk;
    while (buf.length >= 8) {
      const size = buf.readUInt32BE(4);
      if (buf.length < 8 + size) break;
      const stream = buf[0] === 2 ? 'stderr' : 'stdout';
      this.text(stream, buf.subarray(8, 8 + size).toString('utf8'), out);
      buf = buf.subarray(8 + size);
    }
    this.pending = Buffer.from(buf);
    return out;
  }

  /** Whatever is left without a final newline. */
  flush(): LogLine[] {
    const out: LogLine[] = [];
    for (const stream of ['stdout', 'stderr'] as const) {
      if (this.partial[stream]) out.push(this.line(stream, this.partial[stream]));
      this.partial[stream] = '';
    }
    return out;
  }

  private text(stream: 'stdout' | 'stderr', text: string, out: LogLine[]): void {
    const parts = (this.partial[stream] + text).split('\n');
    this.partial[stream] = parts.pop()!;
    for (const part of parts) out.push(this.line(stream, part));
  }

  private line(stream: 'stdout' | 'stderr', raw: string): LogLine {
    const text = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
    if (this.timestamps) {
      const m = TIMESTAMP.exec(text);
      if (m) return { stream, time: m[1]!, text: text.slice(m[0].length) };
    }
    return { stream, time: null, text };
  }
}
