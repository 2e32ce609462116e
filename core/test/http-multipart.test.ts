/**
 * Multipart bodies (routes declaring `multipart`), checked on the wire against the koa application: files written
 * below the data folder and handed to the handler with their SHA-256, limits (413 from a declared length before
 * anything is read, and midway through a streamed body), 415 for other bodies, the permission checked before the
 * body is read, and the request's folder removed whatever the outcome (answer, failure, client gone, crash).
 */
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { errors, principalFrom, Type, type RouteSpec, type UploadedFile } from '@agent/sdk';
import { createHttpApp, type HttpDeps } from '../src/http/app.js';
import { RouteRegistry } from '../src/openapi/registry.js';
import { buildOpenApi } from '../src/openapi/document.js';
import type { CoreConfig } from '../src/config/config.js';

const LIMIT = 64 * 1024;
const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

/** What the handlers saw, by route. */
const seen: Record<string, { files: Record<string, UploadedFile>; body: unknown; content: Record<string, string>; existed: boolean }> = {};

const upload = (path: string, extra: Partial<RouteSpec<any, any, any>> = {}): RouteSpec<any, any, any> =>
  ({
    method: 'POST',
    path,
    public: true,
    summary: 'an upload',
    multipart: { files: ['archive'], maxFileSize: LIMIT },
    body: Type.Object({ note: Type.Optional(Type.String({ maxLength: 20 })) }),
    handler: (req) => {
      const files = req.files!;
      seen[path] = {
        files,
        body: req.body,
        content: Object.fromEntries(Object.entries(files).map(([k, f]) => [k, readFileSync(f.path).toString('base64')])),
        existed: Object.values(files).every((f) => existsSync(f.path)),
      };
      if (path === '/failing') throw errors.conflict('the handler refuses it');
      return { size: Object.values(files).reduce((n, f) => n + f.size, 0) };
    },
    ...extra,
  }) as RouteSpec<any, any, any>;

const routes: RouteSpec<any, any, any>[] = [
  upload('/upload'),
  upload('/failing'),
  upload('/guarded', { public: false, permission: 'things:write' } as never),
  upload('/pair', { multipart: { files: ['a', 'b'], maxFileSize: LIMIT } }),
  { method: 'POST', path: '/json', public: true, summary: 'a JSON body', body: Type.Object({ x: Type.Integer() }), handler: (req) => req.body },
];

/** A principal that may read things but not write them. */
const reader = principalFrom({
  type: 'user',
  id: 'user:2',
  name: 'reader',
  role: 'viewer',
  user_id: 2,
  permissions: ['things:read'],
  deployments: {},
  scope: 'global',
});

interface Answer {
  status: number;
  body: any;
  headers: Record<string, string | string[] | undefined>;
}

/** A multipart body by hand (the boundary and parts as a browser sends them). */
function form(parts: { name: string; filename?: string; content: Buffer | string }[]): { body: Buffer; type: string } {
  const boundary = `----agent${randomBytes(8).toString('hex')}`;
  const chunks: Buffer[] = [];
  for (const p of parts) {
    const disposition = `form-data; name="${p.name}"${p.filename !== undefined ? `; filename="${p.filename}"` : ''}`;
    const type = p.filename !== undefined ? 'Content-Type: application/gzip\r\n' : '';
    chunks.push(Buffer.from(`--${boundary}\r\nContent-Disposition: ${disposition}\r\n${type}\r\n`), Buffer.from(p.content), Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return { body: Buffer.concat(chunks), type: `multipart/form-data; boundary=${boundary}` };
}

describe('multipart bodies', () => {
  let server: Server;
  let url: string;
  let dataDir: string;
  const uploads = () => join(dataDir, 'uploads');
  /** What is left in the uploads folder (request folders and their files). */
  const leftovers = () => (existsSync(uploads()) ? readdirSync(uploads(), { recursive: true }) : []);

  /** Sends a request (chunked when `chunked`), answering as soon as the response is complete, even mid-upload. */
  function send(path: string, body: Buffer, headers: Record<string, string>, opts: { chunked?: boolean; stopAfter?: number } = {}): Promise<Answer> {
    return new Promise((resolve, reject) => {
      const req = httpRequest(
        `${url}/api${path}`,
        { method: 'POST', headers: { ...headers, ...(opts.chunked ? {} : { 'content-length': String(body.length) }) }, agent: false },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => (text += c));
          res.on('end', () => resolve({ status: res.statusCode!, body: text ? JSON.parse(text) : null, headers: res.headers }));
        },
      );
      // The server may close while we still send (a refused upload): the answer is what counts.
      req.on('error', (err) => setTimeout(() => reject(err), 1000));
      req.flushHeaders();
      const step = 16 * 1024;
      let sent = 0;
      const more = () => {
        while (sent < body.length) {
          if (opts.stopAfter !== undefined && sent >= opts.stopAfter) return; // keeps the request open
          const ok = req.write(body.subarray(sent, sent + step));
          sent += step;
          if (!ok) return void req.once('drain', more);
        }
        req.end();
      };
      more();
    });
  }

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'agent-multipart-'));
    // What a crash left behind: removed when the application is created.
    mkdirSync(join(dataDir, 'uploads', 'req-crashed'), { recursive: true });
    writeFileSync(join(dataDir, 'uploads', 'req-crashed', 'half'), 'x');
    const registry = new RouteRegistry();
    registry.commit(routes.map((spec) => registry.prepareRoute('test', spec)));
    const config = { data_dir: dataDir, api: { enable_cors: false, allowed_origins: [], body_limit: 1024, trust_proxy: false } } as unknown as CoreConfig;
    const log = { error: () => undefined, warn: () => undefined };
    const deps: HttpDeps = {
      config,
      log: log as unknown as HttpDeps['log'],
      principals: { authenticate: (token: string) => (token === 'reader' ? reader : null) } as unknown as HttpDeps['principals'],
      registry,
      plans: {} as never,
      audit: { settle: async () => undefined } as unknown as HttpDeps['audit'],
      live: {} as never,
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
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('removes what a crash left in the uploads folder when the application is created', () => {
    expect(leftovers()).toEqual([]);
  });

  it('writes the file below the data folder, hands it over with its SHA-256 and the fields, and removes it after the answer', async () => {
    const content = randomBytes(40 * 1024);
    const { body, type } = form([
      { name: 'note', content: 'hello' },
      { name: 'archive', filename: 'x.tar.gz', content },
    ]);
    const res = await send('/upload', body, { 'content-type': type });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.data).toEqual({ size: content.length });
    const got = seen['/upload']!;
    expect(got.existed).toBe(true);
    expect(got.body).toEqual({ note: 'hello' });
    expect(got.files.archive).toMatchObject({ size: content.length, sha256: sha256(content), filename: 'x.tar.gz', contentType: 'application/gzip' });
    expect(got.files.archive!.path.startsWith(join(dataDir, 'uploads', 'req-'))).toBe(true);
    expect(Buffer.from(got.content.archive!, 'base64').equals(content)).toBe(true);
    expect(existsSync(got.files.archive!.path)).toBe(false);
    expect(leftovers()).toEqual([]);
  });

  it('takes one file per declared field, empty files included', async () => {
    const { body, type } = form([
      { name: 'a', filename: 'a', content: 'first' },
      { name: 'b', filename: 'b', content: '' },
    ]);
    const res = await send('/pair', body, { 'content-type': type });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(seen['/pair']!.files.b).toMatchObject({ size: 0, sha256: sha256(Buffer.alloc(0)) });
    expect(Buffer.from(seen['/pair']!.content.a!, 'base64').toString()).toBe('first');
    expect(leftovers()).toEqual([]);
  });

  it('answers 415 for a body other than multipart/form-data, and leaves JSON routes as they were', async () => {
    for (const type of ['application/json', 'text/plain', 'application/x-www-form-urlencoded']) {
      const res = await send('/upload', Buffer.from('{"note":"x"}'), { 'content-type': type });
      expect(res.status, type).toBe(415);
      expect(res.body).toEqual({ error: 'the body must be multipart/form-data', code: 'UNSUPPORTED_MEDIA_TYPE' });
    }
    const { body, type } = form([{ name: 'archive', filename: 'x', content: 'abc' }]);
    const json = await send('/json', body, { 'content-type': type });
    expect(json.status).toBe(400);
    expect(json.body.code).toBe('UNSUPPORTED_MEDIA_TYPE');
    expect(leftovers()).toEqual([]);
  });

  it('answers 413 for a file over the limit: at once for a declared length, midway for a streamed body; nothing is left', async () => {
    const { body, type } = form([{ name: 'archive', filename: 'big', content: randomBytes(LIMIT * 20) }]);
    const declared = await send('/upload', body, { 'content-type': type }, { stopAfter: 0 });
    expect(declared.status).toBe(413);
    expect(declared.body).toEqual({ error: `the upload is larger than ${LIMIT} bytes`, code: 'PAYLOAD_TOO_LARGE' });
    expect(declared.headers.connection).toBe('close');
    // Chunked: no length to judge by; cut off once the file passes the limit, while the client is still sending.
    const streamed = await send('/upload', body, { 'content-type': type }, { chunked: true, stopAfter: LIMIT * 4 });
    expect(streamed.status).toBe(413);
    expect(streamed.body).toEqual({ error: `the uploaded file is larger than ${LIMIT} bytes`, code: 'PAYLOAD_TOO_LARGE' });
    expect(streamed.headers.connection).toBe('close');
    await expect.poll(leftovers).toEqual([]);
    // Just at the limit is fine.
    const exact = form([{ name: 'archive', filename: 'x', content: randomBytes(LIMIT) }]);
    expect((await send('/upload', exact.body, { 'content-type': exact.type })).status).toBe(200);
  });

  it('answers 400 for a missing file, an undeclared or repeated file field and an undeclared field', async () => {
    const cases: [string, Parameters<typeof form>[0], string][] = [
      ['missing', [{ name: 'note', content: 'x' }], 'body.archive: a file is required'],
      [
        'undeclared file',
        [
          { name: 'archive', filename: 'a', content: 'a' },
          { name: 'other', filename: 'b', content: 'b' },
        ],
        'body.other: unexpected file',
      ],
      [
        'repeated',
        [
          { name: 'a', filename: 'a', content: 'a' },
          { name: 'a', filename: 'b', content: 'b' },
        ],
        'body.a: one file expected, got 2',
      ],
      [
        'undeclared field',
        [
          { name: 'archive', filename: 'a', content: 'a' },
          { name: 'colour', content: 'red' },
        ],
        "unknown field 'colour'",
      ],
    ];
    for (const [what, parts, error] of cases) {
      const { body, type } = form(parts);
      const res = await send(what === 'repeated' ? '/pair' : '/upload', body, { 'content-type': type });
      expect(res.status, what).toBe(400);
      expect(res.body.error, what).toContain(error);
    }
    const broken = await send('/upload', Buffer.from('--nope\r\ngarbage'), { 'content-type': 'multipart/form-data; boundary=elsewhere' });
    expect(broken.status).toBe(400);
    expect(broken.body.code).toBe('INVALID_MULTIPART');
    await expect.poll(leftovers).toEqual([]);
  });

  it('removes the files when the handler fails and when the client goes away midway', async () => {
    const { body, type } = form([{ name: 'archive', filename: 'x', content: randomBytes(1000) }]);
    const failed = await send('/failing', body, { 'content-type': type });
    expect(failed.status).toBe(409);
    expect(seen['/failing']!.existed).toBe(true);
    expect(leftovers()).toEqual([]);

    const half = form([{ name: 'archive', filename: 'x', content: randomBytes(LIMIT - 1000) }]);
    await new Promise<void>((resolve) => {
      const req = httpRequest(`${url}/api/upload`, {
        method: 'POST',
        headers: { 'content-type': half.type, 'content-length': String(half.body.length) },
        agent: false,
      });
      req.on('error', () => undefined);
      req.write(half.body.subarray(0, half.body.length / 2), () => setTimeout(() => (req.destroy(), resolve()), 200));
    });
    await expect.poll(leftovers, { timeout: 5000 }).toEqual([]);
  });

  it('checks the permission before reading the body: 403 while the client is still sending, nothing written', async () => {
    const { body, type } = form([{ name: 'archive', filename: 'x', content: randomBytes(LIMIT / 2) }]);
    const res = await send('/guarded', body, { 'content-type': type, authorization: 'Bearer reader' }, { stopAfter: 1024 });
    expect(res.status).toBe(403);
    expect(res.body).toEqual({ error: "permission 'things:write' required", code: 'FORBIDDEN' });
    expect(leftovers()).toEqual([]);
  });

  it('documents the form: its fields and one binary part per file, 413 and 415', () => {
    const registry = new RouteRegistry();
    registry.commit([registry.prepareRoute('test', upload('/upload'))]);
    const op = (buildOpenApi({ version: '0', registry, resources: [], plugins: [] }).paths as any)['/api/upload'].post;
    expect(op.requestBody.content).toEqual({
      'multipart/form-data': {
        schema: {
          type: 'object',
          properties: { note: { type: 'string', maxLength: 20 }, archive: { type: 'string', format: 'binary' } },
          required: ['archive'],
          additionalProperties: false,
        },
      },
    });
    expect(Object.keys(op.responses)).toEqual(expect.arrayContaining(['413', '415']));
  });

  it('refuses to register a multipart route that is plannable, a GET, raw or without files', () => {
    const registry = new RouteRegistry();
    const plan = { resource: () => ({ type: 't', id: 'x' }), preview: () => ({ changes: [] }) };
    for (const extra of [
      { plan },
      { method: 'GET', body: undefined },
      { rawBody: true },
      { multipart: { files: [], maxFileSize: 1 } },
      { multipart: { files: ['a'], maxFileSize: 0 } },
    ]) {
      expect(() => registry.prepareRoute('test', upload('/x', extra as never)), JSON.stringify(extra)).toThrow(/multipart route/);
    }
  });
});
