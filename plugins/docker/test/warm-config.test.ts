/**
 * The warm compose parser's life: it answers calls in turn, ends with its children when closed, and a parser that
 * cannot start says why (the guard then runs compose itself). Its answers are compared with compose's own over the
 * guard's whole corpus in host-safety.test.ts.
 */
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import { afterAll, describe, expect, it } from 'vitest';
import { detectCompose } from '../src/compose/cli.js';
import { pythonOf, WarmComposeConfig } from '../src/compose/warm-config.js';

const log = { debug() {}, info() {}, warn() {}, error() {} };
const dir = mkdtempSync(join(tmpdir(), 'agent-warm-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const processesNamed = async (marker: string) => {
  const r = await execa('pgrep', ['-f', marker], { reject: false });
  return r.stdout.split('\n').filter(Boolean).length;
};

describe('warm compose parser', () => {
  it('answers concurrent calls each with its own folder and environment, and ends when closed', async () => {
    // The test environment's compose is Debian's docker-compose (v1), a Python console script.
    const command = await detectCompose('docker-compose');
    const python = command ? pythonOf(command[0]!) : null;
    if (!command || !python) throw new Error('this test needs compose v1 installed as a Python console script (Debian docker-compose)');
    // A name of this test's own for the program, so its processes can be counted.
    const marker = join(dir, `docker-compose-${process.pid}`);
    symlinkSync(command[0]!, marker);
    const warm = new WarmComposeConfig(python, marker, log);
    const results = await Promise.all(
      [1, 2, 3, 4].map(async (i) => {
        const project = join(dir, `p${i}`);
        mkdirSync(project, { recursive: true });
        writeFileSync(join(project, 'c.yml'), `services:\n  s${i}:\n    image: busybox\n    command: "echo \${WHO}"\n`);
        return warm.run(project, ['-f', 'c.yml', '-p', `p${i}`, 'config'], { LANG: 'C.UTF-8', WHO: `caller-${i}` });
      }),
    );
    results.forEach((r, i) => {
      expect(r.exit_code).toBe(0);
      expect(r.stdout).toContain(`s${i + 1}:`);
      expect(r.stdout).toContain(`echo caller-${i + 1}`);
    });
    // A refusal comes back as compose writes it, with its exit code.
    writeFileSync(join(dir, 'bad.yml'), 'services:\n  x:\n    image: busybox\n    no_such_key: 1\n');
    const refused = await warm.run(dir, ['-f', 'bad.yml', 'config'], { LANG: 'C.UTF-8' });
    expect(refused.exit_code).not.toBe(0);
    expect(refused.output).toMatch(/no_such_key/);
    expect(await processesNamed(marker)).toBe(1);
    // Killed from outside: a call that meets the dead parser is refused as ended (the guard then runs compose
    // itself), or, once its end was seen, answered by a new parser; the parser after it is a new one.
    await execa('pkill', ['-KILL', '-f', marker]);
    const afterKill = await warm.run(dir, ['-f', 'bad.yml', 'config'], { LANG: 'C.UTF-8' }).then(
      (r) => (r.output.includes('no_such_key') ? 'answered' : `answered wrongly: ${r.output}`),
      (err: Error) => (/ended/.test(err.message) ? 'refused' : `failed otherwise: ${err.message}`),
    );
    expect(['answered', 'refused']).toContain(afterKill);
    expect((await warm.run(join(dir, 'p1'), ['-f', 'c.yml', '-p', 'p1', 'config'], { LANG: 'C.UTF-8', WHO: 'again' })).stdout).toContain('echo again');
    expect(await processesNamed(marker)).toBe(1);
    warm.close();
    for (let i = 0; i < 50 && (await processesNamed(marker)) > 0; i++) await new Promise((r) => setTimeout(r, 20));
    expect(await processesNamed(marker)).toBe(0);
    await expect(warm.run(dir, ['-f', 'bad.yml', 'config'], { LANG: 'C.UTF-8' })).rejects.toThrow(/closed/);
  });

  it('a parser that cannot start rejects its call with the reason', async () => {
    const warm = new WarmComposeConfig('/bin/false', '/nonexistent/docker-compose', log);
    await expect(warm.run(dir, ['config'], { LANG: 'C.UTF-8' })).rejects.toThrow(/failed to start|ended/);
    warm.close();
  });

  it('tells a Python console script from anything else', () => {
    const script = join(dir, 'script');
    writeFileSync(script, "#!/usr/bin/python3\n__requires__ = 'docker-compose==1.29.2'\n");
    expect(pythonOf(script)).toBe('/usr/bin/python3');
    writeFileSync(script, '#!/bin/sh\nexec docker-compose "$@"\n');
    expect(pythonOf(script)).toBeNull();
    expect(pythonOf(join(dir, 'missing'))).toBeNull();
  });
});
