/**
 * The app's engine client while the engine fails: it keeps trying to follow events with growing waits, holds a
 * single abort listener however many attempts it makes (each attempt used to add one: Node warned about a leak
 * after ten), reports the outage once, and reports the engine again when a real HTTP server answers on the socket.
 */
import { createServer as createHttpServer } from 'node:http';
import { createServer as createNetServer, type Server } from 'node:net';
import { getEventListeners } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { DockerClient } from '../src/app/docker.js';

const dirs: string[] = [];
const servers: Server[] = [];
afterEach(() => {
  for (const s of servers.splice(0)) s.close();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const listen = (server: Server, path: string) => new Promise<void>((resolve) => server.listen(path, resolve));
const close = (server: Server) => new Promise<void>((resolve) => server.close(() => resolve()));

describe('observability app: Docker engine client while the engine fails', () => {
  it('reconnects the event stream with one abort listener and reports the outage once', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'obs-engine-'));
    dirs.push(dir);
    const socket = join(dir, 'docker.sock');

    // An engine that hangs up on every connection: each attempt of the client is one connection here.
    let attempts = 0;
    const broken = createNetServer((conn) => {
      attempts++;
      conn.destroy();
    });
    servers.push(broken);
    await listen(broken, socket);

    const client = new DockerClient(socket, { first: 5, max: 20 });
    const reports: [boolean, string | null][] = [];
    client.onReachability((reachable, error) => reports.push([reachable, error]));
    const stop = new AbortController();
    const seen: string[] = [];
    client.followEvents((e) => seen.push(`${e.Type} ${e.Action} ${e.Actor.ID}`), stop.signal);
    await new Promise((r) => setTimeout(r, 700));

    // With waits of 5, 10, 20, 20, … ms, 700 ms are far more than the ten attempts that made Node warn.
    expect(attempts).toBeGreaterThan(10);
    expect(getEventListeners(stop.signal, 'abort')).toHaveLength(1);
    // One report for the whole outage, with what went wrong (a hang-up: EPIPE or "socket hang up", by timing).
    expect(reports).toHaveLength(1);
    expect(reports[0]![0]).toBe(false);
    expect(reports[0]![1]).toMatch(/EPIPE|hang up|ECONNRESET/);

    // The engine comes back: the next attempt reaches it and the client says so, once.
    await close(broken);
    rmSync(socket, { force: true });
    const engine = createHttpServer((req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      if (req.url?.startsWith('/events')) res.write('{"Type":"container","Action":"start","Actor":{"ID":"abc","Attributes":{}},"time":1}\n');
      else res.end('[]');
    });
    servers.push(engine);
    await listen(engine, socket);
    await expect.poll(() => reports.length, { timeout: 2000 }).toBe(2);
    expect(reports[1]).toEqual([true, null]);
    await expect.poll(() => seen, { timeout: 2000 }).toEqual(['container start abc']);
    stop.abort();
    client.close();
    expect(getEventListeners(stop.signal, 'abort')).toHaveLength(0);
  });
});
