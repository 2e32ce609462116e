/**
 * The admin password a first start generates is printed once, as the operator reads the log: one JSON record
 * (`"event":"admin.first_password"`) when stdout is a pipe (the journal, `npm start | …`), a banner and no record
 * when it is a terminal (`script` gives the agent a pseudo-terminal). In both cases no other line holds it, and it
 * is the password that logs in.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { describe, expect, it } from 'vitest';
import { AGENT_ENTRY, AGENT_ENV, NODE_FLAGS } from '../scripts/lib.mjs';
import { firstStartPassword, request, startAgent } from './helpers/agent.js';

const lines = (text: string) => text.split(/\r?\n/).filter((l) => l.trim() !== '');

describe('first-start admin password', () => {
  it('is one JSON record, and in no other line, when the log is not a terminal', async () => {
    const agent = await startAgent({ plugins: ['access'], env: { AGENT_ADMIN_PASSWORD: '' } });
    try {
      const output = agent.output();
      // Every line is a JSON record: no banner between them.
      for (const line of lines(output)) expect(() => JSON.parse(line), line).not.toThrow();
      const password = firstStartPassword(output)!;
      expect(password).toMatch(/^[A-Za-z0-9_-]{20}$/);
      const holding = lines(output).filter((l) => l.includes(password));
      expect(holding).toHaveLength(1);
      const record = JSON.parse(holding[0]!);
      expect(record).toMatchObject({ level: 30, plugin: 'access', event: 'admin.first_password', username: 'admin', password });
      expect(record.msg).toContain('shown once');
      expect(record.msg).not.toContain(password);
      expect(output).not.toContain('First start: created user');
      // It is the password (startAgent logged in with it; so can anyone reading the record).
      expect((await request(agent.url, 'POST', '/auth/login', { body: { username: 'admin', password } })).status).toBe(200);
    } finally {
      await agent.stop();
    }
  });

  it('is a banner, and no record, on a terminal', async () => {
    const work = mkdtempSync(join(tmpdir(), 'agent-first-start-'));
    const config = join(work, 'agent.yaml');
    writeFileSync(config, stringify({ listen: '127.0.0.1:0', data_dir: join(work, 'data'), plugins: { enabled: [] } }));
    const pidFile = join(work, 'agent.pid.txt');
    const command = `echo $$ > '${pidFile}'; exec '${process.execPath}' ${NODE_FLAGS.join(' ')} '${AGENT_ENTRY}' --config '${config}'`;
    // `script` runs the agent on a pseudo-terminal: log.format auto renders for a person there.
    const child = spawn('script', ['-qefc', command, '/dev/null'], {
      cwd: work,
      env: { ...process.env, ...AGENT_ENV, AGENT_ADMIN_PASSWORD: '', NO_COLOR: '1', TERM: 'xterm' },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (c: Buffer) => (output += c.toString()));
    child.stderr.on('data', (c: Buffer) => (output += c.toString()));
    const closed = new Promise((r) => child.once('close', r));
    try {
      const url = await new Promise<string>((resolve, reject) => {
        const timer = setInterval(() => {
          const ready = /agent ready[^\n]*"url":"(http:\/\/[^"]+)"/.exec(output);
          if (ready) {
            clearInterval(timer);
            resolve(ready[1]!);
          }
        }, 50);
        setTimeout(() => {
          clearInterval(timer);
          reject(new Error(`not ready:\n${output}`));
        }, 60_000);
      });
      const password = /^First start: created user "admin" with password: (\S+)\r?$/m.exec(output)?.[1];
      expect(password, output).toMatch(/^[A-Za-z0-9_-]{20}$/);
      expect(output).toMatch(/^This password is shown once\. Change it with PUT \/api\/users\/me\/password/m);
      // Once, in the banner: no record repeats it.
      expect(output.split(password!).length - 1).toBe(1);
      expect(output).not.toContain('admin.first_password');
      expect((await request(url, 'POST', '/auth/login', { body: { username: 'admin', password } })).status).toBe(200);
    } finally {
      process.kill(Number(readFileSync(pidFile, 'utf8').trim()), 'SIGTERM');
      await closed;
      rmSync(work, { recursive: true, force: true });
    }
  });
});
