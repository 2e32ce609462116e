/**
 * A deployment from a template in one call (`POST /deployments {name, template, variables}`, issue 30): planned and
 * applied, created directly and started, the request's two forms kept apart, the template's variables checked, and
 * the tenancy of any other create. The shipped templates publish no default port the agent's own nginx takes.
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type TestAgent } from '../../../test/helpers/agent.js';
import { createTenant, expectGlobalOnly, type Tenant } from '../../docker/test/tenants.js';
import { cleanupDocker, runId, uniqueName, until } from './helpers.js';
import { HELLO_COMPOSE, writeHelloTemplate } from '../../../test/helpers/hello-template.js';

const shipped = join(import.meta.dirname, '..', 'templates');

describe('a deployment from a template in one call', () => {
  let agent: TestAgent;
  let templates: string;
  let deployments: string;
  let tenant: Tenant;
  const planned = uniqueName('tc-plan');
  const direct = uniqueName('tc-direct');
  const owned = uniqueName('tc-owned');

  beforeAll(async () => {
    templates = mkdtempSync(join(tmpdir(), 'agent-template-create-'));
    writeHelloTemplate(templates);
    deployments = mkdtempSync(join(tmpdir(), 'agent-template-deployments-'));
    agent = await startAgent({
      plugins: ['access', 'docker', 'deployments'],
      config: { templates: { path: templates }, deployments: { path: deployments } },
    });
    tenant = await createTenant(agent, `tct${runId}`, [owned]);
  });
  afterAll(async () => {
    await agent?.stop();
    await cleanupDocker();
    rmSync(templates, { recursive: true, force: true });
    rmSync(deployments, { recursive: true, force: true });
  });

  it('plans a template create without writing anything, then applies it', async () => {
    const res = await agent.api('POST', '/deployments', {
      query: { plan: true },
      body: { name: planned, template: 'hello', variables: { GREETING: 'planned', PASSWORD: 'Plan-Secret-1' } },
    });
    expect(res.status, res.text).toBe(201);
    const plan = res.body.data;
    expect(plan.action).toBe('deployments.create');
    expect(existsSync(join(deployments, planned))).toBe(false);
    // The preview is a compose create's: the template's file as a diff, the variables as the `.env` it writes.
    expect(plan.changes.find((c: any) => c.id === 'docker-compose.yml').diff).toContain('+    image: agent-test/busybox:latest');
    expect(plan.changes.find((c: any) => c.id === '.env').after.added.sort()).toEqual(['GREETING', 'PASSWORD']);
    expect(JSON.stringify(plan)).not.toContain('Plan-Secret-1');
    expect(JSON.stringify((await agent.api('GET', `/plans/${plan.id}`)).body)).not.toContain('Plan-Secret-1');

    const applied = await agent.api('POST', `/plans/${plan.id}/apply`);
    expect(applied.status, applied.text).toBe(201);
    expect(applied.body.data.result).toMatchObject({ name: planned, status: 'stopped' });
    expect(readFileSync(join(deployments, planned, 'docker-compose.yml'), 'utf8')).toBe(HELLO_COMPOSE);
    const env = readFileSync(join(deployments, planned, '.env'), 'utf8');
    expect(env).toContain('GREETING=planned');
    expect(env).toContain('PASSWORD=Plan-Secret-1');
    // The deployment keeps its template as its kind.
    expect((await agent.api('GET', `/deployments/${planned}`)).body.data.template).toBe('hello');
  });

  it('makes a plan stale when the template changes before the apply', async () => {
    const name = uniqueName('tc-stale');
    const res = await agent.api('POST', '/deployments', { query: { plan: true }, body: { name, template: 'hello', variables: { PASSWORD: 'x' } } });
    expect(res.status, res.text).toBe(201);
    writeFileSync(join(templates, 'hello', 'docker-compose.yml'), HELLO_COMPOSE.replace('hello}', 'changed}'));
    try {
      const applied = await agent.api('POST', `/plans/${res.body.data.id}/apply`);
      expect(applied.status, applied.text).toBe(409);
      expect(applied.body.code).toBe('PLAN_STALE');
      expect(existsSync(join(deployments, name))).toBe(false);
    } finally {
      writeFileSync(join(templates, 'hello', 'docker-compose.yml'), HELLO_COMPOSE);
    }
  });

  it('creates and starts it in one request: defaults where no variable is set', async () => {
    const res = await agent.api('POST', '/deployments', { body: { name: direct, template: 'hello', variables: { PASSWORD: 'Direct-1' }, auto_start: true } });
    expect(res.status, res.text).toBe(201);
    expect(res.body.data).toMatchObject({ name: direct, status: 'running', start_error: null });
    expect(readFileSync(join(deployments, direct, '.env'), 'utf8')).toContain('GREETING=hello');
    // The page of the template's service, on the port compose published.
    const details = await until(
      () => agent.api('GET', `/deployments/${direct}`),
      (r) => (r.body.data?.ports ?? []).some((p: any) => p.host_port),
    );
    const port = details.body.data.ports.find((p: any) => p.host_port).host_port;
    const page = await until(
      () =>
        fetch(`http://127.0.0.1:${port}/`).then(
          (r) => r.text(),
          () => '',
        ),
      (text) => text.includes('hello'),
    );
    expect(page.trim()).toBe('hello');
  });

  it('keeps the two forms of the request apart and checks the variables', async () => {
    const name = uniqueName('tc-bad');
    const compose = 'services:\n  a:\n    image: agent-test/busybox:latest\n';
    const cases: [string, Record<string, unknown>, number, string, RegExp][] = [
      ['both forms', { compose_content: compose, template: 'hello' }, 400, 'COMPOSE_OR_TEMPLATE', /either compose_content .* or template .*not both/],
      ['neither form', {}, 400, 'COMPOSE_OR_TEMPLATE', /give compose_content .* or template/],
      ['variables with a compose file', { compose_content: compose, variables: { A: '1' } }, 400, 'COMPOSE_OR_TEMPLATE', /variables go with template/],
      ['env_vars with a template', { template: 'hello', env_vars: [{ key: 'PASSWORD', value: 'x' }] }, 400, 'COMPOSE_OR_TEMPLATE', /not env_vars/],
      ['an unknown template', { template: 'nope', variables: { PASSWORD: 'x' } }, 404, 'TEMPLATE_NOT_FOUND', /template 'nope' not found/],
      ['a required variable left out', { template: 'hello' }, 400, 'TEMPLATE_VARIABLE_REQUIRED', /needs the variable 'PASSWORD'/],
      ['a required variable set empty', { template: 'hello', variables: { PASSWORD: '' } }, 400, 'TEMPLATE_VARIABLE_REQUIRED', /'PASSWORD'/],
      [
        'a variable the template lacks',
        { template: 'hello', variables: { PASSWORD: 'x', GREETNG: 'typo' } },
        400,
        'TEMPLATE_VARIABLE_UNKNOWN',
        /no variable 'GREETNG'/,
      ],
      ['a variable name that is no name', { template: 'hello', variables: { 'NOT-A-KEY': 'x' } }, 400, 'VALIDATION_FAILED', /variables/],
    ];
    for (const [what, body, status, code, message] of cases) {
      for (const plan of [true, false]) {
        const res = await agent.api('POST', '/deployments', { query: plan ? { plan: true } : {}, body: { name, ...body } });
        expect(res.status, `${what}${plan ? ' (plan)' : ''}: ${res.text}`).toBe(status);
        expect(res.body.code, what).toBe(code);
        expect(res.body.error, what).toMatch(message);
      }
    }
    expect(existsSync(join(deployments, name))).toBe(false);
  });

  it('describes both forms and their errors in the API description', async () => {
    const doc = (await agent.api('GET', '/openapi.json')).body;
    const op = doc.paths['/api/deployments'].post;
    const body = op.requestBody.content['application/json'].schema;
    expect(body.required).toEqual(['name']);
    expect(Object.keys(body.properties)).toEqual(expect.arrayContaining(['name', 'compose_content', 'env_vars', 'template', 'variables']));
    expect(body.properties.variables['x-cli']).toBe('set');
    const codes = (status: string) => op.responses[status].content['application/json'].schema.properties.code.enum;
    expect(codes('404')).toEqual(['NOT_FOUND', 'TEMPLATE_NOT_FOUND']);
    expect(op.responses['400'].description).toMatch(/COMPOSE_OR_TEMPLATE.*TEMPLATE_VARIABLE_REQUIRED.*TEMPLATE_VARIABLE_UNKNOWN/);
  });

  it('keeps to the tenancy of a create: a scoped user becomes admin of it, a scoped key or a viewer may not create', async () => {
    const mine = await agent.api('POST', '/deployments', { token: tenant.user, body: { name: owned, template: 'hello', variables: { PASSWORD: 'Tenant-1' } } });
    expect(mine.status, mine.text).toBe(201);
    expect((await agent.api('GET', '/deployments', { token: tenant.user })).body.data.map((d: any) => d.name)).toEqual([owned]);
    const users = await agent.api('GET', `/deployments/${owned}/users`);
    expect(users.body.data).toEqual(expect.arrayContaining([expect.objectContaining({ username: tenant.name, access_level: 'admin' })]));
    expectGlobalOnly(
      await agent.api('POST', '/deployments', { token: tenant.key, body: { name: uniqueName('tc-key'), template: 'hello', variables: { PASSWORD: 'x' } } }),
      'a scoped key',
    );
    expectGlobalOnly(
      await agent.api('POST', '/deployments', {
        token: tenant.key,
        query: { plan: true },
        body: { name: uniqueName('tc-key'), template: 'hello', variables: { PASSWORD: 'x' } },
      }),
      'a scoped key (plan)',
    );
    const viewer = await agent.api('POST', '/users', {
      body: { username: `tcv${runId}`, email: `tcv${runId}@example.org`, password: 'Viewer-Pass-2024!x', role: 'viewer', scope: 'global' },
    });
    expect(viewer.status, viewer.text).toBe(201);
    const token = await agent.login(`tcv${runId}`, 'Viewer-Pass-2024!x');
    const refused = await agent.api('POST', '/deployments', {
      token,
      body: { name: uniqueName('tc-viewer'), template: 'hello', variables: { PASSWORD: 'x' } },
    });
    expect(refused.status, refused.text).toBe(403);
  });
});

describe('the shipped templates', () => {
  // The agent's own nginx listens on 8080 and 8443 by default: a template publishing there would not start next to it.
  it('publish no default port on 8080 or 8443', () => {
    const taken = ['8080', '8443'];
    for (const id of readdirSync(shipped)) {
      const meta = JSON.parse(readFileSync(join(shipped, id, 'template.json'), 'utf8'));
      expect(taken, `${id}: default_port`).not.toContain(String(meta.default_port));
      for (const e of meta.env ?? []) if (/PORT/.test(e.key)) expect(taken, `${id}: ${e.key}`).not.toContain(e.default);
      const compose = readFileSync(
        join(
          shipped,
          id,
          readdirSync(join(shipped, id)).find((f) => /compose\.ya?ml$/.test(f))!,
        ),
        'utf8',
      );
      // The host side of each published port: `${VAR:-default}` or a number before the container port.
      for (const [, host] of compose.matchAll(/(?:-|:)(\d+)\}?:\d+"/g)) expect(taken, `${id}: compose port ${host}`).not.toContain(host);
    }
  });
});
