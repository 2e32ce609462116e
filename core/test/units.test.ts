import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config/config.js';
import { formatDuration, parseDuration, parseSize } from '../src/config/units.js';

const dir = mkdtempSync(join(tmpdir(), 'agent-units-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The core config a YAML text gives (or the error that stops the agent). */
function load(yaml: string) {
  const path = join(dir, `c${Math.random().toString(36).slice(2)}.yaml`);
  writeFileSync(path, yaml);
  return loadConfig(['--config', path], { AGENT_DATA_DIR: join(dir, 'data') }).core;
}

describe('config durations and sizes (ms, bytes)', () => {
  it('reads every form the config admits', () => {
    expect([90, '90', '30s', '15m', '24h', '7d', '500ms', ' 15m '].map(parseDuration)).toEqual([90, 90, 30, 900, 86400, 604800, 0.5, 900]);
    expect([4096, '4096', '512b', '512kb', '10mb', '2gb'].map(parseSize)).toEqual([4096, 4096, 512, 524288, 10485760, 2147483648]);
    const core = load('auth:\n  token_ttl: 2h\n  lockout: 90\napi:\n  body_limit: 512kb\nplans:\n  ttl: 7d\n');
    expect({ ttl: core.auth.token_ttl, lockout: core.auth.lockout, plans: core.plans.ttl, body: core.api.body_limit }).toEqual({
      ttl: 7200,
      lockout: 90,
      plans: 604800,
      body: 524288,
    });
  });

  it('refuses what is not a duration or a size', () => {
    for (const bad of ['soon', '', '-1h', -1, Number.NaN, null, {}]) expect(parseDuration(bad), String(bad)).toBeNull();
    // `'0'` was 0 bytes (a body limit refusing every body); bytes reads 0, which is not a size. bytes.parse reads
    // `10 parsecs` as 10 (parseInt): only its unit forms reach it.
    for (const bad of ['0', 0, 'ten', '10 parsecs', '10kib', 1.5, -5, null]) expect(parseSize(bad), String(bad)).toBeNull();
  });

  it('leaves the grammar to the schema: forms ms and bytes read (decimals, other units, upper case) stop the agent', () => {
    // What the libraries read beyond the forms the README documents...
    expect(parseDuration('1.5h')).toBe(5400);
    expect(parseDuration('10M')).toBe(600);
    expect(parseSize('1.5mb')).toBe(1572864);
    expect(parseSize('10MB')).toBe(10485760);
    // ...is refused by the config's patterns before they are asked, as before.
    expect(() => load('plans:\n  ttl: 1.5h\n')).toThrow(/plans\.ttl/);
    expect(() => load('auth:\n  lockout: 2w\n')).toThrow(/auth\.lockout/);
    expect(() => load('api:\n  body_limit: 1.5mb\n')).toThrow(/api\.body_limit/);
    expect(() => load('api:\n  body_limit: 10MB\n')).toThrow(/api\.body_limit/);
  });

  it('prints uptimes as 1d 2h 3m 4s', () => {
    expect(formatDuration(93784.9)).toBe('1d 2h 3m 4s');
    expect(formatDuration(0)).toBe('0s');
    expect(formatDuration(3600)).toBe('1h 0s');
  });
});
