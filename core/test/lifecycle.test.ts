import { describe, expect, it } from 'vitest';
import { startAgent } from '../../test/helpers/agent.js';
import { FIXTURE } from './helpers/fixture.js';

describe('graceful shutdown', () => {
  it('finishes in-flight requests on SIGTERM, then exits 0', async () => {
    const agent = await startAgent({ plugins: [FIXTURE] });
    const pending = agent.api('GET', '/fixture/slow', { query: { ms: 800 } });
    await new Promise((r) => setTimeout(r, 200));
    const code = agent.stop();
    const res = await pending;
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual({ waited: 800 });
    expect(await code).toBe(0);
    expect(agent.output()).toContain('"msg":"stopped"');
  });

  it('stops accepting new connections once shutting down', async () => {
    const agent = await startAgent({ plugins: [FIXTURE] });
    const pending = agent.api('GET', '/fixture/slow', { query: { ms: 600 } });
    await new Promise((r) => setTimeout(r, 100));
    const stopped = agent.stop();
    // The listener is closed in the same turn as this line is logged (a fixed wait is too short on a loaded machine).
    while (!agent.output().includes('"msg":"shutting down"')) await new Promise((r) => setTimeout(r, 10));
    await expect(fetch(`${agent.url}/api/health`)).rejects.toThrow();
    expect((await pending).status).toBe(200);
    await stopped;
  });
});

describe('one agent per data folder', () => {
  it('refuses a second agent on a folder in use, naming the holder; starts at once after a kill -9', async () => {
    const first = await startAgent({ keep: true });
    await expect(startAgent({ dataDir: first.dataDir })).rejects.toThrow(
      new RegExp(`agent not started: the data folder .* is in use by another agent \\(pid ${first.process.pid}\\)`),
    );
    expect((await first.api('GET', '/health')).status).toBe(200);
    await first.kill();
    const second = await startAgent({ dataDir: first.dataDir });
    expect((await second.api('GET', '/health')).status).toBe(200);
    expect(await second.stop()).toBe(0);
  });
});
