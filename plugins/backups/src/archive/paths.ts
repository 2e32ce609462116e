/**
 * Validation of paths and glob patterns that come from requests or archives, and the matcher of exclude patterns.
 *
 * Exclude patterns come from users (a principal with write access to one deployment sets them) and are matched
 * against every path of a deployment folder, whose names its containers choose: both sides are adversarial. A glob
 * compiled to a JavaScript RegExp (picomatch, minimatch, micromatch, zeptomatch… all do that) backtracks: `*a*a*a*a*b`
 * against a 40-character name took seconds, and every extra `*a` multiplied the time, while the event loop — every
 * API call of the agent — waited. A linear-time regular expression engine (RE2) is a native build, and does not
 * take the lookarounds those libraries generate. So patterns are compiled here into a small automaton that is run
 * as a set of states (Thompson's construction, as RE2 and grep do): each character of the path is read once, and
 * costs at most one step per state of the patterns. Time is O(path length × pattern size) whatever the input, and
 * the pattern size is bounded by `invalidExcludePattern`.
 */

/** Why a relative path is unsafe (absolute, `..`, empty segments, control characters), or null. */
export function unsafeRelativePath(path: string): string | null {
  if (path === '') return 'is empty';
  if (path.includes('\0')) return 'contains a NUL byte';
  if (path.startsWith('/') || /^[A-Za-z]:[\\/]/.test(path)) return 'must be relative';
  if (path.includes('\\')) return 'must use / as separator';
  const segments = path.split('/');
  if (segments.some((s) => s === '..')) return "must not contain '..'";
  if (segments.some((s, i) => s === '' && i !== segments.length - 1)) return 'must not contain empty segments';
  return null;
}

/** Characters of one pattern, as written. */
export const MAX_PATTERN_LENGTH = 512;
/** Wildcards (`*` or `**`, `?`, `[…]`) in one pattern (in each of its brace alternatives). */
export const MAX_WILDCARDS = 16;
/** Alternatives one pattern's braces expand to (`{a,b}{c,d}` is 4). */
export const MAX_ALTERNATIVES = 16;
/** Characters of all of one pattern's alternatives together: what the automaton's size follows. */
export const MAX_EXPANDED_LENGTH = 1024;
/**
 * Characters of all the patterns of one backup together, braces expanded: a path costs at most one step per
 * character of it and of them (4096 × a 255-byte name ≈ 1M steps, a few milliseconds).
 */
export const MAX_TOTAL_LENGTH = 4096;

const strip = (pattern: string) => pattern.replace(/^\.\//, '').replace(/\/+$/, '');

/** Why an exclude pattern is rejected, or null. Patterns are relative to the deployment folder. */
export function invalidExcludePattern(pattern: string): string | null {
  if (pattern.trim() === '') return 'is empty';
  if (pattern.length > MAX_PATTERN_LENGTH) return `is longer than ${MAX_PATTERN_LENGTH} characters`;
  const stripped = strip(pattern);
  if (stripped === '' || stripped === '.') return 'matches the whole deployment folder';
  const problem = unsafeRelativePath(stripped);
  if (problem) return problem;
  const parsed = parse(stripped);
  return typeof parsed === 'string' ? parsed : null;
}

/**
 * Why a list of exclude patterns is rejected as a whole, or null: together they make the automaton every path runs
 * through, whose size is bounded. Each pattern is checked by `invalidExcludePattern` first.
 */
export function invalidExcludePatterns(patterns: string[]): string | null {
  let total = 0;
  for (const p of patterns) {
    const parsed = parse(strip(p));
    if (typeof parsed !== 'string') for (const alt of parsed) total += alt.length;
  }
  return total > MAX_TOTAL_LENGTH ? `are longer than ${MAX_TOTAL_LENGTH} characters together (braces expanded)` : null;
}

/** `(relPath) => excluded`, with the number of automaton steps taken so far (what a call costs; tests bound it). */
export type ExcludeMatcher = ((relPath: string) => boolean) & { readonly steps: number };

/**
 * A matcher for exclude patterns (glob semantics, relative to the deployment folder): a pattern without a slash
 * matches a name at any depth (`*.log`, `node_modules`); with a slash it matches from the folder root
 * (`data/cache/**`). An excluded directory excludes everything below it: a path is excluded when it or one of the
 * folders above it matches.
 *
 * Syntax: `*` any characters but `/`; `?` one character but `/`; `[abc]`, `[a-z]`, `[!a]` one character of a set
 * (never `/`); `**` as a whole segment any number of folders (`**` elsewhere is `*`); `{a,b}` alternatives. Names
 * starting with a dot are matched like any other. A pattern that `invalidExcludePattern` refuses throws here.
 *
 * Paths are expected in the order a walk visits them (a folder, then what is below it): the automaton's states
 * after each folder of the previous path are kept, so a path costs the characters its parent did not already read.
 */
export function excludeMatcher(patterns: string[]): ExcludeMatcher {
  const together = invalidExcludePatterns(patterns);
  if (together) throw new Error(`exclude patterns ${together}`);
  const anywhere = new Builder();
  const rooted = new Builder();
  for (const raw of patterns) {
    const p = strip(raw);
    const parsed = parse(p);
    if (typeof parsed === 'string') throw new Error(`exclude pattern '${raw}' ${parsed}`);
    // As before: whether the pattern as written has a slash decides, not each alternative of its braces.
    const slash = p.includes('/');
    for (const alt of parsed) (slash ? rooted : anywhere).add(alt, slash);
  }
  return new Walker(anywhere.build(), rooted.build()).matcher();
}

// --- patterns → alternatives → tokens ---------------------------------------------------------------------

/** The brace-free alternatives of a stripped pattern, or why it is refused. */
function parse(pattern: string): string[] | string {
  if (pattern.startsWith('!')) return "must not start with '!' (negation is not supported: list what to exclude)";
  if (/[@!+*?]\(/.test(pattern)) return 'uses an extglob such as @(…), which is not supported (use {a,b} or several patterns)';
  const alternatives = expandBraces(pattern);
  if (typeof alternatives === 'string') return alternatives;
  let length = 0;
  for (const alt of alternatives) {
    length += alt.length;
    const a = alt.replace(/\/+$/, '');
    const problem = unsafeRelativePath(a);
    // `{/etc,x}` or `{..,x}/y`: the expanded alternative must be as safe as a plain pattern.
    if (problem) return `expands to '${alt}', which ${problem}`;
    if (wildcards(a) > MAX_WILDCARDS) return `has more than ${MAX_WILDCARDS} wildcards (*, ?, [...])`;
  }
  if (length > MAX_EXPANDED_LENGTH) return `is longer than ${MAX_EXPANDED_LENGTH} characters once its braces are expanded`;
  return alternatives.map((a) => a.replace(/\/+$/, ''));
}

/** `{a,b}` alternatives, nested or side by side, up to MAX_ALTERNATIVES; a brace without a comma is literal. */
function expandBraces(pattern: string): string[] | string {
  let open = -1;
  let depth = 0;
  const commas: number[] = [];
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === '{') {
      if (depth === 0) {
        open = i;
        commas.length = 0;
      }
      depth++;
    } else if (c === '}' && depth > 0) {
      depth--;
      if (depth === 0) {
        if (commas.length === 0) {
          if (/^\{-?\d+\.\.-?\d+\}$|^\{.\.\..\}$/.test(pattern.slice(open, i + 1)))
            return 'uses a brace range such as {1..3}, which is not supported (list the values: {1,2,3})';
          continue; // `{a}`: literal, as picomatch has it
        }
        const head = pattern.slice(0, open);
        const tail = expandBraces(pattern.slice(i + 1));
        if (typeof tail === 'string') return tail;
        const bounds = [open, ...commas, i];
        const out: string[] = [];
        for (let k = 0; k + 1 < bounds.length; k++) {
          const inner = expandBraces(pattern.slice(bounds[k]! + 1, bounds[k + 1]));
          if (typeof inner === 'string') return inner;
          for (const a of inner) {
            for (const t of tail) {
              out.push(head + a + t);
              if (out.length > MAX_ALTERNATIVES) return `expands to more than ${MAX_ALTERNATIVES} alternatives ({…})`;
            }
          }
        }
        return out;
      }
    } else if (c === ',' && depth === 1) commas.push(i);
  }
  return [pattern];
}

/** Wildcards of a brace-free pattern: runs of `*`, `?`, and character sets. */
function wildcards(pattern: string): number {
  let n = 0;
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === '*') {
      n++;
      while (pattern[i + 1] === '*') i++;
    } else if (c === '?') n++;
    else if (c === '[') {
      const end = classEnd(pattern, i);
      if (end > 0) {
        n++;
        i = end;
      }
    }
  }
  return n;
}

/** Index of the `]` closing a set opened at `i`, or -1 (then `[` is a literal character). */
function classEnd(s: string, i: number): number {
  let j = i + 1;
  if (s[j] === '!' || s[j] === '^') j++;
  if (s[j] === ']') j++; // `[]a]`: a leading `]` is a member
  for (; j < s.length; j++) {
    if (s[j] === '/') return -1;
    if (s[j] === ']') return j;
  }
  return -1;
}

// --- the automaton ------------------------------------------------------------------------------------------

/**
 * State kinds. Each state reads one character (or none, for ACCEPT); the ε column says which state it also stands
 * for without reading anything.
 *
 * | kind | reads | goes to | ε |
 * |---|---|---|---|
 * | LIT | its character | next | |
 * | ONE | any but `/` | next | |
 * | SET | a member (never `/`) | next | |
 * | STAR | any but `/` | itself | next |
 * | ANY (`**` alone) | anything | itself | next |
 * | DEEP_START (a `**` segment before another: zero or more folders) | `/` / any other | itself / DEEP_IN | the state after DEEP_IN |
 * | DEEP_IN (inside a folder name) | `/` / any other | DEEP_START / itself | |
 * | TAIL_START (trailing `/**`: nothing, or `/` and anything) | `/` | TAIL_IN | ACCEPT |
 * | TAIL_IN | anything | itself | next (ACCEPT) |
 * | ACCEPT | — | | |
 */
const LIT = 0;
const ONE = 1;
const SET = 2;
const STAR = 3;
const ANY = 4;
const DEEP_START = 5;
const DEEP_IN = 6;
const TAIL_START = 7;
const TAIL_IN = 8;
const ACCEPT = 9;
const SLASH = 0x2f;

interface CharSet {
  negated: boolean;
  /** Inclusive [from, to] pairs of UTF-16 code units. */
  ranges: number[];
}

interface Program {
  kind: Uint8Array;
  /** LIT: the character; SET: index in `sets`. */
  arg: Int32Array;
  sets: CharSet[];
  /** See `epsilonOf`. */
  eps: Int32Array;
  /** The first state of each alternative. */
  starts: number[];
}

class Builder {
  private readonly kind: number[] = [];
  private readonly arg: number[] = [];
  private readonly sets: CharSet[] = [];
  private readonly starts: number[] = [];

  /** Adds an alternative: one name (`rooted` false: `**` is `*`) or a path from the root. */
  add(pattern: string, rooted: boolean): void {
    const start = this.kind.length;
    this.starts.push(start);
    const segments = rooted ? pattern.split('/') : [pattern];
    // Segments after the last one that is not `**`: a trailing `/**` reads its own `/` (so `a/**` matches `a`).
    let lastName = segments.length - 1;
    while (lastName >= 0 && segments[lastName] === '**') lastName--;
    for (let i = 0; i < segments.length; i++) {
      if (rooted && segments[i] === '**') {
        while (segments[i + 1] === '**') i++;
        if (i < segments.length - 1)
          this.state(DEEP_START).state(DEEP_IN); // reads the `/` before the next segment
        else if (this.kind.length === start) this.state(ANY);
        else this.state(TAIL_START).state(TAIL_IN);
        continue;
      }
      this.segment(segments[i]!);
      if (i < lastName) this.state(LIT, SLASH);
    }
    this.state(ACCEPT);
  }

  private segment(seg: string): void {
    for (let i = 0; i < seg.length; i++) {
      const c = seg[i]!;
      if (c === '*') {
        while (seg[i + 1] === '*') i++;
        this.state(STAR);
      } else if (c === '?') this.state(ONE);
      else if (c === '[' && classEnd(seg, i) > 0) {
        const end = classEnd(seg, i);
        let j = i + 1;
        const negated = seg[j] === '!' || seg[j] === '^';
        if (negated) j++;
        const ranges: number[] = [];
        while (j < end) {
          const from = seg.charCodeAt(j);
          if (seg[j + 1] === '-' && j + 2 < end) {
            ranges.push(from, seg.charCodeAt(j + 2));
            j += 3;
          } else {
            ranges.push(from, from);
            j++;
          }
        }
        this.sets.push({ negated, ranges });
        this.state(SET, this.sets.length - 1);
        i = end;
      } else this.state(LIT, seg.charCodeAt(i));
    }
  }

  private state(kind: number, arg = 0): this {
    this.kind.push(kind);
    this.arg.push(arg);
    return this;
  }

  build(): Program {
    const kind = Uint8Array.from(this.kind);
    const eps = Int32Array.from(kind, (_, s) => epsilonOf(kind, s));
    return { kind, arg: Int32Array.from(this.arg), eps, sets: this.sets, starts: this.starts };
  }
}

const inSet = (set: CharSet, c: number): boolean => {
  let found = false;
  for (let i = 0; i < set.ranges.length && !found; i += 2) found = c >= set.ranges[i]! && c <= set.ranges[i + 1]!;
  return found !== set.negated;
};

/** The state a state also stands for without reading anything (see the table above), or -1. */
function epsilonOf(kind: Uint8Array, s: number): number {
  const k = kind[s];
  return k === STAR || k === ANY || k === TAIL_IN ? s + 1 : k === DEEP_START || k === TAIL_START ? s + 2 : -1;
}

/** A set of states of one program: each state enters it once per generation, with the states its ε moves reach. */
class StateSet {
  readonly list: Int32Array;
  size = 0;
  private readonly seen: Uint32Array;
  private generation = 1;

  constructor(private readonly p: Program) {
    this.list = new Int32Array(p.kind.length);
    this.seen = new Uint32Array(p.kind.length);
  }

  clear(): void {
    this.size = 0;
    if (++this.generation === 0xffffffff) {
      this.seen.fill(0);
      this.generation = 1;
    }
  }

  add(state: number): void {
    // ε moves only go forward, so this ends; a state already in the set brought the rest of its chain with it.
    for (let s = state; s >= 0 && this.seen[s] !== this.generation; s = this.p.eps[s]!) {
      this.seen[s] = this.generation;
      this.list[this.size++] = s;
    }
  }

  accepts(): boolean {
    for (let i = 0; i < this.size; i++) if (this.p.kind[this.list[i]!] === ACCEPT) return true;
    return false;
  }

  /**
   * Reads one character: `to` (cleared first) gets the states every state of this set moves to — at most one each,
   * so a character costs one step per state. Returns the steps.
   */
  read(c: number, to: StateSet): number {
    to.clear();
    const { kind, arg, sets } = this.p;
    const slash = c === SLASH;
    for (let i = 0; i < this.size; i++) {
      const s = this.list[i]!;
      let t = -1;
      switch (kind[s]) {
        case LIT:
          if (arg[s] === c) t = s + 1;
          break;
        case ONE:
          if (!slash) t = s + 1;
          break;
        case SET:
          if (!slash && inSet(sets[arg[s]!]!, c)) t = s + 1;
          break;
        case STAR:
          if (!slash) t = s;
          break;
        case ANY:
        case TAIL_IN:
          t = s;
          break;
        case DEEP_START:
          t = slash ? s : s + 1;
          break;
        case DEEP_IN:
          t = slash ? s - 1 : s;
          break;
        case TAIL_START:
          if (slash) t = s + 1;
          break;
      }
      if (t >= 0) to.add(t);
    }
    return this.size;
  }
}

/** What is known after a folder of the previous path (and the `/` after it). */
interface Level {
  /** Length of the prefix read, `/` included. */
  end: number;
  /** The rooted program's states after it. */
  states: Int32Array;
  excluded: boolean;
}

/** Levels kept at most, all paths' states together (in states): memory stays bounded for any depth. */
const MAX_KEPT_STATES = 1 << 20;

class Walker {
  steps = 0;
  private prev = '';
  private levels: Level[] = [];
  private kept = 0;
  private readonly a: [StateSet, StateSet];
  private readonly r: [StateSet, StateSet];

  constructor(
    private readonly anywhere: Program,
    private readonly rooted: Program,
  ) {
    this.a = [new StateSet(anywhere), new StateSet(anywhere)];
    this.r = [new StateSet(rooted), new StateSet(rooted)];
  }

  matcher(): ExcludeMatcher {
    const fn = (relPath: string) => this.match(relPath);
    Object.defineProperty(fn, 'steps', { get: () => this.steps });
    return fn as ExcludeMatcher;
  }

  private match(path: string): boolean {
    // Resume after the deepest folder the previous path shares with this one (`prev` ends with `/`).
    const max = Math.min(path.length, this.prev.length);
    let common = 0;
    while (common < max && path.charCodeAt(common) === this.prev.charCodeAt(common)) common++;
    let keep = this.levels.length;
    while (keep > 0 && this.levels[keep - 1]!.end > common) keep--;
    for (let i = keep; i < this.levels.length; i++) this.kept -= this.levels[i]!.states.length;
    this.levels.length = keep;
    const last = this.levels[keep - 1];
    if (last?.excluded) return this.remember(path, true);
    let at = last?.end ?? 0;
    let [r, rNext] = this.r;
    r.clear();
    if (last) for (const s of last.states) r.add(s);
    else for (const s of this.rooted.starts) r.add(s);

    for (;;) {
      let end = path.indexOf('/', at);
      if (end === -1) end = path.length;
      // The segment [at, end): a name for the anywhere patterns, the next part of the path for the rooted ones.
      const [a0, a1] = this.a;
      let a = a0;
      let aNext = a1;
      a.clear();
      for (const s of this.anywhere.starts) a.add(s);
      for (let i = at; i < end && (a.size > 0 || r.size > 0); i++) {
        const c = path.charCodeAt(i);
        if (a.size > 0) {
          this.steps += a.read(c, aNext);
          [a, aNext] = [aNext, a];
        }
        if (r.size > 0) {
          this.steps += r.read(c, rNext);
          [r, rNext] = [rNext, r];
        }
      }
      const excluded = a.accepts() || r.accepts();
      if (excluded || end === path.length) {
        if (!excluded && r.size > 0) {
          // Children come next in a walk: read this path's `/` now, for them.
          this.steps += r.read(SLASH, rNext);
          [r, rNext] = [rNext, r];
        }
        this.push(end + 1, r, excluded);
        return this.remember(path, excluded);
      }
      if (r.size > 0) {
        this.steps += r.read(SLASH, rNext);
        [r, rNext] = [rNext, r];
      }
      this.push(end + 1, r, false);
      at = end + 1;
    }
  }

  private push(end: number, r: StateSet, excluded: boolean): void {
    if (this.kept + r.size > MAX_KEPT_STATES) return;
    this.kept += r.size;
    this.levels.push({ end, states: r.list.slice(0, r.size), excluded });
  }

  /** The last level may be past the path's own `/` (pushed for its children): `prev` has that `/` too. */
  private remember(path: string, result: boolean): boolean {
    this.prev = `${path}/`;
    return result;
  }
}
