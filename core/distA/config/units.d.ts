/** Durations (`90`, `30s`, `15m`, `24h`, `7d`) and sizes (`512kb`, `10mb`) as config values. */
/** Seconds from a number of seconds or a duration string; null when malformed. */
export declare function parseDuration(value: unknown): number | null;
/** Bytes from a number or a size string; null when malformed. */
export declare function parseSize(value: unknown): number | null;
/** `1d 2h 3m 4s` for uptime texts. */
export declare function formatDuration(totalSeconds: number): string;
//# sourceMappingURL=units.d.ts.map