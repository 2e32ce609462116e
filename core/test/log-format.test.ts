/**
 * `log.format`: JSON lines when stdout is not a terminal (what the tests, pipes and the journal get), readable
 * lines with `pretty` (or `auto` on a terminal), and an unknown value refused with the key named.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { AGENT_ENTRY } from '../../test/helpers/agent.js';
import { resolveLogFormat } from '../src/log.js';

const work = mkdtempSync(join(tmpdir(), 'agent-logformat-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

const env = (extra: Record<string, string>) => ({
  ...process.env,
  AGENT_LISTEN: '127.0.0.1:0',
  AGENT_ADMIN_PASSWORD: 'Admin-Test-Pass-1',
  AGENT__plugins__enabled: '[]',
  ...extra,
});

/** Starts the core alone and returns what it printed until it was ready, then stops it. */
function firstLines(extra: Record<string, string>): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [AGENT_ENTRY], {
      cwd: work,
      env: env({ AGENT_DATA_DIR: join(work, `data-${Object.values(extra).join('-')}`), ...extra }),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    const timer = setTimeout(() => reject(new Error(`not ready: ${out}`)), 30_000);
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString();
      if (/agent ready/.test(out)) {
        clearTimeout(timer);
        child.once('exit', () => resolve(out));
        child.kill('SIGTERM');
      }
    });
  });
}

describe('log.format', () => {
  it('auto is pretty on a terminal and JSON elsewhere', () => {
    expect(resolveLogFormat('auto', true)).toBe('pretty');
    expect(resolveLogFormat('auto', false)).toBe('json');
    expect(resolveLogFormat('json', true)).toBe('json');
    expect(resolveLogFormat('pretty', false)).toBe('pretty');
  });

  it('writes JSON lines into a pipe by default, readable lines with pretty', async () => {
    const json = await firstLines({});
    const ready = json.split('\n').find((l) => l.includes('agent ready'))!;
    expect(JSON.parse(ready)).toMatchObject({ level: 30, msg: 'agent ready' });
    const pretty = await firstLines({ AGENT_LOG_FORMAT: 'pretty' });
    expect(pretty).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: agent ready \{"url":"http:\/\/127\.0\.0\.1:\d+"/m);
    expect(pretty).not.toContain('"level":30');
  });

  it('refuses an unknown format, naming the key', () => {
    const r = spawnSync(process.execPath, [AGENT_ENTRY], {
      cwd: work,
      env: env({ AGENT_DATA_DIR: join(work, 'bad'), AGENT_LOG_FORMAT: 'xml' }),
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('config.log.format');
  });
});
