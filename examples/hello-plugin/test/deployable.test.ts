/**
 * The plugin's deployable template, against the real agent (a child process, as `npm start` runs it) with the
 * docker and deployments plugins: the deployment it renders must start in the host's Docker engine and serve the
 * greeting. The plugin's own logic is tested in-process in hello.test.ts.
 */
import { resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO_ROOT, startAgent, type TestAgent } from '../../../test/helpers/agent.js';

const HELLO = resolve(REPO_ROOT, 'examples/hello-plugin');

describe('deployments from a plugin (POST /api/plugins/:name/deployments)', () => {
  let agent: TestAgent;
  const name = `hello-${process.pid}`;
  const port = 20000 + (process.pid % 20000);
  beforeAll(async () => {
    agent = await startAgent({ plugins: [HELLO, 'docker', 'deployments'] });
  });
  afterAll(async () => {
    await agent?.api('DELETE', `/deployments/${name}`, { query: { remove_files: true } });
    await agent?.stop();
  });

  it('validates the config, then creates and starts the deployment', async () => {
    const bad = await agent.api('POST', '/plugins/hello/deployments', { body: { name, config: { port: 80 } } });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toContain('body.config.port');
    expect((await agent.api('POST', '/plugins/hello/deployments', { body: { name: '../x' } })).status).toBe(400);
    expect((await agent.api('POST', '/plugins/nope/deployments', { body: { name } })).status).toBe(404);
    expect((await agent.api('GET', '/plugins/hello')).body.data.deployable).toMatchObject({ summary: expect.any(String) });

    const res = await agent.api('POST', '/plugins/hello/deployments', {
      body: { name, config: { image: 'agent-test/busybox:latest', port, greeting: 'Hi from a plugin; $(id) stays text' } },
    });
    expect(res.status).toBe(201);
    expect(res.body.data).toMatchObject({ name });
    let text = '';
    for (let i = 0; i < 50 && !text; i++) {
      text = await fetch(`http://127.0.0.1:${port}/`).then(
        (r) => (r.ok ? r.text() : ''),
        () => '',
      );
      if (!text) await new Promise((r) => setTimeout(r, 200));
    }
    expect(text).toBe('Hi from a plugin; $(id) stays text\n');
    expect((await agent.api('POST', '/plugins/hello/deployments', { body: { name } })).status).toBe(409);
  });
});
