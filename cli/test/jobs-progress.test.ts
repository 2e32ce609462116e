/**
 * The parts of following a job that need no agent: reading the progress fields of each kind of job, new output
 * lines when the agent keeps only the last ones, and the plain progress lines a non-terminal gets. The last test is
 * why those lines are ours: cli-progress's own mode for a non-terminal repeats the bar on a timer, unchanged lines
 * and blank lines included, where a log wants one line per step forward.
 */
import { PassThrough } from 'node:stream';
import cliProgress from 'cli-progress';
import { describe, expect, it } from 'vitest';
import { measure, newLines, plainDisplay } from '../src/jobs.js';

describe('job progress', () => {
  it('reads the progress of pulls, backups and jobs-plugin jobs', () => {
    expect(measure({ percent: 42.5, current_bytes: 10, total_bytes: 40, layers_done: 1, layers_total: 3 })).toEqual({
      bytes: 10,
      total: 40,
      fraction: 0.425,
      detail: '1/3 layers',
    });
    expect(measure({ step: 'verifying archive', bytes: 50, total_bytes: 200 })).toEqual({ bytes: 50, total: 200, fraction: 0.25, step: 'verifying archive' });
    expect(measure({ step: 'files', bytes: 5, total_bytes: null })).toEqual({ bytes: 5, step: 'files' });
    expect(measure({ step: 'printing', percent: null, current: 30, total: 120, eta_seconds: 9 })).toEqual({
      current: 30,
      count: 120,
      fraction: 0.25,
      step: 'printing',
      eta: 9,
    });
    expect(measure(null)).toEqual({});
  });

  it('finds the new lines of an output the agent keeps only the end of', () => {
    expect(newLines([], ['a', 'b'])).toEqual(['a', 'b']);
    expect(newLines(['a', 'b'], ['a', 'b', 'c'])).toEqual(['c']);
    // The first lines dropped off the front while new ones came.
    expect(newLines(['a', 'b', 'c'], ['b', 'c', 'd', 'e'])).toEqual(['d', 'e']);
    expect(newLines(['a', 'b'], ['a', 'b'])).toEqual([]);
    // Nothing in common: everything is new.
    expect(newLines(['a'], ['x', 'y'])).toEqual(['x', 'y']);
  });

  it('prints a plain line per tenth passed, with the ETA the agent gives, and the output as it comes', () => {
    let text = '';
    const display = plainDisplay(
      (s) => (text += s),
      'pull x',
      (n) => `${n} B`,
    );
    display.update({ fraction: 0, bytes: 0, total: 100 });
    display.line('layer: Pulling fs layer');
    display.update({ fraction: 0.05, bytes: 5, total: 100 });
    display.update({ fraction: 0.31, bytes: 31, total: 100, eta: 7 });
    display.update({ fraction: 0.33, bytes: 33, total: 100, eta: 6 });
    display.update({ fraction: 1, bytes: 100, total: 100 });
    expect(text).toBe(['layer: Pulling fs layer', 'pull x: 31% (31 B of 100 B), ETA 7s', 'pull x: 100% (100 B of 100 B)', ''].join('\n'));
  });

  it("is ours because cli-progress's non-terminal mode repeats the bar on a timer", async () => {
    const out = new PassThrough();
    let text = '';
    out.on('data', (c: Buffer) => (text += c.toString()));
    const multi = new cliProgress.MultiBar(
      { stream: out as unknown as NodeJS.WritableStream, noTTYOutput: true, notTTYSchedule: 50, format: 'pull {bar} {percentage}%' },
      cliProgress.Presets.shades_classic,
    );
    const bar = multi.create(100, 0);
    bar.update(50);
    await new Promise((r) => setTimeout(r, 200));
    bar.update(100);
    multi.stop();
    const lines = text.split('\n');
    // The same 50 % line several times, blank lines between, bar glyphs in a log.
    expect(lines.filter((l) => l.endsWith(' 50%')).length).toBeGreaterThan(1);
    expect(lines.filter((l) => l === '').length).toBeGreaterThan(1);
    expect(text).toContain('░');
  });
});
