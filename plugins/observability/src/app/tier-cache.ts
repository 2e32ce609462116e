/**
 * An in-memory copy of the 5-minute rollup tier for the series queried recently. Long-range queries (a day, a
 * week) are what dashboards poll; reading them from SQLite costs one row per bucket per series, every time. The
 * tier only grows at its end (every 5 minutes) and only loses its oldest part (retention), so each series is
 * loaded once and then kept current by appending what `rollup()` folds. Bounded: least recently used series go.
 */

export interface TierRow {
  ts: number;
  /** Sum of the values (avg × n) and number of raw samples behind the bucket. */
  sum: number;
  n: number;
}

class Column {
  ts: Int32Array;
  sum: Float64Array;
  n: Int32Array;
  length = 0;
  /** The cache holds every row of the series at or after this time (seconds). */
  from: number;

  constructor(from: number, capacity = 64) {
    this.from = from;
    this.ts = new Int32Array(capacity);
    this.sum = new Float64Array(capacity);
    this.n = new Int32Array(capacity);
  }

  private grow(needed: number): void {
    if (needed <= this.ts.length) return;
    const size = Math.max(needed, this.ts.length * 2);
    const ts = new Int32Array(size);
    const sum = new Float64Array(size);
    const n = new Int32Array(size);
    ts.set(this.ts.subarray(0, this.length));
    sum.set(this.sum.subarray(0, this.length));
    n.set(this.n.subarray(0, this.length));
    Object.assign(this, { ts, sum, n });
  }

  /** Rows must come in time order, after the last one. */
  append(rows: Iterable<TierRow>): void {
    for (const r of rows) {
      if (this.length > 0 && r.ts <= this.ts[this.length - 1]!) continue;
      this.grow(this.length + 1);
      this.ts[this.length] = r.ts;
      this.sum[this.length] = r.sum;
      this.n[this.length] = r.n;
      this.length++;
    }
  }

  /** First index with ts >= t. */
  indexOf(t: number): number {
    let lo = 0;
    let hi = this.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.ts[mid]! < t) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  dropBefore(t: number): void {
    const i = this.indexOf(t);
    if (i === 0) return;
    this.ts.copyWithin(0, i, this.length);
    this.sum.copyWithin(0, i, this.length);
    this.n.copyWithin(0, i, this.length);
    this.length -= i;
    this.from = Math.max(this.from, t);
  }
}

export class TierCache {
  private readonly columns = new Map<number, Column>();

  constructor(private readonly maxSeries: number) {}

  /**
   * Adds `[from, to)` buckets of `step` seconds (a multiple of 300) for one series into `add`, loading the series
   * from `load(from)` the first time (or when older rows are wanted than the cache holds).
   */
  collect(
    series: number,
    from: number,
    to: number,
    step: number,
    load: (from: number) => Iterable<TierRow>,
    add: (bucket: number, sum: number, n: number) => void,
  ): void {
    let col = this.columns.get(series);
    if (col && col.from > from) col = undefined;
    if (!col) {
      col = new Column(from);
      col.append(load(from));
      if (this.columns.size >= this.maxSeries) this.columns.delete(this.columns.keys().next().value!);
    } else this.columns.delete(series);
    this.columns.set(series, col); // most recently used last
    for (let i = col.indexOf(from); i < col.length; i++) {
      const ts = col.ts[i]!;
      if (ts >= to) break;
      add(ts - (ts % step), col.sum[i]!, col.n[i]!);
    }
  }

  /** New rows folded by a rollup, per series, for the series in the cache. */
  cachedSeries(): number[] {
    return [...this.columns.keys()];
  }

  append(series: number, rows: Iterable<TierRow>): void {
    this.columns.get(series)?.append(rows);
  }

  prune(before: number): void {
    for (const col of this.columns.values()) col.dropBefore(before);
  }

  /** Drops a series from the cache (its rows were deleted). */
  forget(series: number): void {
    this.columns.delete(series);
  }
}
