/**
 * The traffic journal's `path` filter: a substring, or a pattern with `*` wildcards (any characters, `/` too) that
 * must match the whole path. Letters A–Z match either case (as SQLite's LIKE did, which ran this filter before).
 *
 * Matched here rather than by SQLite: LIKE compares a literal run after `%` again at every position where its
 * first character appears, O(path × pattern) per row — a 500-character pattern against 8 kB paths of one repeated
 * character took 4–6 ms a row, hours over a million rows, inside one synchronous statement that nothing can
 * interrupt. A pattern here is literal runs between stars; the runs are found left to right, each with
 * Knuth–Morris–Pratt (every character of the path is compared a bounded number of times), so a row costs
 * O(path + pattern) whatever both hold. The journal runs the rows through it in slices (`TrafficJournal.search`).
 */

/** Characters of a pattern (the query schema says the same). */
export const MAX_PATH_PATTERN_LENGTH = 512;
/** `*` wildcards in a pattern (a run of them counts once). */
export const MAX_PATH_WILDCARDS = 16;

/** Why a path pattern is refused (400 INVALID_PATTERN), or null. */
export function invalidPathPattern(pattern: string): string | null {
  if (pattern.length > MAX_PATH_PATTERN_LENGTH) return `is longer than ${MAX_PATH_PATTERN_LENGTH} characters`;
  if ((pattern.match(/\*+/g)?.length ?? 0) > MAX_PATH_WILDCARDS) return `has more than ${MAX_PATH_WILDCARDS} * wildcards`;
  return null;
}

/** A–Z → a–z; every other character as it is (LIKE folds ASCII letters only). */
const fold = (c: number) => (c >= 65 && c <= 90 ? c + 32 : c);

/** A literal run of the pattern, folded, with its KMP failure table. */
interface Run {
  codes: Int32Array;
  /** fail[i]: length of the longest proper border of codes[0..i]. */
  fail: Int32Array;
}

function run(text: string): Run {
  // UTF-16 units on both sides: a literal run matches the same units whichever encoding SQLite stored.
  const units = new Int32Array(text.length);
  for (let i = 0; i < text.length; i++) units[i] = fold(text.charCodeAt(i));
  const fail = new Int32Array(units.length);
  for (let i = 1, k = 0; i < units.length; i++) {
    while (k > 0 && units[i] !== units[k]) k = fail[k - 1]!;
    if (units[i] === units[k]) k++;
    fail[i] = k;
  }
  return { codes: units, fail };
}

/** Where `r` first occurs in `s` within [from, to), or -1; counts the characters compared in `steps`. */
function find(r: Run, s: string, from: number, to: number, steps: { n: number }): number {
  const m = r.codes.length;
  if (m === 0) return from;
  let k = 0;
  for (let i = from; i < to; i++) {
    const c = fold(s.charCodeAt(i));
    // Each character either advances k or lowers it; k never drops more often than it rose: ≤ 2 steps a character.
    while (k > 0 && c !== r.codes[k]) {
      k = r.fail[k - 1]!;
      steps.n++;
    }
    steps.n++;
    if (c === r.codes[k]) k++;
    if (k === m) return i - m + 1;
  }
  return -1;
}

/** Whether `s` starts at `at` with the run. */
function startsAt(r: Run, s: string, at: number, steps: { n: number }): boolean {
  for (let i = 0; i < r.codes.length; i++) {
    steps.n++;
    if (fold(s.charCodeAt(at + i)) !== r.codes[i]) return false;
  }
  return true;
}

/** Characters of the prefilter piece at most. */
const PIECE_LENGTH = 8;

/**
 * A piece of text every path the pattern matches contains, in lower case, for SQLite to leave out the other rows
 * first: `instr(lower(path), piece)`. Both are linear: `lower` copies the path, `instr` compares the piece at each
 * position where its first byte is (a piece of at most 8 bytes). The piece is ASCII, from the longest such stretch
 * of a literal run: SQLite's `lower` folds A–Z as the matcher does (and only those, unless built with ICU, which
 * folds ASCII the same way), so no row that matches is left out. Null when the pattern has no ASCII literal.
 */
export function requiredPiece(pattern: string): string | null {
  // eslint-disable-next-line no-control-regex -- every ASCII character, control characters included, can be in a path
  const stretches = pattern.split('*').flatMap((run) => run.match(/[\u0000-\u007f]+/g) ?? []);
  const longest = stretches.reduce((a, b) => (b.length > a.length ? b : a), '');
  return longest === '' ? null : longest.slice(0, PIECE_LENGTH).replace(/[A-Z]/g, (c) => c.toLowerCase());
}

export interface PathMatcher {
  (path: string): boolean;
  /** Characters compared so far (tests bound it). */
  readonly steps: number;
}

/** The matcher of a pattern `invalidPathPattern` accepts. */
export function pathMatcher(pattern: string): PathMatcher {
  const runs = pattern.split('*').map(run);
  const steps = { n: 0 };
  let match: (s: string) => boolean;
  if (runs.length === 1) {
    // No wildcard: anywhere in the path.
    const only = runs[0]!;
    match = (s) => find(only, s, 0, s.length, steps) >= 0;
  } else {
    const first = runs[0]!;
    const last = runs[runs.length - 1]!;
    const middle = runs.slice(1, -1).filter((r) => r.codes.length > 0);
    match = (s) => {
      const end = s.length - last.codes.length;
      if (end < first.codes.length || !startsAt(first, s, 0, steps) || !startsAt(last, s, end, steps)) return false;
      // The leftmost place of each run leaves the most room to the ones after it: if any placement fits, this does.
      let at = first.codes.length;
      for (const r of middle) {
        const i = find(r, s, at, end, steps);
        if (i < 0) return false;
        at = i + r.codes.length;
      }
      return true;
    };
  }
  Object.defineProperty(match, 'steps', { get: () => steps.n });
  return match as PathMatcher;
}
