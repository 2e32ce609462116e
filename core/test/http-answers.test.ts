/**
 * How the koa application writes answers on node's response, checked on the wire: bodies and their headers,
 * statuses without a body, HEAD, streams that fail or whose client goes away, and path params as sent.
 */
import { createServer, request as httpRequest, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Reply, reply, type RouteSpec } from '@agent/sdk';
import { createHttpApp, type HttpDeps } from '../src/http/app.js';
import { RouteRegistry } from '../src/openapi/registry.js';
import type { CoreConfig } from '../src/config/config.js';

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
  /** False when the connection was cut before the body was complete. */
  complete: boolean;
}

/** Streams handed out by the routes below, to see what became of them. */
const streams: Record<string, Readable> = {};
const logged: unknown[] = [];

/** A stream that sends one chunk, then fails (`fail`) or waits forever. */
function oneChunk(name: string, fail: boolean): Readable {
  const stream = new Readable({
    read() {
      if (this.readableLength > 0 || (this as { sent?: boolean }).sent) return;
      (this as { sent?: boolean }).sent = true;
      this.push('first chunk\n');
      if (fail) setTimeout(() => this.destroy(new Error('disk gone')), 50);
    },
  });
  streams[name] = stream;
  return stream;
}

const routes: RouteSpec<any, any, any>[] = [
  { method: 'GET', path: '/empty', public: true, summary: 'no body', handler: () => new Reply(200) },
  { method: 'GET', path: '/text', public: true, summary: 'a string', handler: () => new Reply(200, undefined, 'héllo') },
  { method: 'GET', path: '/page', public: true, summary: 'a string that looks like HTML', handler: () => new Reply(200, undefined, ' <p>hi</p>') },
  { method: 'GET', path: '/bytes', public: true, summary: 'a Buffer', handler: () => new Reply(200, undefined, Buffer.from([1, 2, 3])) },
  { method: 'GET', path: '/json', public: true, summary: 'data', handler: () => ({ word: 'naïve' }) },
  { method: 'GET', path: '/not-modified', public: true, summary: '304', handler: () => new Reply(304, { data: 'ignored' }) },
  {
    method: 'GET',
    path: '/download',
    public: true,
    summary: 'a stream',
    handler: () => {
      streams.download = Readable.from(['a,b\n', '1,2\n']);
      return reply.stream(streams.download, { contentType: 'text/csv', filename: 'x.csv' });
    },
  },
  {
    method: 'GET',
    path: '/broken-early',
    public: true,
    summary: 'a stream failing before its first byte',
    handler: () => {
      const stream = new Readable({ read: () => setTimeout(() => stream.destroy(new Error('no such file')), 10) });
      streams.early = stream;
      return reply.stream(stream, { contentType: 'text/csv', filename: 'x.csv', length: 10 });
    },
  },
  {
    method: 'GET',
    path: '/broken-late',
    public: true,
    summary: 'a stream failing midway',
    handler: () => reply.stream(oneChunk('late', true), { contentType: 'text/plain' }),
  },
  {
    method: 'GET',
    path: '/endless',
    public: true,
    summary: 'a stream that never ends',
    handler: () => reply.stream(oneChunk('endless', false), { contentType: 'text/plain' }),
  },
  { method: 'GET', path: '/items/:name', public: true, summary: 'echoes its param', handler: (req) => ({ name: (req.params as { name: string }).name }) },
  { method: 'DELETE', path: '/items/:name', public: true, summary: 'another method on the same path', handler: () => null },
];

function send(url: string, method: string, path: string, headers: Record<string, string> = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${url}${path}`, { method, headers, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('close', () => resolve({ status: res.statusCode!, headers: res.headers, body, complete: res.complete }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('answers written by the request listener', () => {
  let server: Server;
  let url: string;

  beforeAll(async () => {
    const registry = new RouteRegistry();
    registry.commit(routes.map((spec) => registry.prepareRoute('test', spec)));
    const config = { api: { enable_cors: false, allowed_origins: [], body_limit: 1024, trust_proxy: false } } as unknown as CoreConfig;
    const log = { error: (...args: unknown[]) => logged.push(args), warn: (...args: unknown[]) => logged.push(args) };
    const unused = {} as never;
    const deps: HttpDeps = {
      config,
      log: log as unknown as HttpDeps['log'],
      principals: unused,
      registry,
      plans: unused,
      audit: unused,
      live: unused,
      proxy: () => Promise.reject(new Error('no proxy here')),
      validateResponses: false,
    };
    server = createServer(createHttpApp(deps).callback());
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  it('answers a reply without body 204, without content headers', async () => {
    const res = await send(url, 'GET', '/api/empty');
    expect(res.status).toBe(204);
    expect(res.headers['content-type']).toBeUndefined();
    expect(res.headers['content-length']).toBeUndefined();
    const notModified = await send(url, 'GET', '/api/not-modified');
    expect(notModified.status).toBe(304);
    expect(notModified.headers['content-type']).toBeUndefined();
    expect(notModified.body).toBe('');
  });

  it('sends data as JSON with its length in bytes, and only the headers for HEAD', async () => {
    const res = await send(url, 'GET', '/api/json');
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(Number(res.headers['content-length'])).toBe(Buffer.byteLength('{"data":{"word":"naïve"}}'));
    const head = await send(url, 'HEAD', '/api/json');
    expect(head.status).toBe(200);
    expect(head.headers['content-length']).toBe(res.headers['content-length']);
    expect(head.body).toBe('');
  });

  it('types and measures string and Buffer bodies the route left untyped', async () => {
    const text = await send(url, 'GET', '/api/text');
    expect(text.headers['content-type']).toBe('text/plain; charset=utf-8');
    expect(text.headers['content-length']).toBe(String(Buffer.byteLength('héllo')));
    expect((await send(url, 'GET', '/api/page')).headers['content-type']).toBe('text/html; charset=utf-8');
    const bytes = await send(url, 'GET', '/api/bytes');
    expect(bytes.headers['content-type']).toBe('application/octet-stream');
    expect(bytes.headers['content-length']).toBe('3');
  });

  it('pipes a stream with the headers of the reply; HEAD leaves it unread and closed', async () => {
    const res = await send(url, 'GET', '/api/download');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('text/csv');
    expect(res.headers['content-disposition']).toBe('attachment; filename="x.csv"');
    expect(res.body).toBe('a,b\n1,2\n');
    const head = await send(url, 'HEAD', '/api/download');
    expect(head.status).toBe(200);
    expect(head.body).toBe('');
    await expect.poll(() => streams.download!.destroyed).toBe(true);
  });

  it('answers a stream that fails before its first byte with the error envelope, without the reply headers', async () => {
    const res = await send(url, 'GET', '/api/broken-early');
    expect(res.status).toBe(500);
    expect(JSON.parse(res.body)).toEqual({ error: 'internal error', code: 'INTERNAL_ERROR' });
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(res.headers['content-disposition']).toBeUndefined();
    expect(logged.length).toBeGreaterThan(0);
  });

  it('cuts the connection when a stream fails midway, so the client sees an incomplete answer', async () => {
    const res = await send(url, 'GET', '/api/broken-late');
    expect(res.status).toBe(200);
    expect(res.body).toBe('first chunk\n');
    expect(res.complete).toBe(false);
  });

  it('destroys the stream when the client goes away', async () => {
    await new Promise<void>((resolve, reject) => {
      const req = httpRequest(`${url}/api/endless`, { agent: false }, (res) => res.once('data', () => (req.destroy(), resolve())));
      req.on('error', () => undefined);
      req.on('close', () => resolve());
      req.end();
      setTimeout(() => reject(new Error('no first chunk')), 5000);
    });
    await expect.poll(() => streams.endless!.destroyed).toBe(true);
  });

  it('passes path params decoded, `+` as a space, a malformed escape as sent; a trailing slash matches', async () => {
    expect(JSON.parse((await send(url, 'GET', '/api/items/caf%C3%A9+au+lait')).body).data.name).toBe('café au lait');
    expect(JSON.parse((await send(url, 'GET', '/api/items/%E0%A4%A')).body).data.name).toBe('%E0%A4%A');
    expect(JSON.parse((await send(url, 'GET', '/api/items/x/')).body).data.name).toBe('x');
  });

  it('answers 405 with Allow for a method the path lacks, OPTIONS with 204, unknown paths with the JSON 404', async () => {
    const wrong = await send(url, 'PUT', '/api/items/x');
    expect(wrong.status).toBe(405);
    expect(wrong.headers.allow).toBe('HEAD, GET, DELETE');
    expect(JSON.parse(wrong.body).code).toBe('METHOD_NOT_ALLOWED');
    const options = await send(url, 'OPTIONS', '/api/items/x');
    expect(options.status).toBe(204);
    expect(options.headers.allow).toBe('HEAD, GET, DELETE');
    for (const path of ['/api/nothing', '/elsewhere', '/api']) {
      const missing = await send(url, 'GET', path);
      expect(missing.status).toBe(404);
      expect(JSON.parse(missing.body)).toEqual({ error: `no route GET ${path}`, code: 'NOT_FOUND' });
    }
  });
});
