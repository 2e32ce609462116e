/**
 * Two agents on one host, each with its own data folder, started at once: each runs its own nginx (proxy.mode own,
 * the default) on its own ports with its own files, routes its own domain to its own container, and sees nothing of
 * the other's — not on its proxy, not in its API. A third agent asking for ports the first holds does not start its
 * proxy and says which port and which setting. The host's /etc/nginx is left as it was. Real nginx, real Docker.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type TestAgent } from './helpers/agent.js';
import { treeHashes } from './helpers/files.js';
import { freePort, waitFor } from './helpers/net.js';
import { hit } from '../plugins/edge/test/helpers/nginx.js';
import { createDeployment, uniqueName } from '../plugins/edge/test/helpers/deployment.js';

const PLUGINS = ['docker', 'deployments', 'edge', 'security', 'system'];

interface Side {
  name: string;
  agent: TestAgent;
  dataDir: string;
  app: string;
  host: string;
  http: number;
  https: number;
}

/** The pid of a running nginx master of this configuration, or null. */
function master(conf: string): number | null {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmd = readFileSync(`/proc/${entry}/cmdline`, 'utf8').replaceAll('\0', ' ');
      if (cmd.startsWith('nginx: master process') && cmd.includes(` -c ${conf} `)) return Number(entry);
    } catch {
      // gone meanwhile
    }
  }
  return null;
}

const confOf = (s: Side) => join(s.dataDir, 'plugins', 'edge', 'nginx', 'nginx.conf');

describe('two agents with different data folders on one host', () => {
  // Made in beforeAll (a filtered run that skips these tests leaves nothing behind).
  const work = join(tmpdir(), `agent-two-${randomBytes(4).toString('hex')}`);
  const sides: Side[] = [];
  const extra: TestAgent[] = [];
  let hostNginx: Record<string, string>;

  beforeAll(async () => {
    mkdirSync(work, { recursive: true });
    hostNginx = treeHashes('/etc/nginx');
    const plan = await Promise.all(
      ['one', 'two'].map(async (name) => ({
        name,
        dataDir: join(work, name),
        app: uniqueName(`two-${name}`),
        http: await freePort(),
        https: await freePort(),
      })),
    );
    // Started at once: neither waits for the other, and nothing they share decides who gets what.
    const started = await Promise.allSettled(
      plan.map((p) =>
        startAgent({ plugins: PLUGINS, dataDir: p.dataDir, config: { proxy: { http_port: p.http, https_port: p.https, listen_address: '127.0.0.1' } } }),
      ),
    );
    // One that failed to start must not leave the other (and its nginx) running: afterAll stops what started.
    for (const r of started) if (r.status === 'fulfilled') extra.push(r.value);
    const failed = started.find((r) => r.status === 'rejected');
    if (failed) throw failed.reason;
    extra.length = 0;
    plan.forEach((p, i) => sides.push({ ...p, agent: (started[i] as PromiseFulfilledResult<TestAgent>).value, host: `${p.app}.example.test` }));
    await Promise.all(sides.map((s) => createDeployment(s.agent, s.app)));
    const added = await Promise.all(
      sides.map((s) => s.agent.api('POST', `/deployments/${s.app}/domains`, { body: { service: 'web', domain: s.host, container_port: 80 } })),
    );
    for (const res of added) expect(res.status, res.text).toBe(201);
  }, 120_000);

  afterAll(async () => {
    for (const a of extra) await a.stop().catch(() => undefined);
    for (const s of sides) {
      await s.agent.api('DELETE', `/deployments/${s.app}`, { query: { remove_files: true } }).catch(() => undefined);
      await s.agent.stop().catch(() => undefined);
    }
    rmSync(work, { recursive: true, force: true });
  });

  it('runs one nginx per agent, each with its own files and ports', () => {
    const [a, b] = sides as [Side, Side];
    const pa = master(confOf(a));
    const pb = master(confOf(b));
    expect(pa).toBeGreaterThan(0);
    expect(pb).toBeGreaterThan(0);
    expect(pa).not.toBe(pb);
    for (const s of sides) {
      const main = readFileSync(confOf(s), 'utf8');
      // Every path of its configuration is below its own data folder.
      const paths = [...main.matchAll(/"(\/[^"]+)"/g)].map((m) => m[1]!);
      expect(paths.length).toBeGreaterThan(5);
      for (const p of paths) expect(p.startsWith(`${s.dataDir}/`), p).toBe(true);
      const sites = readdirSync(join(s.dataDir, 'plugins', 'edge', 'nginx', 'agent', 'sites'));
      expect(sites).toEqual([`${s.host}.conf`]);
    }
  });

  it("routes each agent's domain on its own ports only", async () => {
    const [a, b] = sides as [Side, Side];
    for (const [mine, other] of [
      [a, b],
      [b, a],
    ] as const) {
      const page = await hit(mine.http, mine.host, '/cgi-bin/env');
      expect(page.status, `${mine.name} on its port`).toBe(200);
      expect(page.body).toContain(`HTTP_X_FORWARDED_HOST=${mine.host}`);
      // The other agent's domain is unknown here: the default server's 404, logged as an unknown domain.
      expect((await hit(mine.http, other.host, '/')).status, `${other.name}'s domain on ${mine.name}'s port`).toBe(404);
    }
  });

  it('shows each agent only its own domains, traffic and logs', async () => {
    const [a, b] = sides as [Side, Side];
    for (const [mine, other] of [
      [a, b],
      [b, a],
    ] as const) {
      const vhosts = await mine.agent.api('GET', '/proxy/vhosts');
      expect(vhosts.body.data.map((v: { domain: string }) => v.domain)).toEqual([mine.host]);
      await waitFor(
        async () => (await mine.agent.api('GET', '/traffic/logs', { query: { deployment: mine.app } })).body.data.length > 0,
        `${mine.name}'s traffic`,
      );
      const unknown = await waitFor(async () => {
        const res = await mine.agent.api('GET', '/traffic/unknown-domains');
        const hosts = res.body.data.map((u: { host: string }) => u.host) as string[];
        return hosts.includes(other.host) && hosts;
      }, `${other.name}'s host among ${mine.name}'s unknown domains`);
      expect(unknown).not.toContain(mine.host);
      const logs = await mine.agent.api('GET', '/system/logs', { query: { source: 'proxy-access', tail: 0 } });
      expect(logs.status, logs.text).toBe(200);
      const lines = (logs.body.data as { line: string }[]).map((l) => l.line).join('\n');
      expect(lines).toContain(`"deployment":"${mine.app}"`);
      expect(lines).not.toContain(`"deployment":"${other.app}"`);
      const sources = await mine.agent.api('GET', '/system/logs/sources');
      const access = sources.body.data.find((s: { id: string }) => s.id === 'proxy-access');
      expect(access.path.startsWith(`${mine.dataDir}/`)).toBe(true);
    }
  });

  it("does not start a third agent's proxy on ports the first holds, and names the port and its setting", async () => {
    const [a] = sides as [Side];
    const third = await startAgent({
      plugins: PLUGINS,
      dataDir: join(work, 'three'),
      config: { proxy: { http_port: a.http, https_port: await freePort(), listen_address: '127.0.0.1' } },
    });
    extra.push(third);
    const ready = JSON.parse(
      third
        .output()
        .split('\n')
        .find((l) => l.includes('"msg":"agent ready"'))!,
    ) as { failed: string[] };
    expect(ready.failed).toContain('edge');
    expect(third.output()).toContain(`port ${a.http} (proxy.http_port) is in use on 127.0.0.1:${a.http} by another process`);
    // The first agent's proxy is untouched.
    expect((await hit(a.http, a.host, '/')).status).toBe(200);
  });

  it('stops one without touching the other', async () => {
    const [a, b] = sides as [Side, Side];
    const pb = master(confOf(b));
    expect((await a.agent.api('DELETE', `/deployments/${a.app}`, { query: { remove_files: true } })).status).toBeLessThan(300);
    expect(await a.agent.stop()).toBe(0);
    expect(master(confOf(a))).toBeNull();
    await expect(hit(a.http, a.host, '/')).rejects.toThrow();
    expect(master(confOf(b))).toBe(pb);
    expect((await hit(b.http, b.host, '/')).status).toBe(200);
  });

  it("left the host's nginx configuration as it was", () => {
    expect(treeHashes('/etc/nginx')).toEqual(hostNginx);
  });
});
