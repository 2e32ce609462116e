/** Durations (`90`, `30s`, `15m`, `24h`, `7d`) and sizes (`512kb`, `10mb`) as config values. */

const SECONDS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86400 };
const BYTES: Record<string, number> = { b: 1, kb: 1024, mb: 1024 ** 2, gb: 1024 ** 3 };

/** Seconds from a number of seconds or a duration string; null when malformed. */
export function parseDuration(value: unknown): number | null {
  if (typeof value === 'number') return Number.isFinite(value) && value >= 0 ? value : null;
  const m = typeof value === 'string' ? /^(\d+)(ms|s|m|h|d)?$/.exec(value.trim()) : null;
  if (!m) return null;
  return m[2] === 'ms' ? Number(m[1]) / 1000 : Number(m[1]) * SECONDS[m[2] ?? 's']!;
}

/** Bytes from a number or a size string; null when malformed. */
export function parseSize(value: unknown): number | null {
  if (typeof value === 'number') return Number.isInteger(value) && value > 0 ? value : null;
  const m = typeof value === 'string' ? /^(\d+)(b|kb|mb|gb)?$/i.exec(value.trim()) : null;
  return m ? Number(m[1]) * BYTES[(m[2] ?? 'b').toLowerCase()]! : null;
}

/** `1d 2h 3m 4s` for uptime texts. */
export function formatDuration(totalSeconds: number): string {
  let s = Math.floor(totalSeconds);
  const parts: string[] = [];
  for (const unit of ['d', 'h', 'm']) {
    const n = Math.floor(s / SECONDS[unit]!);
    s -= n * SECONDS[unit]!;
    if (n) parts.push(`${n}${unit}`);
  }
  return [...parts, `${s}s`].join(' ');
}
