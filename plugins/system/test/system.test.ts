import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO_ROOT, startAgent, type TestAgent } from '../../../test/helpers/agent.js';

const PASS = 'Str0ng-Pass-word!';

describe('settings and stats', () => {
  let agent: TestAgent;
  let viewer: string;
  let scopedViewer: string;

  beforeAll(async () => {
    // hello-plugin declares a live setting; access declares the audit retention.
    agent = await startAgent({ plugins: ['access', 'system', 'docker', `${REPO_ROOT}/examples/hello-plugin`] });
    // Settings are global: a viewer reads them with global scope (a scoped one is refused, see tenancy.test.ts).
    await agent.api('POST', '/api/users', { body: { username: 'vera', email: 'v@example.com', password: PASS, role: 'viewer', scope: 'global' } });
    viewer = await agent.login('vera', PASS);
    await agent.api('POST', '/api/users', { body: { username: 'sam', email: 's@example.com', password: PASS, role: 'viewer' } });
    scopedViewer = await agent.login('sam', PASS);
  });
  afterAll(async () => {
    await agent?.stop();
  });

  it('lists every setting with its schema, value and how it applies', async () => {
    const res = await agent.api('GET', '/api/settings');
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.values).toMatchObject({ access: { retention_days: 365 }, hello: { shout: false } });
    const retention = res.body.data.settings.find((s: { key: string }) => s.key === 'access.retention_days');
    expect(retention).toMatchObject({ plugin: 'access', name: 'retention_days', default: 365, value: 365, apply: 'live', secret: false });
    expect(retention.schema).toMatchObject({ type: 'integer', minimum: 0 });
    expect(res.body.data.restart_required_keys).toEqual(expect.any(Array));
    // Viewers read settings, but cannot change them.
    expect((await agent.api('GET', '/api/settings', { token: viewer })).status).toBe(200);
    expect((await agent.api('PUT', '/api/settings', { token: viewer, body: {} })).status).toBe(403);
  });

  it('documents every setting in OpenAPI', async () => {
    const doc = (await agent.api('GET', '/api/openapi.json')).body;
    const put = doc.paths['/api/settings'].put;
    const body = put.requestBody.content['application/json'].schema;
    expect(body.additionalProperties).toBe(false);
    expect(body.properties.access.properties.retention_days).toMatchObject({ type: 'integer', default: 365, 'x-apply': 'live' });
    expect(body.properties.hello.properties.shout).toMatchObject({ type: 'boolean', default: false });
    const get = doc.paths['/api/settings'].get.responses['200'].content['application/json'].schema;
    expect(get.properties.data.properties.values.properties.access.properties.retention_days.type).toBe('integer');
  });

  it('updates settings live and refuses unknown sections, keys and bad values', async () => {
    const res = await agent.api('PUT', '/api/settings', { body: { hello: { shout: true }, access: { retention_days: 30 } } });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.applied.sort()).toEqual(['access.retention_days', 'hello.shout']);
    expect(res.body.data.restart_required).toEqual([]);
    expect(res.body.data.values.access.retention_days).toBe(30);
    // Applied live: hello now shouts.
    const greeting = await agent.api('POST', '/api/hello/greetings', { body: { name: 'Ann' } });
    expect(greeting.body.data.message).toBe('HELLO, ANN!');
    for (const body of [
      { nosuch: { a: 1 } },
      { access: { nosuch: 1 } },
      { access: { retention_days: -1 } },
      { access: { retention_days: 'many' } },
      { access: 5 },
    ]) {
      const bad = await agent.api('PUT', '/api/settings', { body });
      expect(bad.status, JSON.stringify(body)).toBe(400);
      expect(bad.body.code).toBe('VALIDATION_FAILED');
    }
    expect((await agent.api('GET', '/api/settings')).body.data.values.access.retention_days).toBe(30);
    const audited = await agent.api('GET', '/api/audit/events', { query: { action: 'settings.update', success: true } });
    expect(audited.body.data.length).toBe(1);
  });

  it('applies the audit retention setting with its job', async () => {
    await agent.api('PUT', '/api/settings', { body: { access: { retention_days: 0 } } });
    const kept = await agent.api('POST', '/api/audit/retention/run');
    expect(kept.body.data).toMatchObject({ status: 'succeeded', output: expect.stringContaining('kept forever') });
    await agent.api('PUT', '/api/settings', { body: { access: { retention_days: 7 } } });
    const run = await agent.api('POST', '/api/audit/retention/run');
    expect(run.body.data).toMatchObject({ status: 'succeeded', output: expect.stringMatching(/^0 events older than 7 days/) });
    const system = await agent.api('GET', '/api/audit/events', { query: { actor_type: 'system', action: 'audit.retention' } });
    expect(system.body.data[0]).toMatchObject({ actor_id: 'system:access', success: true, detail: { events_deleted: 0, retention_days: 7 } });
  });

  it('reports host, docker and agent statistics', async () => {
    const res = await agent.api('GET', '/api/stats');
    expect(res.status, res.text).toBe(200);
    const s = res.body.data;
    expect(s.host.cpu.count).toBeGreaterThan(0);
    expect(s.host.cpu.usage_percent).toBeGreaterThanOrEqual(0);
    expect(s.host.cpu.usage_percent).toBeLessThanOrEqual(100);
    expect(s.host.memory.total_bytes).toBeGreaterThan(s.host.memory.available_bytes);
    expect(s.host.disk.total_bytes).toBeGreaterThan(0);
    expect(s.host.uptime_seconds).toBeGreaterThan(0);
    expect(Object.keys(s.host.load)).toEqual(['1m', '5m', '15m']);
    expect(s.agent.version).toMatch(/^\d+\.\d+\.\d+/);
    expect(s.agent.rss_bytes).toBeGreaterThan(10_000_000);
    // Without the deployments plugin there are no deployment counts.
    expect(s.deployments).toBeNull();
    expect(s.docker).toMatchObject({ available: true, images: expect.any(Number), containers: { total: expect.any(Number) } });
    const asViewer = (await agent.api('GET', '/api/stats', { token: scopedViewer })).body.data;
    // A viewer without deployments sees no containers.
    expect(asViewer.docker.containers.total).toBe(0);
  });
});
