import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { SeriesStore } from '../src/app/series-store.js';

// A fixed clock: samples every 10 s whose value is the minute index (so averages are easy to predict).
const T0 = 1_700_000_000 - (1_700_000_000 % 3600);

describe('series store (SQLite tiers)', () => {
  const dirs: string[] = [];
  const open = () => {
    const dir = mkdtempSync(join(tmpdir(), 'obs-store-'));
    dirs.push(dir);
    return { store: new SeriesStore(join(dir, 's.sqlite'), T0), file: join(dir, 's.sqlite') };
  };
  afterEach(() => {
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });

  const key = { container: 'web-1', deployment: 'shop', metric: 'container.cpu.usage' };

  function fill(store: SeriesStore, from: number, to: number) {
    for (let t = from; t < to; t += 10)
      store.write(t, [
        { key, value: Math.floor((t - T0) / 60) },
        { key: { container: null, deployment: null, metric: 'system.cpu.utilization' }, value: 0.5 },
      ]);
  }

  it('answers the same averages from raw samples, 1-minute and 5-minute rollups', () => {
    const { store } = open();
    const now = T0 + 2 * 3600;
    fill(store, T0, now);
    store.rollup(now);
    const row = store.series({ deployment: 'shop' });
    expect(row).toHaveLength(1);
    expect(store.series({ host: true }).map((r) => r.metric)).toEqual(['system.cpu.utilization']);

    // 15 minutes within raw retention: 5 s steps are raised to the sample interval (10 s).
    const raw = store.query(row, now - 900, 10, 6 * 3600, now);
    expect(raw.step).toBe(10);
    expect(raw.series[0]!.values.at(-1)).toBe(119);

    // 2 hours with a short raw retention: 1-minute rollups (step 60).
    const minutes = store.query(row, T0, 10, 600, now);
    expect(minutes.step).toBe(60);
    expect(minutes.timestamps[0]).toBe(T0 * 1000);
    expect(minutes.series[0]!.values.slice(0, 3)).toEqual([0, 1, 2]);

    // A day back: 5-minute tier (step 300); bucket k averages minutes 5k..5k+4.
    const day = store.query(row, now - 86400, 10, 600, now);
    expect(day.step).toBe(300);
    expect(day.timestamps[0]).toBe(T0 * 1000);
    expect(day.series[0]!.values.slice(0, 2)).toEqual([2, 7]);
    expect(day.timestamps).toHaveLength(24);
    // Served again from the in-memory tier: same answer.
    expect(store.query(row, now - 86400, 10, 600, now)).toEqual(day);
  });

  it('adds recent samples not rolled up yet, and keeps the cached tier current', () => {
    const { store } = open();
    const row = () => store.series({ deployment: 'shop' });
    fill(store, T0, T0 + 3600);
    store.rollup(T0 + 3600);
    const before = store.query(row(), T0 + 3600 - 86400, 10, 600, T0 + 3600);
    expect(before.timestamps).toHaveLength(12);
    // Ten more minutes: the first five are folded at the next rollup, the last ones only exist as raw samples.
    fill(store, T0 + 3600, T0 + 4200);
    const unfolded = store.query(row(), T0 + 4200 - 86400, 10, 600, T0 + 4200);
    expect(unfolded.timestamps).toHaveLength(14);
    expect(unfolded.series[0]!.values.slice(-2)).toEqual([62, 67]);
    store.rollup(T0 + 4200);
    const folded = store.query(row(), T0 + 4200 - 86400, 10, 600, T0 + 4200);
    expect(folded).toEqual({ ...unfolded });
  });

  it('answers a range starting in the future with nothing', () => {
    const { store } = open();
    fill(store, T0, T0 + 600);
    const rows = store.series({ deployment: 'shop' });
    expect(store.query(rows, T0 + 3600, 10, 600, T0 + 600)).toMatchObject({ timestamps: [], series: [{ values: [] }] });
  });

  it('prunes by retention and persists across reopening', () => {
    const { store, file } = open();
    fill(store, T0, T0 + 3600);
    store.rollup(T0 + 3600);
    store.prune(600, 1800, T0 + 3600);
    const rows = store.series({ deployment: 'shop' });
    const recent = store.query(rows, T0, 10, 100_000, T0 + 3600);
    expect(recent.timestamps[0]).toBeGreaterThanOrEqual((T0 + 3000) * 1000);
    const long = store.query(rows, T0, 10, 600, T0 + 3600);
    expect(long.timestamps[0]).toBeGreaterThanOrEqual((T0 + 1800) * 1000);
    store.close();
    const again = new SeriesStore(file);
    expect(again.series({ deployment: 'shop' })).toEqual(rows);
    expect(again.query(again.series({ deployment: 'shop' }), T0, 10, 600, T0 + 3600)).toEqual(long);
    again.close();
  });
});
