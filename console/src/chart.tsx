/**
 * Time series with uPlot (loaded with the first chart: the login and list screens do without it). `x` is in
 * seconds since the epoch, one array per series, `null` for a gap.
 */
import { useEffect, useRef } from 'preact/hooks';

export interface Series {
  label: string;
  values: (number | null)[];
}

const COMPACT = new Intl.NumberFormat(undefined, { notation: 'compact', maximumFractionDigits: 1 });
/** Axis ticks and legend values: 1.2K, 35M (bytes and rates reach the millions). */
const fmt = (v: number) => (Math.abs(v) >= 1000 ? COMPACT.format(v) : String(+v.toFixed(2)));

const COLOURS = ['#1f6feb', '#d1242f', '#1a7f37', '#9a6700', '#8250df', '#bf3989', '#0550ae', '#57606a'];

export function Chart({ title, x, series, unit = '', height = 180 }: { title: string; x: number[]; series: Series[]; unit?: string; height?: number }) {
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    let plot: { destroy(): void; setSize(s: { width: number; height: number }): void } | null = null;
    let gone = false;
    let observer: ResizeObserver | null = null;
    void import('uplot').then(({ default: UPlot }) => {
      if (gone || !box.current) return;
      const width = Math.max(240, box.current.clientWidth);
      plot = new UPlot(
        {
          width,
          height,
          series: [
            {},
            ...series.map((s, i) => ({
              label: s.label,
              stroke: COLOURS[i % COLOURS.length],
              width: 1.5,
              value: (_u: unknown, v: number | null) => (v === null ? '—' : `${fmt(v)}${unit}`),
            })),
          ],
          axes: [{}, { values: (_u: unknown, ticks: number[]) => ticks.map((t) => `${fmt(t)}${unit}`), size: 70 }],
          scales: { x: { time: true } },
          legend: { live: true },
        },
        [x, ...series.map((s) => s.values)] as never,
        box.current,
      );
      observer = new ResizeObserver(() => box.current && plot?.setSize({ width: Math.max(240, box.current.clientWidth), height }));
      observer.observe(box.current);
    });
    return () => {
      gone = true;
      observer?.disconnect();
      plot?.destroy();
    };
  }, [x, series, unit, height]);
  return (
    <figure class="chart">
      <figcaption>{title}</figcaption>
      <div ref={box} role="img" aria-label={`${title}: ${series.map((s) => s.label).join(', ')}, ${x.length} points`} data-points={x.length} />
    </figure>
  );
}
