import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, request, type TestAgent } from '../../test/helpers/agent.js';

describe('core HTTP', () => {
  let agent: TestAgent;
  beforeAll(async () => {
    agent = await startAgent();
  });
  afterAll(async () => {
    await agent?.stop();
  });

  it('answers health without auth', async () => {
    const res = await request(agent.url, 'GET', '/health');
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ status: 'ok', version: expect.any(String), uptime: expect.stringMatching(/\d+s$/) });
  });

  it('answers auth status without auth', async () => {
    const res = await request(agent.url, 'GET', '/auth/status');
    expect(res.status).toBe(200);
    expect(res.body.data.enabled).toBe(true);
  });

  it('returns JSON 404 for unknown routes and 405 for wrong methods', async () => {
    const notFound = await agent.api('GET', '/no/such/route');
    expect(notFound.status).toBe(404);
    expect(notFound.body).toEqual({ error: expect.stringContaining('/api/no/such/route'), code: 'NOT_FOUND' });
    const wrong = await agent.api('DELETE', '/health');
    expect(wrong.status).toBe(405);
    expect(wrong.body.code).toBe('METHOD_NOT_ALLOWED');
  });
});
