/**
 * Websocket followers of deployment logs share upstreams: one engine stream (per container) or file follow per
 * deployment and containers/file, whatever the number of followers; each follower has its own capped history and a
 * bounded queue. The number of open upstreams is read from the plugin's doctor check.
 */
import { appendFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type TestAgent } from '../../../test/helpers/agent.js';
import { cleanupDocker, openStream, uniqueName, until, webCompose } from './helpers.js';

/** `{followers, upstreams, dropped}` from the plugin's doctor check. */
async function followerStats(agent: TestAgent) {
  const res = await agent.api('GET', '/system/doctor');
  const check = res.body.data.checks.find((c: any) => c.id === 'deployments.log-followers');
  const m = /^(\d+) follower\(s\) on (\d+) shared upstream stream\(s\); (\d+) dropped/.exec(check.detail)!;
  return { followers: Number(m[1]), upstreams: Number(m[2]), dropped: Number(m[3]) };
}

const tickNumber = (m: any) => Number(/^tick-v1-(\d+)$/.exec(m.text)![1]);

describe('shared log followers', () => {
  let agent: TestAgent;
  const name = uniqueName('follow');
  let dir: string;

  beforeAll(async () => {
    agent = await startAgent({ plugins: ['docker', 'deployments', 'system'] });
    const res = await agent.api('POST', '/deployments', { body: { name, compose_content: webCompose(), auto_start: true } });
    expect(res.status, res.text).toBe(201);
    dir = join(agent.dataDir, 'deployments', name);
    mkdirSync(join(dir, 'logs'), { recursive: true });
    writeFileSync(join(dir, 'logs', 'app.log'), Array.from({ length: 5000 }, (_, i) => `line ${i}`).join('\n') + '\n');
    const put = await agent.api('PUT', `/deployments/${name}/log-sources`, { body: { sources: [{ id: 'app', name: 'App log', path: 'logs/app.log' }] } });
    expect(put.status, put.text).toBe(200);
  });
  afterAll(async () => {
    await agent?.stop();
    await cleanupDocker();
  });

  it('serves many followers from one upstream, each with its history, without gaps or duplicates, and closes it when the last leaves', async () => {
    expect(await followerStats(agent)).toMatchObject({ followers: 0, upstreams: 0 });
    const first = Array.from({ length: 10 }, () => openStream(agent, `/deployments/${name}/logs/stream`, { service: 'worker', tail: '2' }));
    await until(async () => first.every((s) => s.lines().length >= 4), Boolean, 10_000, 50);
    expect(await followerStats(agent)).toMatchObject({ followers: 10, upstreams: 1 });
    // A follower joining the running upstream later, with a filter of its own, and one with a longer history.
    const filtered = openStream(agent, `/deployments/${name}/logs/stream`, { service: 'worker', tail: '50', filter: '5' });
    const late = openStream(agent, `/deployments/${name}/logs/stream`, { service: 'worker', tail: '5' });
    await until(async () => late.lines().length >= 10 && filtered.lines().length >= 2, Boolean, 10_000, 50);
    expect(await followerStats(agent)).toMatchObject({ followers: 12, upstreams: 1 });
    for (const s of [...first, late]) {
      const ticks = s.lines().map(tickNumber);
      // Consecutive numbers: the history and the shared live lines join without a gap or a duplicate.
      expect(ticks).toEqual(ticks.map((_, i) => ticks[0]! + i));
      expect(s.lines().every((l) => l.service === 'worker' && l.stream === 'stdout' && typeof l.time === 'string')).toBe(true);
    }
    expect(late.lines().length).toBeGreaterThanOrEqual(10);
    expect(filtered.lines().every((l) => l.text.includes('5'))).toBe(true);
    const filteredTicks = filtered.lines().map(tickNumber);
    expect(new Set(filteredTicks).size).toBe(filteredTicks.length);
    // Another upstream for another source: the file.
    const file = openStream(agent, `/deployments/${name}/logs/stream`, { source: 'app', tail: '1' });
    await until(
      async () => file.lines().length,
      (n) => n >= 1,
      5_000,
      50,
    );
    expect(await followerStats(agent)).toMatchObject({ followers: 13, upstreams: 2 });

    for (const s of [...first, filtered, late, file]) s.ws.close();
    await Promise.all([...first, filtered, late, file].map((s) => s.closed));
    const after = await until(
      () => followerStats(agent),
      (s) => s.upstreams === 0,
      5_000,
      100,
    );
    expect(after).toMatchObject({ followers: 0, upstreams: 0 });
  });

  it('caps the history of tail=0 on a websocket, and a later follower of a file gets its own history then the shared lines once', async () => {
    const all = openStream(agent, `/deployments/${name}/logs/stream`, { source: 'app', tail: '0' });
    await until(
      async () => all.lines().length,
      (n) => n >= 1000,
      10_000,
      50,
    );
    await new Promise((r) => setTimeout(r, 300));
    // 1000 lines, the newest ones, not the 5000 of the file (HTTP still returns everything).
    expect(all.lines().map((l) => l.text)).toEqual(Array.from({ length: 1000 }, (_, i) => `line ${4000 + i}`));
    expect((await agent.api('GET', `/deployments/${name}/logs`, { query: { source: 'app', tail: 0 } })).body.data).toHaveLength(5000);

    appendFileSync(join(dir, 'logs', 'app.log'), 'shared 1\nshared 2\n');
    await until(
      async () => all.lines().length,
      (n) => n >= 1002,
      5_000,
      50,
    );
    const later = openStream(agent, `/deployments/${name}/logs/stream`, { source: 'app', tail: '3' });
    await until(
      async () => later.lines().length,
      (n) => n >= 3,
      5_000,
      20,
    );
    appendFileSync(join(dir, 'logs', 'app.log'), 'shared 3\n');
    await until(
      async () => later.lines().length,
      (n) => n >= 4,
      5_000,
      20,
    );
    expect(later.lines().map((l) => l.text)).toEqual(['line 4999', 'shared 1', 'shared 2', 'shared 3']);
    expect(
      all
        .lines()
        .slice(-3)
        .map((l) => l.text),
    ).toEqual(['shared 1', 'shared 2', 'shared 3']);
    expect(await followerStats(agent)).toMatchObject({ followers: 2, upstreams: 1 });
    all.ws.close();
    later.ws.close();
    await Promise.all([all.closed, later.closed]);
    await until(
      () => followerStats(agent),
      (s) => s.upstreams === 0,
      5_000,
      100,
    );
  });

  it('drops a follower that does not read with close code 4008 while the others get every line', async () => {
    const slow = openStream(agent, `/deployments/${name}/logs/stream`, { source: 'app', tail: '1' });
    const fast = openStream(agent, `/deployments/${name}/logs/stream`, { source: 'app', tail: '1' });
    await until(async () => slow.lines().length >= 1 && fast.lines().length >= 1, Boolean, 5_000, 20);
    // The slow client stops reading its socket: once the kernel buffers are full, lines wait in the agent.
    (slow.ws as any)._socket.pause();
    const big = 'x'.repeat(4000);
    const count = 10_000;
    for (let part = 0; part < 10; part++) {
      appendFileSync(join(dir, 'logs', 'app.log'), Array.from({ length: count / 10 }, (_, i) => `big ${part * (count / 10) + i} ${big}`).join('\n') + '\n');
    }
    const stats = await until(
      () => followerStats(agent),
      (s) => s.dropped >= 1,
      30_000,
      200,
    );
    expect(stats.dropped).toBe(1);
    await until(
      async () => fast.lines().length,
      (n) => n >= 1 + count,
      30_000,
      100,
    );
    appendFileSync(join(dir, 'logs', 'app.log'), 'after the drop\n');
    await until(
      async () => fast.lines().at(-1)?.text,
      (t) => t === 'after the drop',
      5_000,
      50,
    );
    const texts = fast
      .lines()
      .slice(1)
      .map((l) => l.text);
    expect(texts).toHaveLength(count + 1);
    expect(texts.slice(0, count).every((t, i) => t.startsWith(`big ${i} `))).toBe(true);
    (slow.ws as any)._socket.resume();
    const closed = await slow.closed;
    expect(closed.code).toBe(4008);
    expect(closed.reason).toMatch(/too slow/);
    // What the slow follower got before it was dropped is in order and far from everything.
    expect(slow.lines().length).toBeLessThan(count);
    expect(await followerStats(agent)).toMatchObject({ followers: 1, upstreams: 1 });
    fast.ws.close();
    await fast.closed;
    await until(
      () => followerStats(agent),
      (s) => s.upstreams === 0,
      5_000,
      100,
    );
  });

  it('gives a shared upstream only to principals that may read the deployment', async () => {
    const pass = 'Operator-Pass-123!';
    const created = await agent.api('POST', '/users', { body: { username: 'outsider', email: 'outsider@example.com', password: pass, role: 'operator' } });
    expect(created.status, created.text).toBe(201);
    const outsiderToken = await agent.login('outsider', pass);
    const owner = openStream(agent, `/deployments/${name}/logs/stream`, { service: 'worker', tail: '1' });
    await until(
      async () => owner.lines().length,
      (n) => n >= 2,
      10_000,
      50,
    );
    const outsider = openStream(agent, `/deployments/${name}/logs/stream`, { service: 'worker', tail: '1' }, outsiderToken);
    const { code } = await outsider.closed;
    expect(code).toBe(1008);
    expect(outsider.messages).toEqual([]);
    expect(await followerStats(agent)).toMatchObject({ followers: 1, upstreams: 1 });
    owner.ws.close();
    await owner.closed;
  });
});
