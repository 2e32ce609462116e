/**
 * The app's HTTP server: only the declared routes, each request authenticated by the principal header the core
 * signs; JSON bodies validated with the route's schema (closed objects); answers in the agent's envelope.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { Value } from '@sinclair/typebox/value';
import { verifyPrincipal } from '@agent/sdk/app';
import type { AppRouteSpec, Principal } from '@agent/sdk';
import type { Logger } from './log.js';

export class AppError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

export const badRequest = (message: string, code = 'VALIDATION_FAILED') => new AppError(400, code, message);

export interface Request {
  principal: Principal;
  query: URLSearchParams;
  body: unknown;
}

/** A handler returns data (sent as `{data}`), or `{text, contentType}` for a plain answer. */
export type Handler = (req: Request) => unknown | Promise<unknown>;

export interface TextAnswer {
  text: string;
  contentType: string;
}

const isText = (v: unknown): v is TextAnswer => typeof v === 'object' && v !== null && 'text' in v && 'contentType' in v;

const MAX_BODY = 1024 * 1024;

async function readBody(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY) throw new AppError(413, 'PAYLOAD_TOO_LARGE', 'request body larger than 1 MiB');
    chunks.push(chunk as Buffer);
  }
  if (size === 0) return undefined;
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    throw badRequest('the body is not valid JSON', 'INVALID_JSON');
  }
}

/** `/0/threshold` → `body[0].threshold` */
const fieldOf = (path: string) =>
  path
    .split('/')
    .filter(Boolean)
    .reduce((acc, p) => (/^\d+$/.test(p) ? `${acc}[${p}]` : `${acc}.${p}`), 'body');

function validateBody(spec: AppRouteSpec, body: unknown): void {
  if (!spec.body) return;
  if (Value.Check(spec.body, body)) return;
  const first = Value.Errors(spec.body, body).First();
  throw badRequest(first ? `${fieldOf(first.path)}: ${first.message}` : 'body: invalid');
}

export function createAppServer(env: { name: string; secret: string }, routes: AppRouteSpec[], handlers: Record<string, Handler>, log: Logger): Server {
  const send = (res: ServerResponse, status: number, body: string, contentType = 'application/json') => {
    res.writeHead(status, { 'content-type': contentType, 'content-length': Buffer.byteLength(body) });
    res.end(body);
  };
  return createServer((req, res) => {
    void (async () => {
      const url = new URL(req.url ?? '/', 'http://app');
      const spec = routes.find((r) => r.method === req.method && r.path === url.pathname);
      const handler = spec?.operationId ? handlers[spec.operationId] : undefined;
      if (!spec || !handler) throw new AppError(404, 'NOT_FOUND', `no route ${req.method} ${url.pathname}`);
      let principal: Principal;
      try {
        principal = await verifyPrincipal(req.headers, env);
      } catch (err) {
        throw new AppError(401, 'UNAUTHORIZED', `not authenticated by the agent: ${(err as Error).message}`);
      }
      const body = spec.body ? await readBody(req) : undefined;
      validateBody(spec, body);
      const result = await handler({ principal, query: url.searchParams, body });
      if (isText(result)) return send(res, spec.status ?? 200, result.text, result.contentType);
      send(res, spec.status ?? 200, JSON.stringify({ data: result ?? null }));
    })().catch((err: unknown) => {
      if (res.headersSent) return void res.destroy();
      if (err instanceof AppError) return send(res, err.status, JSON.stringify({ error: err.message, code: err.code }));
      log.error('request failed', { path: req.url, error: String((err as Error)?.stack ?? err) });
      send(res, 500, JSON.stringify({ error: 'internal error', code: 'INTERNAL_ERROR' }));
    });
  });
}
