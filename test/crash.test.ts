/**
 * Crash safety of the agent's own state: writers of several kinds (users, API keys, dashboards, settings, blocked
 * IPs) run concurrently while the agent is killed with SIGKILL at random moments, several times, each
 * time restarted on the same data folder. Then:
 * - every acknowledged write is there (users, keys, dashboards, blocked IPs; settings at least the last value
 *   acknowledged);
 * - every acknowledged mutation has its audit record: by resource for the routes that name what they create,
 *   by count for settings (at least as many success records as acknowledgements, at most as many as were sent);
 * - every store opens intact (the agent restarts each time; SQLite integrity checks pass; JSON documents parse).
 */
import { readFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { scratchProxy, startAgent, type TestAgent } from './helpers/agent.js';
import { seededRandom } from './helpers/random.js';

// Deployments are not written here: each takes a second or more (docker compose checks its file), too few per run;
// plugins/deployments/test/lifecycle.test.ts checks that their audit records name them. Edge needs the plugin.
const PLUGINS = ['access', 'system', 'dashboards', 'docker', 'deployments', 'edge', 'security'];
const ROUNDS = 5;
const PASSWORD = 'Crash-Test-Pass-1';
const rnd = seededRandom(Number(process.env.CRASH_SEED ?? 16));

interface Acked {
  users: string[];
  userIds: string[];
  keyIds: string[];
  keys: string[];
  dashboards: string[];
  ips: string[];
  /** Values of `access.retention_days` acknowledged, in order (one writer: increasing). */
  settings: number[];
}

/** A distinct address per round, writer and write. */
const ipOf = (round: number, w: number, i: number) => `10.${round}.${w * 50 + Math.floor(i / 250)}.${i % 250}`;

const work = mkdtempSync(join(tmpdir(), 'agent-crash-'));
const dataDir = join(work, 'data');
// The edge plugin defaults to the host's nginx: a scratch folder and no-op commands (blocks are kept in the security
// plugin's state), and no default server to wait for after a reload.
const CONFIG = {
  proxy: { ...scratchProxy(join(work, 'edge')), default_server: false },
};
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** Runs `write(i)` in a loop until `stop()`; an answer of 2xx is an acknowledgement (`ack(i, body)`). */
async function writer(
  stopped: () => boolean,
  write: (i: number) => Promise<{ status: number; text: string; body: any }>,
  ack: (i: number, body: any) => void,
): Promise<void> {
  for (let i = 0; !stopped(); i++) {
    try {
      const res = await write(i);
      if (res.status >= 200 && res.status < 300) ack(i, res.body);
      else if (!stopped()) throw new Error(`unexpected answer ${res.status}: ${res.text}`);
    } catch (err) {
      // The agent was killed under the request: neither acknowledged nor refused.
      if (stopped()) return;
      throw err;
    }
  }
}

describe('kill -9 under concurrent writes', () => {
  it('loses no acknowledged write nor its audit record, and every store opens intact', async () => {
    const acked: Acked = { users: [], userIds: [], keys: [], keyIds: [], dashboards: [], ips: [], settings: [] };
    let setting = 0;
    for (let round = 0; round < ROUNDS; round++) {
      const agent = await startAgent({ plugins: PLUGINS, config: CONFIG, dataDir, keep: true });
      let killed = false;
      const stopped = () => killed;
      const tag = `r${round}`;
      const writers = [
        ...[0, 1].map((w) =>
          writer(
            stopped,
            (i) =>
              agent.api('POST', '/users', {
                body: { username: `u${tag}w${w}n${i}`, email: `u${tag}w${w}n${i}@example.test`, password: PASSWORD, role: 'viewer' },
              }),
            (i, body) => {
              acked.users.push(`u${tag}w${w}n${i}`);
              acked.userIds.push(String(body.data.id));
            },
          ),
        ),
        ...[0, 1].map((w) =>
          writer(
            stopped,
            (i) => agent.api('POST', '/apikeys', { body: { name: `k${tag}w${w}n${i}` } }),
            (i, body) => {
              acked.keys.push(`k${tag}w${w}n${i}`);
              acked.keyIds.push(String(body.data.id));
            },
          ),
        ),
        ...[0, 1].map((w) =>
          writer(
            stopped,
            (i) => agent.api('POST', '/dashboards', { body: { name: `b${tag}w${w}n${i}`, panels: [] } }),
            (_i, body) => acked.dashboards.push(body.data.id as string),
          ),
        ),
        writer(
          stopped,
          (i) => agent.api('POST', '/security/blocked-ips', { body: { ip: ipOf(round, 0, i), reason: 'crash test' } }),
          (i) => acked.ips.push(ipOf(round, 0, i)),
        ),
        writer(
          stopped,
          () => agent.api('PUT', '/settings', { body: { access: { retention_days: ++setting } } }),
          () => acked.settings.push(setting),
        ),
      ];
      await new Promise((r) => setTimeout(r, 1500 + rnd(2500)));
      killed = true;
      await agent.kill(); // SIGKILL to its process (agent.process.pid)
      await Promise.all(writers);
    }
    expect(acked.users.length).toBeGreaterThan(ROUNDS);
    expect(acked.keys.length).toBeGreaterThan(ROUNDS);
    expect(acked.ips.length).toBeGreaterThan(ROUNDS);
    expect(acked.settings.length).toBeGreaterThan(ROUNDS);
    expect(acked.dashboards.length).toBeGreaterThan(ROUNDS);

    const agent: TestAgent = await startAgent({ plugins: PLUGINS, config: CONFIG, dataDir, keep: true });
    try {
      const users = new Set(((await agent.api('GET', '/users')).body.data as { username: string }[]).map((u) => u.username));
      expect(acked.users.filter((u) => !users.has(u))).toEqual([]);
      const keys = new Set(((await agent.api('GET', '/apikeys')).body.data as { name: string }[]).map((k) => k.name));
      expect(acked.keys.filter((k) => !keys.has(k))).toEqual([]);
      const dashboards = new Set(((await agent.api('GET', '/dashboards')).body.data as { id: string }[]).map((d) => d.id));
      expect(acked.dashboards.filter((d) => !dashboards.has(d))).toEqual([]);
      const ips = new Set(((await agent.api('GET', '/security/blocked-ips')).body.data as { ip: string }[]).map((b) => b.ip));
      expect(acked.ips.filter((ip) => !ips.has(ip))).toEqual([]);
      const settings = (await agent.api('GET', '/settings')).body.data;
      expect(settings.values.access.retention_days).toBeGreaterThanOrEqual(acked.settings.at(-1)!);

      // Audit records: the routes that name what they create, by resource; the others by count.
      const events = async (action: string) => {
        const out: { resource_id: string | null; deployment: string | null }[] = [];
        for (let offset = 0; ; offset += 1000) {
          const page = await agent.api('GET', '/audit/events', { query: { action, success: true, limit: 1000, offset } });
          expect(page.status).toBe(200);
          out.push(...page.body.data);
          if (page.body.data.length < 1000) return out;
        }
      };
      const dashboardIds = new Set((await events('dashboards.create')).map((e) => e.resource_id));
      expect(acked.dashboards.filter((d) => !dashboardIds.has(d))).toEqual([]);
      const blockedIds = new Set((await events('security.blockIp')).map((e) => e.resource_id));
      expect(acked.ips.filter((ip) => !blockedIds.has(ip))).toEqual([]);
      const userIds = new Set((await events('users.create')).map((e) => e.resource_id));
      expect(acked.userIds.filter((id) => !userIds.has(id))).toEqual([]);
      const keyIds = new Set((await events('apikeys.create')).map((e) => e.resource_id));
      expect(acked.keyIds.filter((id) => !keyIds.has(id))).toEqual([]);
      const counted: [string, number, number][] = [['settings.update', acked.settings.length, setting]];
      for (const [action, acks, existing] of counted) {
        const n = (await events(action)).length;
        expect({ action, atLeastAcked: n >= acks, atMostDone: n <= existing }).toEqual({ action, atLeastAcked: true, atMostDone: true });
      }
      console.log(
        `crash test: ${ROUNDS} kills; acknowledged ${acked.users.length} users, ${acked.keys.length} keys, ` +
          `${acked.dashboards.length} dashboards, ${acked.ips.length} blocked IPs, ` +
          `${acked.settings.length} settings writes: none lost, each with its audit record`,
      );
    } finally {
      await agent.stop();
    }

    // Every store intact.
    for (const file of ['plugins/access/audit.sqlite', 'plugins/access/journal.sqlite', 'core/journal.sqlite']) {
      const db = new Database(join(dataDir, file), { readonly: true });
      expect(db.pragma('integrity_check', { simple: true })).toBe('ok');
      db.close();
    }
    for (const file of ['core/settings.json']) expect(() => JSON.parse(readFileSync(join(dataDir, file), 'utf8'))).not.toThrow();
  }, 60_000);
});
