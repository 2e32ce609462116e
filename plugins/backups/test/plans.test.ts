/**
 * Plan previews and the changes they preview run the same operation (`prepare`), so they cannot drift: a preview
 * refuses what the change refuses, with the same answer; it shows what applying stores; a plan's apply checks
 * everything again and refuses what a direct request would refuse at that moment; a change made meanwhile still
 * makes the plan stale. Real agent (backup configuration and object-store registration need no engine work).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type TestAgent } from '../../../test/helpers/agent.js';
import { cleanupDocker, uniqueName } from './helpers/env.js';

const web = `services:
  web:
    image: agent-test/busybox:latest
    command: ["sh", "-c", "exec httpd -f -p 80 -h /www"]
    labels:
      agent.test: "1"
`;
const one = uniqueName('plan1');
const two = uniqueName('plan2');
const store = (name: string) => ({ name, endpoint: 'http://127.0.0.1:9', access_key_id: 'AKIAPLAN', secret_access_key: 'plan-secret-key' });
let agent: TestAgent;

const config = async (name: string) => (await agent.api('GET', `/deployments/${name}/backup-config`)).body.data;
const plans = async () => (await agent.api('GET', '/plans')).body.data.length;
/** A configuration without what only its storing sets (the time of the change, the next run of its schedule). */
const stored = ({ updated_at: _u, next_run: _n, ...rest }: Record<string, unknown>) => rest;

beforeAll(async () => {
  agent = await startAgent({ plugins: ['docker', 'deployments', 'backups'] });
  for (const name of [one, two]) {
    const res = await agent.api('POST', '/deployments', { body: { name, compose_content: web, auto_start: false } });
    expect(res.status, res.text).toBe(201);
  }
  expect((await agent.api('POST', '/object-stores', { body: store('offsite') })).status).toBe(201);
}, 120_000);

afterAll(async () => {
  await agent?.stop();
  cleanupDocker();
});

describe('plan previews and the changes they preview', () => {
  it('refuses to preview what the change refuses, with the same answer, and plans nothing', async () => {
    const cases: [string, string, Record<string, unknown>, number, string][] = [
      ['unknown deployment', uniqueName('none'), { enabled: true }, 404, 'NOT_FOUND'],
      ['a pattern leaving the folder', one, { exclude_patterns: ['../etc'] }, 400, 'INVALID_PATTERN'],
      ['an unknown destination', one, { destination: 'nowhere' }, 400, 'VALIDATION_FAILED'],
      ['a cron the scheduler refuses', one, { enabled: true, schedule: '61 * * * *' }, 400, 'INVALID_CRON'],
    ];
    const before = await config(one);
    const planned = await plans();
    for (const [what, name, body, status, code] of cases) {
      const direct = await agent.api('PUT', `/deployments/${name}/backup-config`, { body });
      const preview = await agent.api('PUT', `/deployments/${name}/backup-config`, { body, query: { plan: true } });
      expect(direct.status, what).toBe(status);
      expect(direct.body.code, what).toBe(code);
      expect(preview.status, what).toBe(direct.status);
      expect(preview.body, what).toEqual(direct.body);
    }
    expect(await plans()).toBe(planned);
    expect(await config(one)).toEqual(before);

    const existing = await agent.api('POST', '/object-stores', { body: store('offsite'), query: { plan: true } });
    expect(existing.status).toBe(409);
    expect(existing.body).toEqual(await agent.api('POST', '/object-stores', { body: store('offsite') }).then((r) => r.body));
    expect(existing.body.code).toBe('OBJECT_STORE_EXISTS');
  });

  it('previews exactly what applying stores, and what the same request stores directly', async () => {
    const body = { enabled: true, schedule: '0 4 * * *', retention: 3, include_database: false, exclude_patterns: ['*.log'], destination: 'offsite' };
    const before = await config(one);
    const preview = await agent.api('PUT', `/deployments/${one}/backup-config`, { body, query: { plan: true } });
    expect(preview.status, preview.text).toBe(201);
    const [change] = preview.body.data.changes;
    expect(change).toMatchObject({ type: 'backup-config', id: one, actions: ['update'], before });
    expect(await config(one)).toEqual(before);

    const applied = await agent.api('POST', `/plans/${preview.body.data.id}/apply`);
    expect(applied.status, applied.text).toBe(200);
    const result = applied.body.data.result;
    expect(stored(result)).toEqual(stored(change.after));
    expect(stored(result)).toMatchObject(body);
    expect(await config(one)).toEqual(result);

    const direct = await agent.api('PUT', `/deployments/${two}/backup-config`, { body });
    expect(direct.status).toBe(200);
    expect(stored(direct.body.data)).toEqual(stored(change.after));
  });

  it('checks again at apply: a plan whose destination is gone is refused as the request is, and changes nothing', async () => {
    expect((await agent.api('POST', '/object-stores', { body: store('brief') })).status).toBe(201);
    const body = { destination: 'brief' };
    const preview = await agent.api('PUT', `/deployments/${two}/backup-config`, { body, query: { plan: true } });
    expect(preview.status, preview.text).toBe(201);
    expect((await agent.api('DELETE', '/object-stores/brief')).status).toBe(200);
    const before = await config(two);
    const applied = await agent.api('POST', `/plans/${preview.body.data.id}/apply`);
    const direct = await agent.api('PUT', `/deployments/${two}/backup-config`, { body });
    expect(direct.status).toBe(400);
    expect(applied.status).toBe(direct.status);
    expect(applied.body).toEqual(direct.body);
    expect(await config(two)).toEqual(before);
  });

  it('still refuses a plan whose dependencies changed meanwhile (409 PLAN_STALE)', async () => {
    const preview = await agent.api('PUT', `/deployments/${two}/backup-config`, { body: { retention: 9 }, query: { plan: true } });
    expect(preview.status, preview.text).toBe(201);
    expect((await agent.api('PUT', `/deployments/${two}/backup-config`, { body: { retention: 5 } })).status).toBe(200);
    const applied = await agent.api('POST', `/plans/${preview.body.data.id}/apply`);
    expect(applied.status).toBe(409);
    expect(applied.body).toMatchObject({ code: 'PLAN_STALE', drifted: ['record:config'] });
    expect((await config(two)).retention).toBe(5);
    // A store of the planned name registered meanwhile: stale too (what it depended on changed), not just refused.
    const planned = await agent.api('POST', '/object-stores', { body: store('later'), query: { plan: true } });
    expect(planned.status, planned.text).toBe(201);
    expect((await agent.api('POST', '/object-stores', { body: store('later') })).status).toBe(201);
    const stale = await agent.api('POST', `/plans/${planned.body.data.id}/apply`);
    expect(stale.status).toBe(409);
    expect(stale.body).toMatchObject({ code: 'PLAN_STALE', drifted: ['record:exists'] });
  });
});
