import { Validator } from '@seriousme/openapi-schema-validator';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type TestAgent } from '../../../test/helpers/agent.js';

describe('OpenAPI description of the docker and deployments plugins', () => {
  let agent: TestAgent;
  beforeAll(async () => {
    agent = await startAgent({ plugins: ['docker', 'deployments'] });
  });
  afterAll(async () => {
    await agent?.stop();
  });

  it('is a valid document with every route, its permission, plan support and the status values', async () => {
    const res = await agent.api('GET', '/openapi.json');
    expect(res.status).toBe(200);
    const doc = res.body;
    const result = await new Validator().validate(doc);
    expect(result.errors ?? null, JSON.stringify(result.errors)).toBeNull();
    const ops = new Map<string, any>();
    for (const [path, item] of Object.entries<any>(doc.paths))
      for (const [method, op] of Object.entries<any>(item)) if (op?.operationId) ops.set(op.operationId, { path, method, op });
    for (const id of [
      'deployments.list',
      'deployments.get',
      'deployments.create',
      'deployments.update',
      'deployments.delete',
      'deployments.start',
      'deployments.stop',
      'deployments.restart',
      'deployments.logs',
      'deployments.logSources',
      'deployments.setLogSources',
      'deployments.stats',
      'templates.list',
      'templates.categories',
      'templates.refresh',
      'templates.compose',
      'containers.list',
      'containers.start',
      'containers.stop',
      'containers.restart',
      'containers.delete',
      'containers.logs',
      'images.list',
      'images.pull',
      'images.delete',
      'volumes.list',
      'volumes.create',
      'volumes.delete',
      'networks.list',
      'networks.create',
      'networks.delete',
    ]) {
      expect(ops.has(id), id).toBe(true);
    }
    const text = JSON.stringify(doc);
    for (const status of ['running', 'stopped', 'partial', 'failed', 'unknown']) expect(text).toContain(`"${status}"`);
    expect(JSON.stringify(ops.get('deployments.create').op)).toMatch(/plan/i);
  });
});
