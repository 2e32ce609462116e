/** ANSI colours, only on a terminal and never with NO_COLOR / --no-color. */
export interface Style {
  bold(s: string): string;
  dim(s: string): string;
  red(s: string): string;
  green(s: string): string;
  yellow(s: string): string;
  cyan(s: string): string;
}

const wrap = (open: number, close: number) => (s: string) => `\u001b[${open}m${s}\u001b[${close}m`;
const plain = (s: string) => s;

export function makeStyle(enabled: boolean): Style {
  if (!enabled) return { bold: plain, dim: plain, red: plain, green: plain, yellow: plain, cyan: plain };
  return { bold: wrap(1, 22), dim: wrap(2, 22), red: wrap(31, 39), green: wrap(32, 39), yellow: wrap(33, 39), cyan: wrap(36, 39) };
}

export function colorWanted(stream: NodeJS.WriteStream, flag: boolean | undefined, env: NodeJS.ProcessEnv = process.env): boolean {
  if (flag === false || (env.NO_COLOR !== undefined && env.NO_COLOR !== '')) return false;
  if (env.FORCE_COLOR && env.FORCE_COLOR !== '0') return true;
  return !!stream.isTTY;
}

/** Display width without colour codes. */
// eslint-disable-next-line no-control-regex -- terminal colour codes start with ESC
export const visibleLength = (s: string) => s.replace(/\u001b\[[0-9;]*m/g, '').length;
