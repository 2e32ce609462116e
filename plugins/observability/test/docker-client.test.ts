/**
 * The app's engine client (dockerode) while the engine fails, against HTTP servers on a unix socket that answer
 * what a real engine answers only by chance or while it stops: it keeps trying to follow events with growing waits,
 * holds a single abort listener however many attempts it makes (each attempt used to add one: Node warned about a
 * leak after ten), reports the outage once, and reports the engine again when it answers; empty bodies, zeroed
 * stats and answers cut off mid-body are told apart from errors and never leave a call unsettled.
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
    const reports: [string, string | null][] = [];
    client.onState((state, error) => reports.push([state, error]));
    const stop = new AbortController();
    const seen: string[] = [];
    client.followEvents((e) => seen.push(`${e.Type} ${e.Action} ${e.Actor.ID}`), stop.signal);
    await new Promise((r) => setTimeout(r, 700));

    // With waits of 5, 10, 20, 20, … ms, 700 ms are far more than the ten attempts that made Node warn.
    expect(attempts).toBeGreaterThan(10);
    expect(getEventListeners(stop.signal, 'abort')).toHaveLength(1);
    // One report for the whole outage, with what went wrong (a hang-up: EPIPE or "socket hang up", by timing).
    expect(reports).toHaveLength(1);
    expect(reports[0]![0]).toBe('away');
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
    expect(reports[1]).toEqual(['answering', null]);
    await expect.poll(() => seen, { timeout: 2000 }).toEqual(['container start abc']);
    stop.abort();
    expect(getEventListeners(stop.signal, 'abort')).toHaveLength(0);
  });

  it('tells a container gone from an error, reports an engine without a container list once, and settles every call', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'obs-engine-'));
    dirs.push(dir);
    const socket = join(dir, 'docker.sock');
    const sample = { read: new Date().toISOString(), cpu_stats: { cpu_usage: { total_usage: 5 } }, memory_stats: { usage: 10, limit: 100 } };
    // What a real engine answers: an empty body while a container stops during the stats call, zeroes for one not
    // running, 404 for one removed, and an answer cut off mid-body while the engine stops.
    let list: 'empty' | 'ok' = 'empty';
    const engine = createHttpServer((req, res) => {
      const url = req.url ?? '';
      const json = (status: number, body: unknown) => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(body));
      };
      if (url.startsWith('/containers/json')) {
        if (list === 'empty') return res.writeHead(200, { 'content-type': 'application/json' }).end();
        return json(200, [{ Id: 'aaa', Names: ['/a'], State: 'running', Status: 'Up 1 second', Labels: null }, { Names: ['/no-id'] }, 'junk']);
      }
      if (url.startsWith('/containers/stopping/')) return res.writeHead(200, { 'content-type': 'application/json' }).end();
      if (url.startsWith('/containers/exited/'))
        return json(200, { read: '0001-01-01T00:00:00Z', cpu_stats: { cpu_usage: { total_usage: 0 } }, memory_stats: {} });
      if (url.startsWith('/containers/removed/')) return json(404, { message: 'No such container: removed' });
      if (url.startsWith('/containers/broken/')) return json(500, { message: 'cgroup read failed' });
      if (url.startsWith('/containers/cut/')) {
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': '1000' });
        res.write('{"read":"2026-');
        return setTimeout(() => res.socket?.destroy(), 20);
      }
      if (url.startsWith('/containers/aaa/stats?stream=false&one-shot=true')) return json(200, sample);
      json(404, { message: `unexpected ${url}` });
    });
    servers.push(engine);
    await listen(engine, socket);

    const client = new DockerClient(socket, { first: 5, max: 20 }, 1000);
    const reports: [string, string | null][] = [];
    client.onState((state, error) => reports.push([state, error]));

    // An empty answer to the list: an EngineError (no TypeError from reading an empty body), reported once.
    await expect(client.listRunning()).rejects.toMatchObject({ state: 'failing', message: expect.stringContaining('empty body') });
    await expect(client.listRunning()).rejects.toMatchObject({ state: 'failing' });
    expect(reports).toEqual([['failing', 'GET /containers/json: the engine answered an empty body']]);
    // A list again: the entries without an id are dropped, the others kept; the engine answers again, once.
    list = 'ok';
    expect(await client.listRunning()).toEqual([{ Id: 'aaa', Names: ['/a'], State: 'running', Status: 'Up 1 second', Labels: null }]);
    expect(reports[1]).toEqual(['answering', null]);

    expect(await client.stats('aaa')).toEqual({ gone: false, stats: sample });
    expect(await client.stats('stopping')).toEqual({ gone: true, why: 'empty answer' });
    expect(await client.stats('exited')).toEqual({ gone: true, why: 'not running' });
    expect(await client.stats('removed')).toEqual({ gone: true, why: 'removed' });
    await expect(client.stats('broken')).rejects.toMatchObject({ status: 500, message: expect.stringContaining('cgroup read failed') });
    // Cut off mid-body, the response ends neither with 'end' nor with an error dockerode listens to: the deadline
    // settles the call.
    const started = Date.now();
    await expect(client.stats('cut')).rejects.toMatchObject({ state: 'away', message: expect.stringContaining('no answer within 1000 ms') });
    expect(Date.now() - started).toBeLessThan(5000);
    // Stats answers say nothing of the engine as a whole.
    expect(reports).toHaveLength(2);
  });
});
