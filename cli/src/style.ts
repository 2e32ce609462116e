/** Colours (picocolors), only on a terminal and never with NO_COLOR / --no-color. */
import pc from 'picocolors';
import stringWidth from 'string-width';

export interface Style {
  bold(s: string): string;
  dim(s: string): string;
  red(s: string): string;
  green(s: string): string;
  yellow(s: string): string;
  cyan(s: string): string;
}

export function makeStyle(enabled: boolean): Style {
  // picocolors decides on its own from process.stdout and the environment; the CLI decides per stream (stdout may be
  // a pipe while stderr is the terminal), so it is told.
  const c = pc.createColors(enabled);
  return { bold: c.bold, dim: c.dim, red: c.red, green: c.green, yellow: c.yellow, cyan: c.cyan };
}

export function colorWanted(stream: NodeJS.WriteStream, flag: boolean | undefined, env: NodeJS.ProcessEnv = process.env): boolean {
  if (flag === false || (env.NO_COLOR !== undefined && env.NO_COLOR !== '')) return false;
  if (env.FORCE_COLOR && env.FORCE_COLOR !== '0') return true;
  return !!stream.isTTY;
}

/** Columns a string takes on a terminal: colour codes take none, wide characters (CJK, emoji) two. */
export const visibleLength = (s: string): number => stringWidth(s);
