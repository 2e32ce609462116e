/** Durations (`90`, `30s`, `15m`, `24h`, `7d`) and sizes (`512kb`, `10mb`) as config values. */

const DURATION = /^(\d+)(ms|s|m|h|d)?$/;
const SIZE = /^(\d+)(b|kb|mb|gb)?$/i;

/** Seconds from a number of seconds or a duration string; null when malformed. */
export function parseDuration(value: unknown): number | null {
  if (typeof value === 'number') return Number.isFinite(value) && value >= 0 ? value : null;
  if (typeof value !== 'string') return null;
  const m = DURATION.exec(value.trim());
  if (!m) return null;
  const n = Number(m[1]);
  switch (m[2] ?? 's') {
    case 'ms':
      return n / 1000;
    case 's':
      return n;
    case 'm':
      return n * 60;
    case 'h':
      return n * 3600;
    default:
      return n * 86400;
  }
}

/** Bytes from a number or a size string; null when malformed. */
export function parseSize(value: unknown): number | null {
  if (typeof value === 'number') return Number.isInteger(value) && value > 0 ? value : null;
  if (typeof value !== 'string') return null;
  const m = SIZE.exec(value.trim());
  if (!m) return null;
  const unit = (m[2] ?? 'b').toLowerCase();
  const factor = unit === 'gb' ? 1024 ** 3 : unit === 'mb' ? 1024 ** 2 : unit === 'kb' ? 1024 : 1;
  return Number(m[1]) * factor;
}

/** `1d 2h 3m 4s` for uptime texts. */
export function formatDuration(totalSeconds: number): string {
  let s = Math.floor(totalSeconds);
  const d = Math.floor(s / 86400);
  s -= d * 86400;
  const h = Math.floor(s / 3600);
  s -= h * 3600;
  const m = Math.floor(s / 60);
  s -= m * 60;
  const parts: string[] = [];
  if (d) parts.push(`${d}d`);
  if (h) parts.push(`${h}h`);
  if (m) parts.push(`${m}m`);
  parts.push(`${s}s`);
  return parts.join(' ');
}
