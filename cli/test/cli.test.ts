/**
 * agentctl against the real agent (core + the hello example plugin): login and profiles, commands from the live
 * description, help, skeletons, bodies from files and -f, schema checks before sending, plans and apply, output
 * formats, completion, and routes that appear when the agent changes.
 */
import { spawn } from 'node:child_process';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import { statSync, writeFileSync, readFileSync, existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, REPO_ROOT, startAgent, type TestAgent } from '../../test/helpers/agent.js';
import { CLI, cliHome, type CliHome } from './helpers/cli.js';
import { AgentApiError, AgentClient, ApiDescription, RequestInvalidError, callOperation, loadDescription, DescriptionCache, type Plan } from '@agent/client';

const HELLO = resolve(REPO_ROOT, 'examples/hello-plugin');

describe('agentctl', () => {
  let agent: TestAgent;
  let home: CliHome;
  const greetings = async () => (await agent.api('GET', '/hello/greetings')).body.data as { id: number; name: string }[];

  beforeAll(async () => {
    agent = await startAgent({ plugins: [HELLO, 'access'] });
    home = cliHome();
    const login = await home.run(['login', '--url', agent.url, '--username', 'admin', '--password-stdin'], { input: `${ADMIN_PASSWORD}\n` });
    expect(login.stderr).toBe('');
    expect(login.code).toBe(0);
  });
  afterAll(async () => {
    await agent?.stop();
    home?.remove();
  });

  it('logs in and keeps the profile private (0600 in a 0700 folder)', async () => {
    const path = join(home.env.XDG_CONFIG_HOME!, 'agentctl', 'config.json');
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(statSync(join(home.env.XDG_CONFIG_HOME!, 'agentctl')).mode & 0o777).toBe(0o700);
    const file = JSON.parse(readFileSync(path, 'utf8'));
    expect(file.current).toBe('default');
    expect(file.profiles.default).toMatchObject({
      url: agent.url,
      auth: 'password',
      username: 'admin',
      token: expect.any(String),
      expires_at: expect.any(String),
    });
    expect(JSON.stringify(file)).not.toContain(ADMIN_PASSWORD);
    const profiles = await home.run(['profiles']);
    expect(profiles.stdout).toMatch(/\*\s+default\s+http:\/\/127\.0\.0\.1:\d+\s+password\s+admin/);
    // A wrong password is refused with the agent's error and a non-zero exit.
    const bad = await home.run(['login', '--profile', 'bad', '--url', agent.url, '--username', 'admin'], { input: 'wrong\n' });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('INVALID_CREDENTIALS');
  });

  it('offers the operations of the live description as <group> <operation>', async () => {
    const top = await home.run(['--help']);
    expect(top.code).toBe(0);
    for (const group of ['hello', 'plans', 'plugins', 'auth', 'system']) expect(top.stdout).toMatch(new RegExp(`^  ${group}\\b`, 'm'));
    const group = await home.run(['hello', '--help']);
    expect(group.stdout).toMatch(/create\s+Greet someone \[plan\]\s+\(POST \/api\/hello\/greetings\)/);
    expect(group.stdout).toMatch(/delete <id>\s+Forget a greeting/);
    // The description is cached per agent URL and version.
    const cached = await home.run(['system', 'health']);
    expect(cached.stdout).toMatch(/status\s+ok/);
  });

  it('lists as a table, shows objects as key/value, and --json prints the raw answer', async () => {
    expect((await home.run(['hello', 'list'])).stdout).toContain('(no items)');
    await agent.api('POST', '/hello/greetings', { body: { name: 'Ada' } });
    await agent.api('POST', '/hello/greetings', { body: { name: 'Grace', message: 'Hi Grace' } });
    const table = await home.run(['hello', 'list']);
    expect(table.code).toBe(0);
    const lines = table.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^ID\s+NAME\s+MESSAGE\s+CREATED_AT$/);
    expect(lines[1]).toMatch(/^1\s+Ada\s+Hello, Ada!\s+\d{4}-/);
    expect(lines[2]).toMatch(/^2\s+Grace\s+Hi Grace\s+/);
    const filtered = await home.run(['hello', 'list', '--name', 'Grace', '--json']);
    expect(JSON.parse(filtered.stdout)).toEqual({ data: [expect.objectContaining({ id: 2, name: 'Grace' })] });
    const stats = await home.run(['hello', 'stats']);
    expect(stats.stdout).toMatch(/^greetings\s+2$/m);
    // A document answer is written as is, to stdout or a file.
    const out = join(home.dir, 'openapi.json');
    const saved = await home.run(['system', 'openapi', '--output-file', out]);
    expect(saved.code, saved.stderr).toBe(0);
    // -o names the output format; a file name there is refused before anything is sent, pointing to --output-file.
    const misread = await home.run(['system', 'openapi', '-o', out]);
    expect(misread.code).toBe(2);
    expect(misread.stderr).toContain('(to write an answer to a file: --output-file <file>)');
    expect(JSON.parse(readFileSync(out, 'utf8'))).toMatchObject({
      openapi: '3.1.0',
      paths: expect.objectContaining({ '/api/hello/greetings': expect.any(Object) }),
    });
    const query = await home.run(['hello', 'list', '-q', 'name=Ada', '--json']);
    expect(JSON.parse(query.stdout).data.map((g: { name: string }) => g.name)).toEqual(['Ada']);
  });

  it("prints answers as -o json, yaml or jsonpath (kubectl's template form too); --json is -o json", async () => {
    const json = JSON.parse((await home.run(['hello', 'list', '-o', 'json'])).stdout);
    expect(json.data.map((g: { name: string }) => g.name)).toEqual(['Ada', 'Grace']);
    expect(JSON.parse((await home.run(['hello', 'list', '--json'])).stdout)).toEqual(json);
    expect(JSON.parse((await home.run(['hello', 'list', '-ojson'])).stdout)).toEqual(json);
    expect((await home.run(['hello', 'list', '-o', 'table'])).stdout).toBe((await home.run(['hello', 'list'])).stdout);
    // YAML: the same document.
    const yaml = await home.run(['hello', 'list', '-o', 'yaml']);
    expect(yaml.code).toBe(0);
    expect(yaml.stdout).toMatch(/^data:\n {2}- id: 1\n {4}name: Ada\n/);
    expect(parseYaml(yaml.stdout)).toEqual(json);
    // JSONPath over what -o json prints: each match on a line, filters included.
    expect((await home.run(['hello', 'list', '-o', 'jsonpath=$.data[*].name'])).stdout).toBe('Ada\nGrace\n');
    expect((await home.run(['hello', 'list', '-o', 'jsonpath=$.data[?(@.name=="Grace")].message'])).stdout).toBe('Hi Grace\n');
    expect((await home.run(['hello', 'stats', '-o', 'jsonpath=$.data.greetings'])).stdout).toBe('2\n');
    // kubectl's templates: blocks filled in the text, matches of a block joined by spaces, range … end.
    expect((await home.run(['hello', 'list', '-o', 'jsonpath={.data[*].name}'])).stdout).toBe('Ada Grace\n');
    const table = await home.run(['hello', 'list', '-o', 'jsonpath={range .data[*]}{.id}{"\\t"}{.name}{"\\n"}{end}']);
    expect(table.stdout).toBe('1\tAda\n2\tGrace\n');
    // Errors: in the chosen format on stdout (YAML here), in words for a JSONPath.
    const missing = await home.run(['hello', 'delete', '999', '-o', 'yaml']);
    expect(missing.code).toBe(1);
    expect(parseYaml(missing.stdout)).toEqual({ error: 'greeting 999 not found', code: 'NOT_FOUND' });
    // A wrong format or template is refused before anything is sent.
    const before = (await greetings()).length;
    for (const args of [
      ['-o', 'xml'],
      ['-o', 'jsonpath='],
      ['--json', '-o', 'yaml'],
      ['-o', 'jsonpath={range .data[*]}{.name}'],
    ]) {
      const bad = await home.run(['hello', 'create', '-f', 'name=Never', ...args]);
      expect(bad.code, args.join(' ')).toBe(2);
      expect(bad.stderr, args.join(' ')).toMatch(/^error: /);
    }
    expect((await greetings()).length).toBe(before);
    // Commands of the CLI itself print their data the same way; a profile's token never.
    const profiles = await home.run(['profiles', '-o', 'json']);
    expect(JSON.parse(profiles.stdout)).toEqual({ current: 'default', profiles: { default: expect.objectContaining({ url: agent.url, auth: 'password' }) } });
    expect(profiles.stdout).not.toContain('token');
    expect((await home.run(['profiles', '-o', 'jsonpath={.profiles.default.username}'])).stdout).toBe('admin\n');
    // An agent that does not answer is a doctor report as well.
    const down = await home.run(['doctor', '--url', 'http://127.0.0.1:9', '-o', 'json']);
    expect(down.code).toBe(1);
    expect(JSON.parse(down.stdout)).toMatchObject({ ok: false, checks: [{ id: 'agent', status: 'failed', detail: expect.stringContaining('no answer at') }] });
  });

  it('logs in with --password-stdin as docker login does, and says what to do without a terminal', async () => {
    const other = cliHome();
    try {
      // The whole of stdin but one final line break (CRLF too) is the password.
      const ok = await other.run(['login', '--url', agent.url, '--username', 'admin', '--password-stdin', '-o', 'json'], { input: `${ADMIN_PASSWORD}\r\n` });
      expect(ok.code, ok.stderr).toBe(0);
      expect(JSON.parse(ok.stdout)).toMatchObject({ profile: 'default', url: agent.url, auth: 'password', username: 'admin', expires_at: expect.any(String) });
      expect(ok.stdout).not.toContain('token');
      expect((await other.run(['hello', 'stats'])).code).toBe(0);
      // A password that ends in a space keeps it: only the line break goes.
      const spaced = await other.run(['login', '--url', agent.url, '--username', 'admin', '--password-stdin'], { input: `${ADMIN_PASSWORD} \n` });
      expect(spaced.code).toBe(1);
      expect(spaced.stderr).toContain('INVALID_CREDENTIALS');
      const empty = await other.run(['login', '--url', agent.url, '--username', 'admin', '--password-stdin'], { input: '' });
      expect(empty.code).toBe(2);
      expect(empty.stderr).toContain('--password-stdin: stdin held no password');
      const noName = await other.run(['login', '--profile', 'x', '--url', agent.url, '--password-stdin'], { input: `${ADMIN_PASSWORD}\n` });
      expect(noName.code).toBe(2);
      expect(noName.stderr).toContain('--password-stdin needs --username (stdin holds the password)');
      // No terminal and nothing piped: the way to do it, rather than "empty password".
      const nothing = await other.run(['login', '--url', agent.url, '--username', 'admin'], { input: '' });
      expect(nothing.code).toBe(2);
      expect(nothing.stderr).toContain('no password: stdin is not a terminal to ask on, and it held none. Pipe it in:');
      expect(nothing.stderr).toContain(`agentctl login --url ${agent.url} --username admin --password-stdin`);
    } finally {
      other.remove();
    }
  });

  it('asks for the username and, without echo, the password on a terminal', async () => {
    const other = cliHome();
    try {
      // `script` gives the CLI a pseudo-terminal; what is typed is written when each prompt is on the screen.
      const child = spawn('script', ['-qefc', `'${process.execPath}' '${CLI}' login --url ${agent.url}`, '/dev/null'], {
        env: { ...other.env, TERM: 'xterm' },
      });
      let screen = '';
      const typed = new Set<string>();
      child.stdout.on('data', (c: Buffer) => {
        screen += c.toString();
        if (screen.includes('Username') && !typed.has('user')) {
          typed.add('user');
          child.stdin.write('admin\r');
        }
        if (screen.includes('Password for admin') && !typed.has('password')) {
          typed.add('password');
          child.stdin.write(`${ADMIN_PASSWORD}\r`);
        }
      });
      expect(await new Promise((r) => child.once('close', r)), screen).toBe(0);
      expect(screen).toContain('Logged in to');
      expect(screen).toContain('[input is masked]');
      expect(screen).not.toContain(ADMIN_PASSWORD);
      expect((await other.run(['hello', 'stats'])).code).toBe(0);
    } finally {
      other.remove();
    }
  });

  it('describes every command group in --help', async () => {
    const top = await home.run(['--help']);
    const cached = new DescriptionCache(home.env).latest(agent.url)!;
    const groups = new ApiDescription(cached.document).groups();
    expect(groups.length).toBeGreaterThan(5);
    for (const g of groups) {
      // `  <name>   <description>` with words, not a count of operations.
      const line = new RegExp(`^  ${g.name}\\s+(\\S.*)$`, 'm').exec(top.stdout);
      expect(line, g.name).not.toBeNull();
      expect(line![1], g.name).not.toMatch(/^\d+ operations?$/);
    }
    // A group named after a route tag gets the description of the permission it checks (users:read → users).
    expect(top.stdout).toMatch(/^ {2}apikeys\s+Your own API keys/m);
  });

  it('prints help for an operation: method, path, permission, plan, path args, query and body fields', async () => {
    const [create, del, list, apply, plansList] = await Promise.all([
      home.run(['hello', 'create', '--help']),
      home.run(['hello', 'delete', '--help']),
      home.run(['hello', 'list', '--help']),
      home.run(['help', 'plans', 'apply']),
      home.run(['plans', 'list', '--help']),
    ]);
    expect(create.code).toBe(0);
    expect(create.stdout).toContain('agentctl hello create — Greet someone');
    expect(create.stdout).toMatch(/Method and path\s+POST \/api\/hello\/greetings/);
    expect(create.stdout).toMatch(/Permission\s+greetings:write/);
    expect(create.stdout).toMatch(/Plan\s+supported/);
    expect(create.stdout).toMatch(/name\s+string, required, pattern \^\[A-Za-z\].* — who to greet/);
    expect(create.stdout).toMatch(/message\s+string, optional, 1-200 chars/);
    expect(create.stdout).toContain('--skeleton');

    expect(del.stdout).toMatch(/Method and path\s+DELETE \/api\/hello\/greetings\/\{id\}/);
    expect(del.stdout).toMatch(/Path arguments\n\s+<id>\s+integer, required, >= 1/);
    expect(del.stdout).toContain('Usage\n  agentctl hello delete <id> [options]');

    expect(list.stdout).toMatch(/Permission\s+greetings:read/);
    expect(list.stdout).toMatch(/Plan\s+not supported/);
    expect(list.stdout).toMatch(/--name <value>\s+only greetings for this name — string/);
    expect(list.stdout).not.toContain('Body fields');

    expect(apply.stdout).toMatch(/Method and path\s+POST \/api\/plans\/\{id\}\/apply/);
    expect(apply.stdout).toMatch(/<id>\s+string, required, format uuid/);

    expect(plansList.stdout).toMatch(/--status <value>\s+string, one of: available, applying, applied, failed, obsolete, expired/);
  });

  it('prints a fillable skeleton (JSON, or YAML with comments) and creates from the filled file', async () => {
    const json = await home.run(['hello', 'create', '--skeleton']);
    expect(json.code).toBe(0);
    const skeleton = JSON.parse(json.stdout);
    expect(skeleton).toEqual({ name: '<required: string — who to greet>', message: '<optional: string (1-200 chars)>' });
    const yaml = await home.run(['hello', 'create', '--skeleton', '--yaml']);
    expect(yaml.stdout).toMatch(/^name: .* # required · string · pattern .* · who to greet$/m);
    expect(yaml.stdout).toMatch(/^message: .* # optional · string · 1-200 chars$/m);
    // In YAML the placeholders stay short: the details are in the comments.
    expect(parseYaml(yaml.stdout)).toEqual({ name: '<required: string>', message: '<optional: string>' });

    // A placeholder left in the file is refused before sending.
    const file = join(home.dir, 'greeting.json');
    writeFileSync(file, JSON.stringify({ ...skeleton, name: 'Linus' }));
    const leftover = await home.run(['hello', 'create', '--data', `@${file}`]);
    expect(leftover.code).toBe(2);
    expect(leftover.stderr).toContain('body.message: still holds the skeleton placeholder');

    writeFileSync(file, JSON.stringify({ ...skeleton, name: 'Linus', message: 'Hej Linus' }));
    const created = await home.run(['hello', 'create', '--data', `@${file}`]);
    expect(created.stderr).toBe('');
    expect(created.code).toBe(0);
    expect(created.stdout).toMatch(/^name\s+Linus$/m);
    expect(created.stdout).toMatch(/^message\s+Hej Linus$/m);
    expect((await greetings()).map((g) => g.name)).toContain('Linus');

    // The same from stdin, and -f overriding a field of the document.
    const piped = await home.run(['hello', 'create', '--data', '-', '-f', 'name=Margaret', '--json'], {
      input: JSON.stringify({ name: 'x', message: 'From stdin' }),
    });
    expect(piped.code).toBe(0);
    expect(JSON.parse(piped.stdout).data).toMatchObject({ name: 'Margaret', message: 'From stdin' });
    const inline = await home.run(['hello', 'create', '--data', '{"name": "Inline"}', '--json']);
    expect(JSON.parse(inline.stdout).data).toMatchObject({ name: 'Inline', message: 'Hello, Inline!' });
  });

  it('checks the body against the schema before sending', async () => {
    const before = (await greetings()).length;
    const typo = await home.run(['hello', 'create', '-f', 'nmae=Alan']);
    expect(typo.code).toBe(2);
    expect(typo.stderr).toContain('Request not sent');
    expect(typo.stderr).toContain("body: unknown field 'nmae' — did you mean 'name'?");
    expect(typo.stderr).toContain('body.name: required field is missing');
    const pattern = await home.run(['hello', 'create', '-f', 'name=../etc', '-f', 'message=']);
    expect(pattern.code).toBe(2);
    expect(pattern.stderr).toContain('body.name: does not match ^[A-Za-z][A-Za-z0-9 _-]{0,39}$');
    expect(pattern.stderr).toContain('body.message: must NOT have fewer than 1 characters');
    const path = await home.run(['hello', 'delete', 'abc']);
    expect(path.code).toBe(2);
    expect(path.stderr).toContain('path.id: must be integer');
    const query = await home.run(['plans', 'list', '--status', 'done']);
    expect(query.code).toBe(2);
    expect(query.stderr).toContain('query.status');
    expect((await greetings()).length).toBe(before);
    // --dry-run shows what would be sent, and sends nothing.
    const dry = await home.run(['hello', 'create', '-f', 'name=Dry', '--dry-run']);
    expect(dry.code).toBe(0);
    expect(dry.stdout).toContain(`POST ${agent.url}/api/hello/greetings`);
    expect(JSON.parse(dry.stdout.slice(dry.stdout.indexOf('{')))).toEqual({ name: 'Dry' });
    expect((await greetings()).length).toBe(before);
  });

  it('prints the server error {error, code} and exits non-zero', async () => {
    const missing = await home.run(['hello', 'delete', '999']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('Error: greeting 999 not found (NOT_FOUND, HTTP 404)');
    const asJson = await home.run(['hello', 'delete', '999', '--json']);
    expect(asJson.code).toBe(1);
    expect(JSON.parse(asJson.stdout)).toEqual({ error: 'greeting 999 not found', code: 'NOT_FOUND' });
    const conflict = await home.run(['hello', 'create', '-f', 'name=Ada']);
    expect(conflict.code).toBe(1);
    expect(conflict.stderr).toContain('GREETING_EXISTS');
  });

  it('plans a change, shows it as a diff, applies it, and explains a stale or used plan', async () => {
    const planned = await home.run(['hello', 'create', '-f', 'name=Barbara', '--plan']);
    expect(planned.code).toBe(0);
    expect(planned.stdout).toMatch(/^Plan [0-9a-f-]{36}\s+hello\.create on greeting Barbara\s+\[available\]$/m);
    expect(planned.stdout).toMatch(/^\s+\+ greeting #\d+\s+\(create\)$/m);
    expect(planned.stdout).toMatch(/^\s+\+ name: "Barbara"$/m);
    expect(planned.stdout).toMatch(/^\s+\+ message: "Hello, Barbara!"$/m);
    expect(planned.stdout).toContain('Plan: 1 to create, 0 to update, 0 to delete.');
    const id = /agentctl plans apply ([0-9a-f-]{36})/.exec(planned.stdout)![1]!;
    expect((await greetings()).map((g) => g.name)).not.toContain('Barbara');

    const shown = await home.run(['plans', 'get', id]);
    expect(shown.stdout).toContain('+ name: "Barbara"');

    const applied = await home.run(['plans', 'apply', id]);
    expect(applied.stderr).toBe('');
    expect(applied.code).toBe(0);
    expect(applied.stdout).toContain(`Plan ${id} applied (hello.create).`);
    expect(applied.stdout).toMatch(/^name\s+Barbara$/m);
    expect((await greetings()).map((g) => g.name)).toContain('Barbara');

    const again = await home.run(['plans', 'apply', id]);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('PLAN_NOT_AVAILABLE');
    expect(again.stderr).toContain('plans are single-use');

    // A plan whose dependencies changed is refused with 409 and explained.
    const stale = await home.run(['hello', 'create', '-f', 'name=Edsger', '--plan', '--json']);
    const staleId = JSON.parse(stale.stdout).data.id as string;
    await agent.api('POST', '/hello/greetings', { body: { name: 'Tony' } });
    const refused = await home.run(['plans', 'apply', staleId]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('(PLAN_STALE, HTTP 409)');
    expect(refused.stderr).toContain('The plan is stale: something it depends on changed after the plan was made');
    expect(refused.stderr).toContain('Make a new plan');

    // A delete plan shows what goes away.
    const ada = (await greetings()).find((g) => g.name === 'Ada')!;
    const del = await home.run(['hello', 'delete', String(ada.id), '--plan']);
    expect(del.stdout).toMatch(/^\s+- greeting #\d+\s+\(delete\)$/m);
    expect(del.stdout).toMatch(/^\s+- name: "Ada"$/m);
    // --plan on an operation without plan support is refused locally.
    const noPlan = await home.run(['hello', 'tick', '--plan']);
    expect(noPlan.code).toBe(2);
    expect(noPlan.stderr).toContain('does not support plans');
  });

  it('offers the same as a typed library: checked calls, plans, apply', async () => {
    const client = new AgentClient({ url: `${agent.url}/api/` });
    expect(client.url).toBe(agent.url);
    await client.login({ username: 'admin', password: ADMIN_PASSWORD });
    // The CLI's login already cached this agent's description: the library reads the same cache.
    const { description, fresh } = await loadDescription(client, { cache: new DescriptionCache(home.env) });
    expect(fresh).toBe(false);
    expect(description.find('hello', 'create')?.plan).toBe(true);
    await expect(callOperation(client, description, 'hello.create', { body: { nmae: 'x' } })).rejects.toThrow(RequestInvalidError);
    const planned = await callOperation<Plan>(client, description, 'hello.create', { body: { name: 'Library' }, plan: true });
    expect(planned.status).toBe(201);
    const applied = await client.plans.apply(planned.json!.data.id);
    expect(applied.plan.status).toBe('applied');
    expect(applied.result).toMatchObject({ name: 'Library' });
    const err = await client.plans.apply(planned.json!.data.id).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AgentApiError);
    expect(err).toMatchObject({ status: 409, code: 'PLAN_NOT_AVAILABLE' });
  });

  it('takes URL and token from flags and environment, and never sends a profile token to another URL', async () => {
    const fresh = cliHome();
    try {
      const viaEnv = await fresh.run(['hello', 'list', '--json'], { env: { AGENTCTL_URL: agent.url, AGENTCTL_TOKEN: agent.token } });
      expect(viaEnv.code).toBe(0);
      expect(JSON.parse(viaEnv.stdout).data.length).toBeGreaterThan(0);
      const viaFlags = await fresh.run(['--url', agent.url, '--token', agent.token, 'hello', 'stats']);
      expect(viaFlags.code).toBe(0);
      const none = await fresh.run(['hello', 'list']);
      expect(none.code).toBe(2);
      expect(none.stderr).toContain('no agent configured');
    } finally {
      fresh.remove();
    }

    const seen: IncomingHttpHeaders[] = [];
    const other = createServer((req, res) => {
      seen.push(req.headers);
      // An agent moved elsewhere: the CLI must not follow with the token.
      if (req.url === '/moved/api/health') return res.writeHead(301, { location: `${agent.url}/api/health` }).end();
      res.writeHead(401, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'who are you', code: 'UNAUTHORIZED' }));
    });
    await new Promise<void>((r) => other.listen(0, '127.0.0.1', r));
    try {
      const port = (other.address() as { port: number }).port;
      const res = await home.run(['--url', `http://127.0.0.1:${port}`, 'hello', 'list']);
      expect(res.code).toBe(1);
      expect(seen.length).toBeGreaterThan(0);
      for (const h of seen) expect(h.authorization).toBeUndefined();
      const moved = await home.run(['--url', `http://127.0.0.1:${port}/moved`, '--token', agent.token, 'hello', 'list']);
      expect(moved.code).toBe(1);
      expect(moved.stderr).toContain(`redirects to ${agent.url}/api/health; use the final address as the agent URL`);
    } finally {
      other.close();
    }
  });

  it('keeps several named profiles and switches between them', async () => {
    const second = await home.run(['login', '--profile', 'ci', '--url', agent.url, '--token', agent.token]);
    expect(second.code).toBe(0);
    expect(second.stdout).toContain("saved as profile 'ci'");
    let list = await home.run(['profiles', 'list']);
    expect(list.stdout).toMatch(/^\*\s+ci\s+/m);
    expect(list.stdout).toMatch(/^\s+default\s+/m);
    expect((await home.run(['--profile', 'default', 'hello', 'stats'])).code).toBe(0);
    const unknown = await home.run(['--profile', 'nope', 'hello', 'stats']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain("no profile 'nope'");
    expect((await home.run(['profiles', 'use', 'default'])).code).toBe(0);
    list = await home.run(['profiles']);
    expect(list.stdout).toMatch(/^\*\s+default\s+/m);
    expect((await home.run(['profiles', 'remove', 'ci'])).code).toBe(0);
    expect((await home.run(['profiles'])).stdout).not.toMatch(/\bci\b/);
  });

  it('logs in with an API key made by the CLI itself, and explains a missing permission', async () => {
    const made = await home.run(['apikeys', 'create', '-f', 'name=viewer-key', '-f', 'role=viewer', '--json']);
    expect(made.code, made.stderr).toBe(0);
    const key = JSON.parse(made.stdout).data.key as string;
    const login = await home.run(['login', '--profile', 'viewer', '--url', agent.url, '--api-key-stdin'], { input: `${key}\n` });
    expect(login.code, login.stderr).toBe(0);
    expect(login.stdout).toContain("as API key 'viewer-key'; saved as profile 'viewer'");
    const file = JSON.parse(readFileSync(join(home.env.XDG_CONFIG_HOME!, 'agentctl', 'config.json'), 'utf8'));
    expect(file.profiles.viewer).toMatchObject({ auth: 'api_key', token: key });
    expect((await home.run(['--profile', 'viewer', 'hello', 'list'])).code).toBe(0);
    const denied = await home.run(['--profile', 'viewer', 'hello', 'create', '-f', 'name=Viewer']);
    expect(denied.code).toBe(1);
    expect(denied.stderr).toContain('FORBIDDEN, HTTP 403');
    expect(denied.stderr).toContain("This operation needs the permission 'greetings:write'");
    expect((await home.run(['profiles', 'use', 'default'])).code).toBe(0);
  });

  it('says when the saved login expired', async () => {
    const path = join(home.env.XDG_CONFIG_HOME!, 'agentctl', 'config.json');
    const file = JSON.parse(readFileSync(path, 'utf8'));
    file.profiles.old = { ...file.profiles.default, token: 'eyJhbGciOiJIUzI1NiJ9.e30.invalid', expires_at: '2020-01-01T00:00:00.000Z' };
    writeFileSync(path, JSON.stringify(file));
    const res = await home.run(['--profile', 'old', 'hello', 'list']);
    expect(res.code).toBe(1);
    expect(res.stderr).toContain('HTTP 401');
    expect(res.stderr).toContain(
      "The token of profile 'old' was refused. The saved login expired at 2020-01-01T00:00:00.000Z. Log in again: agentctl login --profile old",
    );
  });

  it('completes groups and operations in bash from the cached description', async () => {
    const script = (await home.run(['completion', 'bash'])).stdout;
    expect(script).toContain('complete -o default -F _agentctl_complete agentctl');
    const complete = async (words: string[]) => {
      const program = [
        `agentctl() { ${JSON.stringify(process.execPath)} ${JSON.stringify(CLI)} "$@"; }`,
        script,
        `COMP_WORDS=(agentctl ${words.map((w) => JSON.stringify(w)).join(' ')}); COMP_CWORD=${words.length}`,
        '_agentctl_complete',
        'printf "%s\\n" "${COMPREPLY[@]}"',
      ].join('\n');
      const child = spawn('bash', ['-c', program], { env: home.env });
      let out = '';
      child.stdout.on('data', (c: Buffer) => (out += c.toString()));
      await new Promise((r) => child.once('close', r));
      return out.trim().split('\n').filter(Boolean);
    };
    expect(await complete(['he'])).toEqual(['hello', 'help']);
    expect(await complete(['hello', ''])).toEqual(['create', 'delete', 'list', 'stats', 'tick']);
    expect(await complete(['plans', 'ap'])).toEqual(['apply']);
    expect(await complete(['hello', 'create', '--pl'])).toEqual(['--plan']);
    expect(await complete(['completion', ''])).toEqual(['bash', 'zsh', 'fish']);
    expect(await complete(['hello', 'list', '-o', 'j'])).toEqual(['json', 'jsonpath=']);
    expect(await complete(['plans', 'list', '--status', 'a'])).toEqual(['available', 'applying', 'applied']);
    expect(await complete(['hello', 'create', '-f', ''])).toEqual(['name=', 'message=']);
    const zsh = await home.run(['__complete', 'zsh', 'hello', 'c']);
    expect(zsh.stdout.trim()).toBe('create:Greet someone');
  });

  it('completes in zsh with the generated function', async () => {
    if (!existsSync('/usr/bin/zsh') && !existsSync('/bin/zsh')) return; // declared in test/env/packages.d/agentctl.txt
    const script = (await home.run(['completion', 'zsh'])).stdout;
    expect(script.startsWith('#compdef agentctl')).toBe(true);
    const program = [
      `agentctl() { ${JSON.stringify(process.execPath)} ${JSON.stringify(CLI)} "$@"; }`,
      'compdef() { :; }',
      '_describe() { print -l -- "${(@P)${@[-1]}}"; }',
      '_files() { print -- "(files)"; }',
      script,
      'words=(agentctl hello ""); CURRENT=3',
      '_agentctl',
    ].join('\n');
    const child = spawn('zsh', ['-f', '-c', program], { env: home.env });
    let out = '';
    let err = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    await new Promise((r) => child.once('close', r));
    expect(err).toBe('');
    expect(out.trim().split('\n')).toEqual([
      'create:Greet someone',
      'delete:Forget a greeting',
      'list:List greetings',
      expect.stringMatching(/^stats:Counters/),
      'tick:Run the tick job now',
    ]);
  });

  it('completes in fish with the generated script', async () => {
    if (!existsSync('/usr/bin/fish') && !existsSync('/bin/fish')) return; // declared in test/env/packages.d/agentctl.txt
    const script = (await home.run(['completion', 'fish'])).stdout;
    expect(script).toContain("complete -c agentctl -f -a '(__agentctl_complete)'");
    const file = join(home.dir, 'agentctl.fish');
    writeFileSync(file, script);
    // fish's own completion engine (`complete -C` completes a command line as Tab would), on the real script.
    const complete = async (line: string) => {
      const program = [
        `function agentctl; ${JSON.stringify(process.execPath)} ${JSON.stringify(CLI)} $argv; end`,
        `source ${file}`,
        `complete -C ${JSON.stringify(line)}`,
      ];
      const child = spawn('fish', ['--no-config', '-c', program.join('\n')], { env: home.env });
      let out = '';
      let err = '';
      child.stdout.on('data', (c: Buffer) => (out += c.toString()));
      child.stderr.on('data', (c: Buffer) => (err += c.toString()));
      await new Promise((r) => child.once('close', r));
      expect(err).toBe('');
      return out.trim().split('\n');
    };
    // Candidates with their descriptions after a tab, as fish shows them.
    expect(await complete('agentctl hello ')).toEqual([
      'create\tGreet someone',
      'delete\tForget a greeting',
      'list\tList greetings',
      expect.stringMatching(/^stats\tCounters/),
      'tick\tRun the tick job now',
    ]);
    expect(await complete('agentctl he')).toEqual([expect.stringMatching(/^hello\t\S/), 'help\tshow help']);
    expect(await complete('agentctl plans list --status a')).toEqual(['applied\tstatus', 'applying\tstatus', 'available\tstatus']);
    expect(await complete('agentctl hello list -o y')).toEqual(['yaml\tthe answer as YAML']);
    // Files where the description has nothing: --data @<path>.
    expect(await complete(`agentctl hello create --data @${join(home.dir, 'agentctl.fi')}`)).toEqual([`@${file}`]);
  });
});

describe('agentctl and a changing agent', () => {
  it('finds routes a restarted agent gained, without a new CLI', async () => {
    const home = cliHome();
    let agent = await startAgent({ keep: true });
    try {
      const login = await home.run(['login', '--url', agent.url, '--username', 'admin'], { input: `${ADMIN_PASSWORD}\n` });
      expect(login.code).toBe(0);
      expect((await home.run(['hello', 'list'])).stderr).toContain("unknown command 'hello'");
      // Same address and data (so the saved login stays valid), now with the hello plugin enabled.
      const listen = new URL(agent.url).host;
      const { dataDir } = agent;
      await agent.stop();
      // While it is down, help and skeletons still work from the cached copy.
      const offline = await home.run(['plans', 'apply', '--help']);
      expect(offline.code).toBe(0);
      expect(offline.stdout).toMatch(/Method and path\s+POST \/api\/plans\/\{id\}\/apply/);
      expect(offline.stderr).toMatch(/warning: cannot reach the agent at .*ECONNREFUSED; using its description cached at/);
      const down = await home.run(['plans', 'list']);
      expect(down.code).toBe(1);
      expect(down.stderr).toContain('ECONNREFUSED');
      agent = await startAgent({ listen, dataDir, plugins: [HELLO] });
      const res = await home.run(['hello', 'create', '-f', 'name=New']);
      expect(res.stderr).toBe('');
      expect(res.code).toBe(0);
      expect(res.stdout).toMatch(/^name\s+New$/m);
    } finally {
      await agent.stop();
      home.remove();
    }
  });

  it('explains an expired plan (410)', async () => {
    const home = cliHome();
    const agent = await startAgent({ plugins: [HELLO], config: { plans: { ttl: '1s' } } });
    try {
      const env = { AGENTCTL_URL: agent.url, AGENTCTL_TOKEN: agent.token };
      const planned = await home.run(['hello', 'create', '-f', 'name=Late', '--plan', '--json'], { env });
      const id = JSON.parse(planned.stdout).data.id as string;
      const expiresAt = Date.parse(JSON.parse(planned.stdout).data.expires_at);
      await new Promise((r) => setTimeout(r, Math.max(0, expiresAt - Date.now() + 50)));
      const res = await home.run(['plans', 'apply', id], { env });
      expect(res.code).toBe(1);
      expect(res.stderr).toContain('(PLAN_EXPIRED, HTTP 410)');
      expect(res.stderr).toContain('The plan expired');
    } finally {
      await agent.stop();
      home.remove();
    }
  });
});

describe('agentctl output into a reader that stops early', () => {
  it('ends quietly when the pipe closes (agentctl --help | head -1)', async () => {
    const child = spawn(process.execPath, [CLI, '--help'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    // Our end is closed before anything is read, as `head` does once it has its lines: every write then fails.
    child.stdout.destroy();
    const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
    expect(stderr).not.toContain('EPIPE');
    expect(code).toBe(0);
  });
});
