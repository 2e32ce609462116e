/**
 * Exclude patterns (src/archive/paths.ts): the semantics the README documents, the syntax, agreement with picomatch
 * (the matcher used before) on random small patterns and paths, the bounds refused with a reason, and the cost of
 * the patterns that stalled the agent — counted in automaton steps, which do not depend on the machine's load.
 */
import picomatch from 'picomatch';
import { describe, expect, it } from 'vitest';
import {
  excludeMatcher,
  invalidExcludePattern,
  invalidExcludePatterns,
  MAX_ALTERNATIVES,
  MAX_EXPANDED_LENGTH,
  MAX_PATTERN_LENGTH,
  MAX_TOTAL_LENGTH,
  MAX_WILDCARDS,
} from '../src/archive/paths.js';
import { seededRandom } from '../../../test/helpers/random.js';

const excluded = (patterns: string[], paths: string[]) => {
  const m = excludeMatcher(patterns);
  return paths.filter((p) => m(p));
};

describe('exclude patterns: semantics', () => {
  it("the README's examples: a name at any depth, a path from the root, everything below an excluded folder", () => {
    const paths = [
      'app.log',
      'logs/app.log',
      'logs/old/app.log',
      'app.log.1',
      'node_modules',
      'node_modules/x/index.js',
      'web/node_modules/y/package.json',
      'data/cache',
      'data/cache/a/b.bin',
      'x/data/cache/c',
      'data/cached',
      'src/index.js',
    ];
    expect(excluded(['*.log'], paths)).toEqual(['app.log', 'logs/app.log', 'logs/old/app.log']);
    expect(excluded(['node_modules'], paths)).toEqual(['node_modules', 'node_modules/x/index.js', 'web/node_modules/y/package.json']);
    expect(excluded(['data/cache/**'], paths)).toEqual(['data/cache', 'data/cache/a/b.bin']);
    expect(excluded(['data/cache'], paths)).toEqual(['data/cache', 'data/cache/a/b.bin']);
    expect(excluded(['*.log', 'data/cache', 'build/**'], ['a/b/c.log', 'data/cache', 'x/data/cache', 'build/out/x.js', 'src/x.js'])).toEqual([
      'a/b/c.log',
      'data/cache',
      'build/out/x.js',
    ]);
  });

  it('syntax: * ? [sets] ** {alternatives}, dot files like any other, ./ and trailing / ignored', () => {
    const paths = ['.env', 'a.txt', 'b.txt', 'ab.txt', 'c/a.txt', 'x/y/z.tmp', 'x/z.tmp', 'z.tmp', 'x/.git/config', 'f[1].txt', 'f1.txt'];
    expect(excluded(['*'], paths)).toEqual(paths);
    expect(excluded(['?.txt'], paths)).toEqual(['a.txt', 'b.txt', 'c/a.txt']);
    expect(excluded(['[a-b].txt'], paths)).toEqual(['a.txt', 'b.txt', 'c/a.txt']);
    expect(excluded(['[!a].txt'], paths)).toEqual(['b.txt']);
    expect(excluded(['[^ab]?.txt'], paths)).toEqual(['f1.txt']);
    expect(excluded(['f[1].txt'], paths)).toEqual(['f1.txt']);
    expect(excluded(['*.{env,tmp}'], paths)).toEqual(['.env', 'x/y/z.tmp', 'x/z.tmp', 'z.tmp']);
    expect(excluded(['**/z.tmp'], paths)).toEqual(['x/y/z.tmp', 'x/z.tmp', 'z.tmp']);
    expect(excluded(['x/**/z.tmp'], paths)).toEqual(['x/y/z.tmp', 'x/z.tmp']);
    expect(excluded(['x/*.tmp'], paths)).toEqual(['x/z.tmp']);
    expect(excluded(['**/.git/**'], paths)).toEqual(['x/.git/config']);
    expect(excluded(['./x/y/', 'c/'], paths)).toEqual(['c/a.txt', 'x/y/z.tmp']);
    expect(excluded(['a**.txt'], paths)).toEqual(['a.txt', 'ab.txt', 'c/a.txt']);
    // `*` never crosses a folder; a set never matches `/`.
    expect(excluded(['x*z.tmp', 'x?y'], ['x/z.tmp', 'x/y'])).toEqual([]);
    expect(excluded(['x[/]y'], ['x/y'])).toEqual([]);
  });

  it('agrees with picomatch (the matcher before) on random small patterns and paths', () => {
    const rnd = seededRandom(11);
    const pieces = ['a', 'b', 'x', '.', '*', '**', '?', '/', '[ab]', '[a-x]', '{a,b}', '{x,a/b}'];
    const names = ['a', 'b', 'x', '.', 'ab', '/'];
    const clean = (s: string) => s.replace(/\/+/g, '/').replace(/^\/|\/$/g, '');
    const valid = (s: string) => s !== '' && !s.split('/').some((seg) => seg === '.' || seg === '..' || seg === '');
    const paths = new Set<string>();
    while (paths.size < 300) {
      const p = clean(Array.from({ length: 1 + rnd(7) }, () => names[rnd(names.length)]).join(''));
      if (valid(p)) paths.add(p);
    }
    let compared = 0;
    const differences: string[] = [];
    for (let i = 0; i < 1500; i++) {
      const pattern = clean(Array.from({ length: 1 + rnd(5) }, () => pieces[rnd(pieces.length)]).join(''));
      // picomatch's own quirks, left out: `*` after a dot must match something (`*.*` does not match `a.`), `..`
      // inside a name turns into a regular expression's `.`, and `**` next to braces crosses folders (`**{x,y}`
      // is `**/x` there; here, braces expand first, as in a shell: `**x`, a name).
      if (!valid(pattern) || pattern.includes('.*') || pattern.includes('..') || pattern.includes('**{') || pattern.includes('}**')) continue;
      expect(invalidExcludePattern(pattern), pattern).toBeNull();
      const reference = picomatch(pattern, { dot: true, basename: !pattern.includes('/') });
      const m = excludeMatcher([pattern]);
      for (const p of paths) {
        // Ours also excludes what is below an excluded folder: picomatch asked about each folder on the way.
        const segments = p.split('/');
        let want = false;
        for (let k = 1; k <= segments.length && !want; k++) want = reference(segments.slice(0, k).join('/'));
        compared++;
        if (m(p) !== want) differences.push(`${pattern} ${p}: ${!want}`);
      }
    }
    expect(compared).toBeGreaterThan(200_000);
    expect(differences).toEqual([]);
  });

  it('paths in any order give the same answers as paths in walk order (the kept folder states)', () => {
    const rnd = seededRandom(5);
    const patterns = ['a/**/b*', '**/x/?', '*.c', 'b/{a,x}/**', '[ab]x/*'];
    const paths: string[] = [];
    const grow = (dir: string, depth: number) => {
      for (const name of ['a', 'b', 'x', 'ax', 'bx', 'y.c']) {
        const p = dir ? `${dir}/${name}` : name;
        paths.push(p);
        if (depth < 3 && rnd(3) === 0) grow(p, depth + 1);
      }
    };
    grow('', 0);
    const walk = excludeMatcher(patterns);
    const inOrder = paths.map((p) => walk(p));
    const shuffled = paths.map((p, i) => ({ p, i, k: rnd(1 << 30) })).sort((x, y) => x.k - y.k);
    const random = excludeMatcher(patterns);
    for (const { p, i } of shuffled) expect(random(p), p).toBe(inOrder[i]);
    for (const [i, p] of paths.entries()) expect(excludeMatcher(patterns)(p), p).toBe(inOrder[i]);
    expect(inOrder.filter(Boolean).length).toBeGreaterThan(10);
  });
});

describe('exclude patterns: validation (400 INVALID_PATTERN with these reasons)', () => {
  it('refuses absolute paths, .. and empty ones, also through braces', () => {
    expect(invalidExcludePattern('../x')).toMatch(/'\.\.'/);
    expect(invalidExcludePattern('/etc')).toMatch(/relative/);
    expect(invalidExcludePattern('a/../../b')).toMatch(/'\.\.'/);
    expect(invalidExcludePattern('./')).toMatch(/whole/);
    expect(invalidExcludePattern('  ')).toMatch(/empty/);
    expect(invalidExcludePattern('{/etc,x}')).toMatch(/expands to '\/etc', which must be relative/);
    expect(invalidExcludePattern('{..,x}/etc')).toMatch(/expands to '\.\.\/etc', which must not contain '\.\.'/);
    expect(invalidExcludePattern('{,x}')).toMatch(/expands to '', which is empty/);
    expect(invalidExcludePattern('*.log')).toBeNull();
  });

  it('refuses what it does not support rather than matching it differently', () => {
    expect(invalidExcludePattern('!keep.txt')).toMatch(/negation/);
    expect(invalidExcludePattern('@(a|b)')).toMatch(/extglob/);
    expect(invalidExcludePattern('x+(a)')).toMatch(/extglob/);
    expect(invalidExcludePattern('log{1..9}')).toMatch(/brace range/);
    // Plain parentheses, a lone brace or bracket are characters of a name.
    expect(excluded(['file(1).txt', '{a}', 'x[y', 'a{b'], ['file(1).txt', '{a}', 'x[y', 'a{b', 'a'])).toEqual(['file(1).txt', '{a}', 'x[y', 'a{b']);
  });

  it('bounds the length, the wildcards, the alternatives, and all patterns together', () => {
    expect(invalidExcludePattern('a'.repeat(MAX_PATTERN_LENGTH))).toBeNull();
    expect(invalidExcludePattern('a'.repeat(MAX_PATTERN_LENGTH + 1))).toMatch(/longer than 512 characters/);
    expect(invalidExcludePattern('*a'.repeat(MAX_WILDCARDS))).toBeNull();
    expect(invalidExcludePattern('*a'.repeat(MAX_WILDCARDS + 1))).toMatch(/more than 16 wildcards/);
    expect(invalidExcludePattern('?['.repeat(MAX_WILDCARDS))).toBeNull(); // a `[` that closes nothing is a character
    expect(invalidExcludePattern('[a]'.repeat(MAX_WILDCARDS + 1))).toMatch(/wildcards/);
    expect(invalidExcludePattern('**/'.repeat(MAX_WILDCARDS + 1) + 'x')).toMatch(/wildcards/);
    expect(invalidExcludePattern('{a,b}{c,d}{e,f}{g,h}')).toBeNull();
    expect(invalidExcludePattern('{a,b}{c,d}{e,f}{g,h}{i,j}')).toMatch(new RegExp(`more than ${MAX_ALTERNATIVES} alternatives`));
    const nested = (letters: string): string => (letters.length === 1 ? letters : `{${letters[0]},${nested(letters.slice(1))}}`);
    expect(invalidExcludePattern(nested('abcdefghijklmnop'))).toBeNull();
    expect(invalidExcludePattern(nested('abcdefghijklmnopq'))).toMatch(/alternatives/);
    expect(invalidExcludePattern(`{a,b,c}${'x'.repeat(400)}`)).toMatch(new RegExp(`longer than ${MAX_EXPANDED_LENGTH} characters once`));
    const many = Array.from({ length: 9 }, (_, i) => `${'n'.repeat(500)}${i}`);
    expect(many.map(invalidExcludePattern)).toEqual(many.map(() => null));
    expect(invalidExcludePatterns(many)).toMatch(new RegExp(`longer than ${MAX_TOTAL_LENGTH} characters together`));
    expect(invalidExcludePatterns(many.slice(0, 8))).toBeNull();
    expect(() => excludeMatcher(many)).toThrow(/together/);
  });
});

describe('exclude patterns: cost', () => {
  /** Automaton states of a list of patterns: about one per character of each alternative, plus one. */
  const states = (patterns: string[]) => patterns.reduce((n, p) => n + p.length + 1, 0);

  it('the pattern that blocked the agent for 41 s: a bounded number of steps per character', () => {
    // picomatch: seconds for a 40-character name with 8 `*a`, ×10 for each 2 more. Here: at most one step per
    // state and character, whatever the name.
    const pattern = `${'*a'.repeat(15)}*b`;
    expect(invalidExcludePattern(pattern)).toBeNull();
    for (const length of [40, 255, 4096]) {
      const m = excludeMatcher([pattern]);
      const name = 'a'.repeat(length);
      expect(m(name)).toBe(false);
      expect(m(`${name}b`)).toBe(true);
      expect(m.steps).toBeLessThanOrEqual(2 * (length + 2) * states([pattern]));
    }
  });

  it('patterns at every bound, against long names and deep paths: the steps stay within one per state and character', () => {
    const sets: Record<string, string[]> = {
      // A star then a long literal: every partial match of the literal stays alive at once.
      literal: Array.from({ length: 8 }, (_, i) => `*${'a'.repeat(500)}b${i}`),
      stars: Array.from({ length: 8 }, (_, i) => `${`*${'a'.repeat(31)}`.repeat(MAX_WILDCARDS)}`.slice(0, 500) + `b${i}`),
      short: Array.from({ length: 100 }, (_, i) => `*${'a'.repeat(36)}b${i}`),
      // `**` lets every folder of the path start another alignment of the rest of the pattern.
      deep: Array.from({ length: 8 }, (_, i) => `**/${'a/'.repeat(240)}b${i}`),
      deepStars: Array.from({ length: 8 }, (_, i) => `${`**/*${'a'.repeat(20)}/`.repeat(8)}`.slice(0, 500) + `b${i}`),
    };
    const name = 'a'.repeat(255);
    const deepPath = Array.from({ length: 16 }, () => name).join('/');
    const slashes = `${'a/'.repeat(2000)}a`;
    for (const [what, patterns] of Object.entries(sets)) {
      expect(patterns.map(invalidExcludePattern), what).toEqual(patterns.map(() => null));
      expect(invalidExcludePatterns(patterns), what).toBeNull();
      const bound = states(patterns);
      expect(bound, what).toBeLessThanOrEqual(MAX_TOTAL_LENGTH + 101);
      for (const path of [name, deepPath, slashes]) {
        const m = excludeMatcher(patterns);
        expect(m(path), `${what} ${path.length}`).toBe(false);
        expect(m.steps, `${what} ${path.length}`).toBeLessThanOrEqual((path.length + 1) * bound);
      }
      // In walk order a path costs its own name only: the folders above it were read for them.
      const m = excludeMatcher(patterns);
      let dir = '';
      for (let depth = 0; depth < 16; depth++) {
        dir = dir ? `${dir}/${name}` : name;
        const before = m.steps;
        m(dir);
        expect(m.steps - before, `${what} depth ${depth}`).toBeLessThanOrEqual((name.length + 2) * bound);
      }
      for (let k = 0; k < 10; k++) {
        const before = m.steps;
        m(`${dir}/${'a'.repeat(250)}${k}`);
        expect(m.steps - before).toBeLessThanOrEqual((name.length + 2) * bound);
      }
    }
  });
});
