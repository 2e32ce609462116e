import { Validator } from '@seriousme/openapi-schema-validator';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type TestAgent } from '../../../test/helpers/agent.js';

describe('OpenAPI document with the access, credentials and system plugins', () => {
  let agent: TestAgent;
  beforeAll(async () => {
    agent = await startAgent({ plugins: ['access', 'credentials', 'system'] });
  });
  afterAll(async () => {
    await agent?.stop();
  });

  it('is a valid OpenAPI 3.1 document with every operation permissioned', async () => {
    const doc = (await agent.api('GET', '/api/openapi.json')).body;
    const result = await new Validator().validate(doc);
    expect(result.errors ?? [], JSON.stringify(result.errors)).toEqual([]);
    expect(result.valid).toBe(true);
    for (const [path, item] of Object.entries(doc.paths as Record<string, Record<string, { 'x-permission'?: string; operationId?: string }>>)) {
      for (const [method, op] of Object.entries(item)) {
        expect(op['x-permission'], `${method} ${path}`).toBeTruthy();
        expect(op.operationId, `${method} ${path}`).toMatch(/^[a-z]+\.[A-Za-z]+$/);
      }
    }
  });
});
