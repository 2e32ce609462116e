/**
 * Durations (`90`, `30s`, `15m`, `24h`, `7d`) and sizes (`512kb`, `10mb`) as config values, read by the `ms` and
 * `bytes` packages; the config schema's patterns say which of their forms a key takes.
 */
import bytes from 'bytes';
import ms from 'ms';

const SECONDS: Record<string, number> = { m: 60, h: 3600, d: 86400 };

/** Seconds from a number of seconds or a duration string; null when malformed. */
export function parseDuration(value: unknown): number | null {
  if (typeof value === 'number') return Number.isFinite(value) && value >= 0 ? value : null;
  if (typeof value !== 'string') return null;
  const text = value.trim();
  // A bare number is seconds in the config (ms would read milliseconds).
  // ms answers undefined (its types say number) for a text it cannot read, and throws for an empty one.
  const millis: number | undefined = /^\d+$/.test(text) ? Number(text) * 1000 : text ? ms(text as ms.StringValue) : undefined;
  return millis !== undefined && Number.isFinite(millis) && millis >= 0 ? millis / 1000 : null;
}

/** Bytes from a number or a size string (`kb` is 1024 bytes); null when malformed or not positive. */
export function parseSize(value: unknown): number | null {
  if (typeof value === 'number') return Number.isInteger(value) && value > 0 ? value : null;
  // bytes.parse reads whatever it does not know by parseInt (`10 parsecs` is 10): only its own forms go to it.
  const text = typeof value === 'string' ? value.trim() : '';
  const n = /^\d+(\.\d+)?\s*([kmgtp]?b)?$/i.test(text) ? bytes.parse(text) : null;
  return n !== null && Number.isInteger(n) && n > 0 ? n : null;
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
