/**
 * `agentctl deployments create NAME --template T --set KEY=VALUE` (issue 30): the name as an argument and the
 * template's variables as `--set`, both marked for the command line by the live description (`x-cli`); planned,
 * then created and started on the real engine from a template on the local test image.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, startAgent, type TestAgent } from '../../test/helpers/agent.js';
import { cliHome, type CliHome } from './helpers/cli.js';
import { writeHelloTemplate } from '../../test/helpers/hello-template.js';

const run = promisify(execFile);
const name = `t${randomBytes(3).toString('hex')}-clitpl`;

describe('agentctl deployments create NAME --template T --set KEY=VALUE', () => {
  let agent: TestAgent;
  let home: CliHome;
  let work: string;

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), 'agentctl-template-'));
    writeHelloTemplate(join(work, 'templates'));
    agent = await startAgent({
      plugins: ['docker', 'deployments'],
      config: { templates: { path: join(work, 'templates') }, deployments: { path: join(work, 'deployments') } },
    });
    home = cliHome();
    const login = await home.run(['login', '--url', agent.url, '--username', 'admin'], { input: `${ADMIN_PASSWORD}\n` });
    expect(login.code, login.stderr).toBe(0);
  });
  afterAll(async () => {
    await agent?.api('DELETE', `/deployments/${name}`, { query: { remove_files: true } }).catch(() => undefined);
    await agent?.stop();
    const { stdout } = await run('docker', ['ps', '-aq', '--filter', `label=com.docker.compose.project=${name}`]);
    const ids = stdout.split('\n').filter(Boolean);
    if (ids.length) await run('docker', ['rm', '-f', ...ids]).catch(() => undefined);
    await run('docker', ['network', 'rm', `${name}_default`]).catch(() => undefined);
    home?.remove();
    rmSync(work, { recursive: true, force: true });
  });

  it('says how in its help', async () => {
    const help = await home.run(['deployments', 'create', '--help']);
    expect(help.code, help.stderr).toBe(0);
    expect(help.stdout).toContain('agentctl deployments create <name> [options]');
    expect(help.stdout).toMatch(/--set <key=value>\s+an entry of variables \(repeatable\)/);
    expect(help.stdout).toMatch(/^\s+template\s+string, optional/m);
  });

  it('builds the body from the argument and the options: values stay text, never a file to read', async () => {
    const dry = await home.run(['deployments', 'create', name, '--template', 'hello', '--set', 'GREETING=8085', '--set', 'PASSWORD=@not-a-file', '--dry-run']);
    expect(dry.code, dry.stderr).toBe(0);
    const body = JSON.parse(dry.stdout.slice(dry.stdout.indexOf('{')));
    expect(body).toEqual({ name, template: 'hello', variables: { GREETING: '8085', PASSWORD: '@not-a-file' } });
    const bad = await home.run(['deployments', 'create', name, '--template', 'hello', '--set', 'GREETING']);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain('--set GREETING: expected KEY=VALUE');
  });

  it('names a required variable left out, and plans nothing', async () => {
    const res = await home.run(['deployments', 'create', name, '--template', 'hello', '--plan']);
    expect(res.code).not.toBe(0);
    expect(res.stderr).toContain("needs the variable 'PASSWORD'");
    expect(res.stderr).toContain('TEMPLATE_VARIABLE_REQUIRED');
  });

  it('plans, then creates and starts the deployment from the template', async () => {
    const plan = await home.run([
      'deployments',
      'create',
      name,
      '--template',
      'hello',
      '--set',
      'PASSWORD=Cli-Secret-1',
      '--set',
      'GREETING=from-cli',
      '--plan',
    ]);
    expect(plan.code, plan.stderr).toBe(0);
    expect(plan.stdout).toContain('docker-compose.yml');
    expect(plan.stdout).not.toContain('Cli-Secret-1');
    expect((await agent.api('GET', `/deployments/${name}`)).status).toBe(404);

    const created = await home.run([
      'deployments',
      'create',
      name,
      '--template',
      'hello',
      '--set',
      'PASSWORD=Cli-Secret-1',
      '--set',
      'GREETING=from-cli',
      '--auto-start',
      '-o',
      'jsonpath={.data.status}',
    ]);
    // As the README's quick start prints it.
    expect(created.code, created.stderr).toBe(0);
    expect(created.stdout).toBe('running\n');
    expect((await agent.api('GET', `/deployments/${name}`)).body.data).toMatchObject({ status: 'running', template: 'hello' });
    expect(readFileSync(join(work, 'deployments', name, '.env'), 'utf8')).toContain('GREETING=from-cli');
  });
});
