import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request, startAgent, type TestAgent } from '../../../test/helpers/agent.js';

const PASS = 'Str0ng-Pass-word!';

/** Minimal RFC 4180 reader (quoted fields, doubled quotes, CRLF records) to check what the export wrote. */
function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let field = '';
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') {
        field += '"';
        i++;
      } else if (c === '"') quoted = false;
      else field += c;
    } else if (c === '"') quoted = true;
    else if (c === ',') {
      row.push(field);
      field = '';
    } else if (c === '\r' && text[i + 1] === '\n') {
      row.push(field);
      rows.push(row);
      row = [];
      field = '';
      i++;
    } else field += c;
  }
  if (field || row.length) throw new Error('CSV does not end with CRLF');
  return rows;
}

describe('audit endpoints', () => {
  let agent: TestAgent;
  let viewerToken: string;
  let opToken: string;
  let opId: number;

  beforeAll(async () => {
    agent = await startAgent({ plugins: ['access'], config: { auth: { login_max_failures: 50 } } });
    opId = (await agent.api('POST', '/users', { body: { username: 'ops', email: 'ops@example.com', password: PASS, role: 'operator' } })).body.data.id;
    const viewerId = (await agent.api('POST', '/users', { body: { username: 'watcher', email: 'w@example.com', password: PASS, role: 'viewer' } })).body.data
      .id;
    await agent.api('POST', `/users/${opId}/deployments`, { body: { deployment_name: 'shop', access_level: 'admin' } });
    await agent.api('POST', `/users/${viewerId}/deployments`, { body: { deployment_name: 'blog', access_level: 'read' } });
    // Events about deployments: grants changed through the deployment-scoped routes.
    await agent.api('PUT', `/users/${viewerId}/deployments/blog`, { body: { access_level: 'write' } });
    await agent.api('PUT', `/users/${opId}/deployments/shop`, { body: { access_level: 'admin' } });
    opToken = await agent.login('ops', PASS);
    viewerToken = await agent.login('watcher', PASS);
    // A failed login with a name that would be a spreadsheet formula, with a comma and a quote.
    await request(agent.url, 'POST', '/auth/login', { body: { username: '=HYPERLINK("http://x",1),b', password: 'wrong' } });
    await request(agent.url, 'POST', '/auth/login', { body: { username: 'ops', password: 'wrong' } });
    await agent.api('POST', '/users', { body: { username: 'bad name', email: 'x@example.com', password: PASS, role: 'viewer' } });
  });
  afterAll(async () => {
    await agent?.stop();
  });

  it('lists events newest first with a page meta, and reads one', async () => {
    const res = await agent.api('GET', '/api/audit/events');
    expect(res.status).toBe(200);
    expect(res.body.meta).toMatchObject({ limit: 50, offset: 0, total: expect.any(Number) });
    const ids = res.body.data.map((e: { id: number }) => e.id);
    expect(ids).toEqual([...ids].sort((a: number, b: number) => b - a));
    const one = await agent.api('GET', `/api/audit/events/${ids[0]}`);
    expect(one.body.data.id).toBe(ids[0]);
    expect((await agent.api('GET', '/api/audit/events/999999')).status).toBe(404);
  });

  it('audits logins as user/api_key actors, successes and failures', async () => {
    const failed = await agent.api('GET', '/api/audit/events', { query: { action: 'auth.login', success: false } });
    expect(failed.body.data.map((e: { actor_name: string }) => e.actor_name)).toEqual(expect.arrayContaining(['ops', '=HYPERLINK("http://x",1),b']));
    expect(
      failed.body.data.every((e: { actor_type: string; success: boolean; status: number }) => e.actor_type === 'user' && !e.success && e.status === 401),
    ).toBe(true);
    const ok = await agent.api('GET', '/api/audit/events', { query: { action: 'auth.login', success: true, actor_id: `user:${opId}` } });
    expect(ok.body.data.length).toBe(1);
  });

  it('applies every filter', async () => {
    const all = (await agent.api('GET', '/api/audit/events', { query: { limit: 1000 } })).body.data as Record<string, unknown>[];
    const sample = all.find((e) => e.deployment === 'shop')!;
    expect(sample).toBeDefined();
    const check = async (query: Record<string, string | number | boolean>, pred: (e: Record<string, unknown>) => boolean) => {
      const res = await agent.api('GET', '/api/audit/events', { query: { ...query, limit: 1000 } });
      expect(res.status, res.text).toBe(200);
      const data = res.body.data as Record<string, unknown>[];
      expect(data.length).toBeGreaterThan(0);
      expect(data.every(pred)).toBe(true);
      expect(data.length).toBe(all.filter(pred).length);
    };
    await check({ actor_type: 'user' }, (e) => e.actor_type === 'user');
    await check({ actor_id: 'user:1' }, (e) => e.actor_id === 'user:1');
    await check({ action: 'users.create' }, (e) => e.action === 'users.create');
    await check({ resource_type: 'users' }, (e) => e.resource_type === 'users');
    await check({ resource_id: String(opId) }, (e) => e.resource_id === String(opId));
    await check({ deployment: 'shop' }, (e) => e.deployment === 'shop');
    await check({ success: false }, (e) => e.success === false);
    await check({ client_ip: '127.0.0.1' }, (e) => e.client_ip === '127.0.0.1');
    await check({ start_time: sample.time as string, end_time: sample.time as string }, (e) => e.time === sample.time);
    const future = await agent.api('GET', '/api/audit/events', { query: { start_time: new Date(Date.now() + 3600_000).toISOString() } });
    expect(future.body.data).toEqual([]);
    const page = await agent.api('GET', '/api/audit/events', { query: { limit: 2, offset: 1 } });
    expect(page.body.data.map((e: { id: number }) => e.id)).toEqual(all.slice(1, 3).map((e) => e.id));
    expect(page.body.meta).toMatchObject({ limit: 2, offset: 1, total: all.length, total_exact: true });
  });

  it('bounds the count of a filtered list and keeps the unfiltered count exact', async () => {
    const db = new Database(join(agent.dataDir, 'plugins', 'access', 'audit.sqlite'));
    const insert = db.prepare(
      `INSERT INTO audit_events (time, time_ms, actor_type, actor_id, action, resource_type, success) VALUES (?, ?, 'system', 'system:test', 'test.bulk', 'test', 1)`,
    );
    const now = Date.now();
    db.transaction(() => {
      for (let i = 0; i < 10_005; i++) insert.run(new Date(now).toISOString(), now);
    })();
    db.close();
    const filtered = await agent.api('GET', '/api/audit/events', { query: { action: 'test.bulk', limit: 1 } });
    expect(filtered.body.meta).toMatchObject({ total: 10_000, total_exact: false });
    const unfiltered = await agent.api('GET', '/api/audit/events', { query: { limit: 1 } });
    expect(unfiltered.body.meta.total).toBeGreaterThan(10_005);
    expect(unfiltered.body.meta.total_exact).toBe(true);
    // The statistics count exactly.
    const stats = await agent.api('GET', '/api/audit/stats', { query: { action: 'test.bulk' } });
    expect(stats.body.data.total).toBe(10_005);
    const db2 = new Database(join(agent.dataDir, 'plugins', 'access', 'audit.sqlite'));
    db2.prepare(`DELETE FROM audit_events WHERE action = 'test.bulk'`).run();
    db2.close();
  });

  it('rejects bad filters', async () => {
    for (const query of [
      { limit: 1001 },
      { limit: 0 },
      { offset: -1 },
      { actor_type: 'robot' },
      { start_time: 'yesterday' },
      { success: 'maybe' },
      { colour: 'red' },
    ]) {
      const res = await agent.api('GET', '/api/audit/events', { query });
      expect(res.status, JSON.stringify(query)).toBe(400);
      expect(res.body.code).toBe('VALIDATION_FAILED');
    }
    const reversed = await agent.api('GET', '/api/audit/events', { query: { start_time: '2030-01-02T00:00:00Z', end_time: '2030-01-01T00:00:00Z' } });
    expect(reversed.status).toBe(400);
  });

  it('shows a non-admin limited to its deployments their events only, not its own global actions', async () => {
    const seen = (await agent.api('GET', '/api/audit/events', { token: opToken, query: { limit: 1000 } })).body.data as {
      deployment: string | null;
      actor_id: string;
    }[];
    expect(seen.length).toBeGreaterThan(0);
    expect(seen.every((e) => e.deployment === 'shop')).toBe(true);
    expect(seen.some((e) => e.deployment === 'shop' && e.actor_id === 'user:1')).toBe(true);
    // Its own login is a global event: the admin sees it, it does not.
    const ownLogin = (await agent.api('GET', '/api/audit/events', { query: { actor_id: `user:${opId}`, action: 'auth.login', success: true } })).body.data as {
      id: number;
    }[];
    expect(ownLogin.length).toBeGreaterThan(0);
    expect((await agent.api('GET', `/api/audit/events/${ownLogin[0]!.id}`, { token: opToken })).status).toBe(404);
    const admins = (await agent.api('GET', '/api/audit/events', { query: { actor_id: 'user:1', deployment: 'blog' } })).body.data as { id: number }[];
    expect(admins.length).toBeGreaterThan(0);
    expect((await agent.api('GET', `/api/audit/events/${admins[0]!.id}`, { token: opToken })).status).toBe(404);
    // Viewers have no audit permission at all.
    expect((await agent.api('GET', '/api/audit/events', { token: viewerToken })).status).toBe(403);
    expect((await agent.api('DELETE', '/api/audit/cleanup', { token: opToken, query: { older_than: 1 } })).status).toBe(403);
  });

  it('computes statistics', async () => {
    const res = await agent.api('GET', '/api/audit/stats');
    expect(res.status).toBe(200);
    const s = res.body.data;
    expect(s.total).toBe(s.succeeded + s.failed);
    expect(s.failed).toBeGreaterThanOrEqual(3);
    expect(s.by_action).toEqual(expect.arrayContaining([expect.objectContaining({ action: 'auth.login' })]));
    expect(s.by_actor[0]).toMatchObject({ actor_id: expect.any(String), count: expect.any(Number) });
    expect(s.by_resource.map((r: { resource_type: string }) => r.resource_type)).toEqual(expect.arrayContaining(['users', 'auth']));
    expect(s.by_success.reduce((n: number, r: { count: number }) => n + r.count, 0)).toBe(s.total);
    expect(s.per_day[0]).toEqual({ day: new Date().toISOString().slice(0, 10), count: expect.any(Number), failed: expect.any(Number) });
    const scoped = (await agent.api('GET', '/api/audit/stats', { token: opToken })).body.data;
    expect(scoped.total).toBeLessThan(s.total);
  });

  it('computes filtered statistics like SQL over the journal (ids from the search)', async () => {
    const journal = new Database(join(agent.dataDir, 'plugins', 'access', 'audit.sqlite'), { readonly: true });
    try {
      const sqlStats = (where: string, params: unknown[]) => {
        const all = (sql: string) => journal.prepare(sql).all(...params);
        const totals = journal.prepare(`SELECT COUNT(*) AS total, COALESCE(SUM(success), 0) AS ok FROM audit_events ${where}`).get(...params) as {
          total: number;
          ok: number;
        };
        return {
          total: totals.total,
          by_action: all(
            `SELECT action, COUNT(*) AS count, SUM(1 - success) AS failed FROM audit_events ${where} GROUP BY action ORDER BY count DESC, action LIMIT 20`,
          ),
          by_resource: all(
            `SELECT resource_type, COUNT(*) AS count FROM audit_events ${where} GROUP BY resource_type ORDER BY count DESC, resource_type LIMIT 20`,
          ),
        };
      };
      const pick = (s: { total: number; by_action: unknown; by_resource: unknown }) => ({ total: s.total, by_action: s.by_action, by_resource: s.by_resource });
      // Read the journal after the request: the agent flushes its queue before answering.
      const admin = (await agent.api('GET', '/api/audit/stats', { query: { actor_type: 'user', success: true } })).body.data;
      expect(pick(admin)).toEqual(sqlStats(`WHERE actor_type = 'user' AND success = 1`, []));
      const scoped = (await agent.api('GET', '/api/audit/stats', { token: opToken, query: { resource_type: 'users' } })).body.data;
      expect(scoped.total).toBeGreaterThan(0);
      expect(pick(scoped)).toEqual(sqlStats(`WHERE resource_type = 'users' AND deployment = 'shop'`, []));
    } finally {
      journal.close();
    }
  });

  it('exports CSV per RFC 4180, safe against formula injection', async () => {
    const res = await agent.api('POST', '/api/audit/export', { body: { format: 'csv', actor_type: 'user' } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/csv/);
    expect(res.headers.get('content-disposition')).toMatch(/attachment; filename="audit-\d{8}T\d{6}\.csv"/);
    const rows = parseCsv(res.text);
    expect(rows[0]).toEqual([
      'id',
      'time',
      'actor_type',
      'actor_id',
      'actor_name',
      'action',
      'resource_type',
      'resource_id',
      'deployment',
      'success',
      'status',
      'client_ip',
      'detail',
    ]);
    expect(rows.slice(1).every((r) => r.length === 13 && r[2] === 'user')).toBe(true);
    const ids = rows.slice(1).map((r) => Number(r[0]));
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
    const evil = rows.find((r) => r[4]!.includes('HYPERLINK'))!;
    expect(evil[4]).toBe(`'=HYPERLINK("http://x",1),b`);
    expect(res.text).toContain(`"'=HYPERLINK(""http://x"",1),b"`);
    const limited = parseCsv((await agent.api('POST', '/api/audit/export', { body: { format: 'csv', limit: 2 } })).text);
    expect(limited).toHaveLength(3);
  });

  it('exports JSON with the same filters', async () => {
    const start = new Date(Date.now() - 3600_000).toISOString();
    const res = await agent.api('POST', '/api/audit/export', {
      body: { format: 'json', action: 'auth.login', start_time: start, end_time: new Date().toISOString() },
    });
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    const events = JSON.parse(res.text) as { action: string; success: boolean }[];
    expect(events.length).toBeGreaterThanOrEqual(4);
    expect(events.every((e) => e.action === 'auth.login')).toBe(true);
    expect(JSON.parse((await agent.api('POST', '/api/audit/export', { body: { action: 'no.such' } })).text)).toEqual([]);
    expect((await agent.api('POST', '/api/audit/export', { body: { format: 'xml' } })).status).toBe(400);
    // The export is itself audited.
    const audited = await agent.api('GET', '/api/audit/events', { query: { action: 'audit.export' } });
    expect(audited.body.data.length).toBeGreaterThan(0);
  });

  it('deletes events older than older_than', async () => {
    expect((await agent.api('DELETE', '/api/audit/cleanup')).status).toBe(400);
    expect((await agent.api('DELETE', '/api/audit/cleanup', { query: { older_than: 0 } })).status).toBe(400);
    // Age some events by writing old timestamps straight into the journal (another connection, WAL mode).
    const db = new Database(join(agent.dataDir, 'plugins', 'access', 'audit.sqlite'));
    const old = Date.now() - 10 * 86400_000;
    const insert = db.prepare(
      `INSERT INTO audit_events (time, time_ms, actor_type, actor_id, action, resource_type, success) VALUES (?, ?, 'system', 'system:test', 'test.old', 'test', 1)`,
    );
    for (let i = 0; i < 5; i++) insert.run(new Date(old).toISOString(), old);
    db.close();
    const before = (await agent.api('GET', '/api/audit/events', { query: { action: 'test.old' } })).body.meta.total;
    expect(before).toBe(5);
    const res = await agent.api('DELETE', '/api/audit/cleanup', { query: { older_than: 86400 } });
    expect(res.status).toBe(200);
    expect(res.body.data.events_deleted).toBe(5);
    expect((await agent.api('GET', '/api/audit/events', { query: { action: 'test.old' } })).body.meta.total).toBe(0);
    expect((await agent.api('GET', '/api/audit/events', { query: { action: 'audit.cleanup', success: true } })).body.data.length).toBe(1);
  });
});
