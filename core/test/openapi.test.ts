import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Validator } from '@seriousme/openapi-schema-validator';
import { startAgent, request, type TestAgent } from '../../test/helpers/agent.js';
import { FIXTURE, HELLO } from './helpers/fixture.js';

describe('live OpenAPI description', () => {
  let agent: TestAgent;
  let doc: any;
  beforeAll(async () => {
    agent = await startAgent({ plugins: [FIXTURE, HELLO] });
    const res = await agent.api('GET', '/openapi.json');
    expect(res.status).toBe(200);
    doc = res.body;
  });
  afterAll(async () => {
    await agent?.stop();
  });

  it('requires a bearer token', async () => {
    expect((await request(agent.url, 'GET', '/openapi.json')).status).toBe(401);
  });

  it('is a valid OpenAPI 3.1 document', async () => {
    const validator = new Validator();
    const result = await validator.validate(doc);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(validator.version).toBe('3.1');
  });

  it('describes every operation: id, summary, tag, permission, plan support, schemas', () => {
    const ids = new Set<string>();
    for (const [path, item] of Object.entries<Record<string, any>>(doc.paths)) {
      for (const [method, op] of Object.entries<any>(item)) {
        expect(op.operationId, `${method} ${path}`).toMatch(/^[a-z][a-z0-9-]*\.[A-Za-z0-9]+$/);
        expect(ids.has(op.operationId), `duplicate ${op.operationId}`).toBe(false);
        ids.add(op.operationId);
        expect(op.summary).toBeTruthy();
        expect(op.tags).toHaveLength(1);
        expect(typeof op['x-permission']).toBe('string');
        expect(typeof op['x-plan']).toBe('boolean');
        expect(Object.keys(op.responses).length).toBeGreaterThan(0);
      }
    }
    const put = doc.paths['/api/fixture/deployments/{name}/widget'].put;
    expect(put['x-permission']).toBe('widgets:write');
    expect(put['x-plan']).toBe(true);
    expect(put['x-deployment-scoped']).toBe(true);
    expect(put.parameters).toEqual(
      expect.arrayContaining([expect.objectContaining({ name: 'name', in: 'path', required: true }), expect.objectContaining({ name: 'plan', in: 'query' })]),
    );
    const body = put.requestBody.content['application/json'].schema;
    expect(body).toMatchObject({
      type: 'object',
      additionalProperties: false,
      required: ['color'],
      properties: { color: { enum: ['red', 'blue'] }, token: { writeOnly: true } },
    });
    expect(doc.paths['/api/health'].get.security).toEqual([]);
    expect(doc.paths['/api/hello/greetings'].post['x-plan']).toBe(true);
    expect(doc.paths['/api/fixture/deployments/{name}/echo'].get['x-websocket']).toBe(true);
  });

  it('lists only enabled plugins and their permission resources', () => {
    const tags = doc.tags.map((t: { name: string }) => t.name);
    expect(tags).toEqual(expect.arrayContaining(['auth', 'plans', 'plugins', 'system', 'fixture', 'hello']));
    expect(Object.keys(doc.paths).some((p) => p.startsWith('/api/broken'))).toBe(false);
    expect(doc['x-permissions'].map((r: { resource: string }) => r.resource)).toEqual(expect.arrayContaining(['greetings', 'widgets', 'plans']));
  });
});
