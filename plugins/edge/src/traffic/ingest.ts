/**
 * Reads nginx's JSON access log from where it stopped last time (offset and inode kept in the journal, so a
 * restart neither loses nor repeats lines; a rotated or truncated file starts over). In real-time mode it polls
 * the file every few hundred milliseconds; otherwise a periodic job calls `readNew`. Every record gets a number,
 * kept with the offset: observers with journals of their own (the security plugin's events) use it to know, after
 * a crash, which records they already saw.
 */
import { randomBytes } from 'node:crypto';
import { open, stat } from 'node:fs/promises';
import type { Logger, SqlDatabase } from '@agent/sdk';
import type { TrafficJournal, TrafficRecord } from './journal.js';
import { parseLines } from './parse.js';

// Up to ~15k lines per transaction: each commit writes every index page the batch touched, so bigger batches
// cost far less per line (4k lines: half the rate); small enough not to hold the event loop for long (~0.3 s).
const CHUNK = 4 * 1024 * 1024;
/** Records parsed, inserted and observed at a time within a read: few enough to die in V8's young generation. */
const GROUP = 200;

export interface ReadSink {
  /** Records of the read, in log order, once their rows are appended; `seq`: the number of the first. */
  observe(records: TrafficRecord[], seq: number): void;
  /** The read's records were all observed; its transaction commits next. */
  commit?(): void;
  /** After the read: whether its transaction committed. */
  end(committed: boolean): void;
}

export class AccessLogReader {
  private timer: NodeJS.Timeout | null = null;
  private reading: Promise<number> | null = null;
  /** One read's lines → journal rows, `onRecords`, and the new offset, in one transaction. */
  private readonly ingest: (text: string, ino: number, offset: number) => number;
  /** Identity of the numbering: a new journal numbers from 1 again, under another stream id. */
  readonly stream: string;
  /** Records handed to the sink by the current read (numbers used even when its transaction fails). */
  private delivered = 0;

  /**
   * `sink.observe` sees every record once its row is appended, in log order, inside the read's transaction (the
   * detector); `sink.end` follows each read, saying whether its transaction committed.
   */
  constructor(
    private readonly path: string,
    private readonly db: SqlDatabase,
    journal: TrafficJournal,
    private readonly sink: ReadSink,
    private readonly log: Logger,
  ) {
    db.exec(`
      CREATE TABLE IF NOT EXISTS ingest_position (path TEXT PRIMARY KEY, ino INTEGER NOT NULL, offset INTEGER NOT NULL);
      CREATE TABLE IF NOT EXISTS ingest_sequence (id INTEGER PRIMARY KEY CHECK (id = 1), stream TEXT NOT NULL, seq INTEGER NOT NULL);
    `);
    db.prepare('INSERT OR IGNORE INTO ingest_sequence (id, stream, seq) VALUES (1, ?, 0)').run(randomBytes(8).toString('hex'));
    this.stream = (db.prepare('SELECT stream FROM ingest_sequence WHERE id = 1').get() as { stream: string }).stream;
    // The offset and the records' numbers commit with the rows: a crash leaves neither lost nor repeated lines.
    this.ingest = db.transaction((text: string, ino: number, offset: number) => {
      const rows = journal.appender();
      const first = this.seq() + 1;
      let n = 0;
      parseLines(
        text,
        (records) => {
          rows.append(records);
          const seq = first + n;
          n += records.length;
          this.delivered = n;
          try {
            this.sink.observe(records, seq);
          } catch (err) {
            this.log.error('traffic observation failed', { error: (err as Error).message });
          }
        },
        GROUP,
      );
      rows.finish();
      this.save(ino, offset, first - 1 + n);
      try {
        this.sink.commit?.();
      } catch (err) {
        this.log.error('traffic observation failed', { error: (err as Error).message });
      }
      return n;
    });
  }

  /** The number of the last record read. */
  private seq(): number {
    return (this.db.prepare('SELECT seq FROM ingest_sequence WHERE id = 1').get() as { seq: number }).seq;
  }

  private position(): { ino: number; offset: number } {
    return (
      (this.db.prepare('SELECT ino, offset FROM ingest_position WHERE path = ?').get(this.path) as { ino: number; offset: number } | undefined) ?? {
        ino: -1,
        offset: 0,
      }
    );
  }

  private save(ino: number, offset: number, seq?: number): void {
    this.db
      .prepare('INSERT INTO ingest_position (path, ino, offset) VALUES (?, ?, ?) ON CONFLICT(path) DO UPDATE SET ino = excluded.ino, offset = excluded.offset')
      .run(this.path, ino, offset);
    if (seq !== undefined) this.db.prepare('UPDATE ingest_sequence SET seq = ? WHERE id = 1').run(seq);
  }

  /** Reads every complete line appended since the last call; returns how many records it ingested. */
  readNew(): Promise<number> {
    // One read at a time: the follower and the periodic job may overlap.
    this.reading ??= this.read().finally(() => (this.reading = null));
    return this.reading;
  }

  private async read(): Promise<number> {
    let st;
    try {
      st = await stat(this.path);
    } catch {
      return 0;
    }
    const stored = this.position();
    let { ino, offset } = stored;
    if (ino !== st.ino || st.size < offset) {
      ino = st.ino;
      offset = 0;
    }
    if (st.size === offset) {
      if (ino !== stored.ino || offset !== stored.offset) this.save(ino, offset);
      return 0;
    }
    const fh = await open(this.path, 'r');
    let count = 0;
    try {
      const buf = Buffer.allocUnsafe(CHUNK);
      while (offset < st.size) {
        const { bytesRead } = await fh.read(buf, 0, Math.min(CHUNK, st.size - offset), offset);
        if (bytesRead === 0) break;
        // Split on the last newline byte: a partial line (or a split UTF-8 sequence) is read again next time.
        const lastNl = buf.subarray(0, bytesRead).lastIndexOf(10);
        if (lastNl === -1) {
          if (bytesRead === CHUNK) offset += bytesRead; // an absurdly long line: skip it
          break;
        }
        const text = buf.toString('utf8', 0, lastNl);
        offset += lastNl + 1;
        let committed = false;
        this.delivered = 0;
        try {
          count += this.ingest(text, ino, offset);
          committed = true;
        } catch (err) {
          // As before: lines the journal refuses are skipped, not retried forever. Their numbers stay used: an
          // observer may have seen (and kept) some of them.
          this.log.error('traffic ingestion failed', { error: (err as Error).message });
          this.save(ino, offset, this.seq() + this.delivered);
        }
        this.sink.end(committed);
      }
    } finally {
      await fh.close();
    }
    return count;
  }

  follow(intervalMs: number): void {
    if (this.timer) return;
    const tick = () => {
      this.readNew()
        .catch((err) => this.log.warn('access log read failed', { error: (err as Error).message }))
        .finally(() => {
          if (this.timer) this.timer = setTimeout(tick, intervalMs);
        });
    };
    this.timer = setTimeout(tick, 0);
  }

  unfollow(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  get following(): boolean {
    return this.timer !== null;
  }
}
