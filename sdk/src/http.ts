import type { Context as KoaContext, Next as KoaNext } from 'koa';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import type { Static, TSchema } from '@sinclair/typebox';
import type { AccessLevel, Permission, Principal } from './principal.js';

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/**
 * What a scoped principal (one limited to some deployments) may do with a route that names no deployment (no
 * `deployment`, or a `deployment` function that found none in the request):
 * - `global` (the default): the route is about global state; a scoped principal gets 403 `GLOBAL_SCOPE_REQUIRED`;
 * - `filtered`: the handler answers with, and acts on, only what the principal may reach (lists, searches, ids it
 *   resolves to a deployment itself);
 * - `own`: the route is about the caller itself (its profile, its keys, its plans);
 * - `catalogue`: global data that belongs to no tenant (templates, plugins); reads only;
 * - `create`: it creates a new deployment (a scoped user may, a key limited to a deployments list may not).
 */
export type Tenancy = 'global' | 'filtered' | 'own' | 'catalogue' | 'create';

/** What a handler receives. Params, query and body are already validated against the route's schemas. */
export interface RouteRequest<P = Record<string, string>, Q = Record<string, unknown>, B = unknown> {
  params: P;
  query: Q;
  body: B;
  principal: Principal;
  /** Client IP (X-Forwarded-For only when `api.trust_proxy` is on). */
  ip: string;
  method: HttpMethod;
  path: string;
  headers: Record<string, string | string[] | undefined>;
  /** Aborted when the client goes away. */
  signal: AbortSignal;
  /** Set when the request runs through `POST /api/plans/:id/apply`. */
  plan?: { id: string };
  /** Raw Node objects, for routes declared with `rawBody: true` (streamed uploads). */
  raw: { req: IncomingMessage; res: ServerResponse };
  /** The files of a `multipart` route, one per declared field (its other fields are `body`). */
  files?: Record<string, UploadedFile>;
}

/**
 * A file received by a `multipart` route. It lies in a folder of its own request below the agent's data folder and
 * is removed once the request is answered: a handler that keeps it moves it (rename) first.
 */
export interface UploadedFile {
  path: string;
  size: number;
  /** SHA-256 of the content, computed while it was received. */
  sha256: string;
  /** The name the client gave it: to show, never a path to write to. */
  filename: string | null;
  contentType: string | null;
}

/** A response other than `200 {data}`: build it with `reply.*`. */
export class Reply {
  constructor(
    readonly status: number,
    readonly body?: { data?: unknown; message?: string; meta?: Record<string, unknown> },
    readonly stream?: Readable | Buffer | string,
    readonly headers: Record<string, string> = {},
  ) {}
}

export interface StreamOptions {
  contentType: string;
  /** Content-Length when known, so clients can show progress. */
  length?: number;
  /** Sets Content-Disposition: attachment. */
  filename?: string;
  status?: number;
}

export const reply = {
  ok: (data: unknown, message?: string, meta?: Record<string, unknown>) => new Reply(200, { data, message, meta }),
  created: (data: unknown, message?: string) => new Reply(201, { data, message }),
  accepted: (data: unknown, message?: string) => new Reply(202, { data, message }),
  page: (data: unknown[], meta: { total: number; limit: number; offset: number }) => new Reply(200, { data, meta }),
  stream: (body: Readable | Buffer | string, opts: StreamOptions) => {
    const headers: Record<string, string> = { 'content-type': opts.contentType };
    if (opts.length !== undefined) headers['content-length'] = String(opts.length);
    if (opts.filename) headers['content-disposition'] = `attachment; filename="${opts.filename.replace(/["\\\r\n]/g, '_')}"`;
    return new Reply(opts.status ?? 200, undefined, body, headers);
  },
};

/** Answers other than success: HTTP status → the `code`s answered with it. */
export type ErrorCodes = Partial<Record<400 | 401 | 403 | 404 | 409 | 410 | 413 | 415 | 422 | 423 | 424 | 429 | 500 | 502 | 503 | 504, readonly string[]>>;

export type PlanAction = 'create' | 'update' | 'delete' | 'no-op';

/** One resource a plan would touch. */
export interface PlanChange {
  type: string;
  id: string;
  actions: PlanAction[];
  before?: unknown;
  after?: unknown;
  /** A unified diff of text content (compose files, proxy config, …) when that reads better than before/after. */
  diff?: string;
  /** When true, `before`/`after` are redacted whenever the plan is read. */
  sensitive?: boolean;
}

export interface PlanPreview {
  summary?: string;
  changes: PlanChange[];
}

/** What a plan depends on; re-read at apply time: any difference refuses the apply with 409 PLAN_STALE. */
export interface PlanSnapshot {
  /** Absolute paths; the core stores their SHA-256 (or `absent`). */
  files?: string[];
  /** Named records; the core stores the SHA-256 of their JSON. */
  records?: Record<string, unknown>;
}

export interface PlanSupport<R> {
  /** The resource the plan is about; applying one plan obsoletes the others on the same resource. */
  resource(req: R): { type: string; id: string };
  preview(req: R): Promise<PlanPreview> | PlanPreview;
  snapshot?(req: R): Promise<PlanSnapshot> | PlanSnapshot;
}

type StaticOr<T, D> = T extends TSchema ? Static<T> : D;

export type RequestOf<P, Q, B> = RouteRequest<StaticOr<P, Record<string, string>>, StaticOr<Q, Record<string, never>>, StaticOr<B, undefined>>;

interface RouteBase<P, Q, B> {
  method: HttpMethod;
  /** Path below `/api`: literal segments and `:param` segments, e.g. `/deployments/:name`. */
  path: string;
  summary: string;
  description?: string;
  /** Stable operation id, `<tag>.<verb>`; derived from method and path when omitted. */
  operationId?: string;
  /** OpenAPI tag; defaults to the plugin name. */
  tag?: string;
  params?: P;
  query?: Q;
  body?: B;
  /** Schema of `data` in a successful answer (documentation; checked in tests); with a JSON `produces`, of the whole body. */
  response?: TSchema;
  /** Status of a success; 200 by default (201/202 when returning `reply.created/accepted`). */
  status?: number;
  /** Content type of a non-JSON success (downloads, exports); several when the request chooses (an export as CSV or JSON), the first the default. */
  produces?: string | readonly string[];
  /**
   * The deployment this request is about: a param name (`'name'`), or a function reading it from the request.
   * The core checks the principal's access to it before the handler runs (level from the permission, or
   * `deploymentLevel`) and answers 404 for a deployment the principal may not see.
   */
  deployment?:
    string | ((req: RouteRequest<StaticOr<P, Record<string, string>>, StaticOr<Q, Record<string, never>>, StaticOr<B, undefined>>) => string | undefined);
  deploymentLevel?: AccessLevel;
  /** See `Tenancy`; applies when no deployment is named. Default `global`. */
  tenancy?: Tenancy;
  /** Preview support for `?plan=true`. */
  plan?: PlanSupport<RequestOf<P, Q, B>>;
  /** Skip JSON parsing: the handler reads `req.raw.req` itself (uploads). */
  rawBody?: boolean;
  /**
   * A `multipart/form-data` body (uploads of a user: an archive, files): each of `files` is one required file
   * (`req.files[name]`), at most `maxFileSize` bytes (larger: 413); the other fields are the body, validated by
   * `body` (strings). The permission is checked before anything is read. Not with `plan` or `rawBody`.
   */
  multipart?: { files: string[]; maxFileSize: number };
  /**
   * The other answers this route gives besides its success and the kernel's own (400 validation, 401, 403, 404, 500,
   * 413/415 for bodies): status → the codes it answers with, e.g. `{ 409: ['DEPLOYMENT_EXISTS'], 503:
   * ['DOCKER_UNAVAILABLE'] }`. They are documented in `/api/openapi.json`, and a status listed here has its `code` as
   * an enum there (the kernel's codes of that status included), so a client can switch on it; `'*'` among the codes
   * leaves the set open (the answer of something else, e.g. a plan's operation).
   */
  errors?: ErrorCodes;
  /** Other success statuses this route may answer with the same body (a plan's apply answers what its operation does). */
  successes?: number[];
  /** Mutating requests are audited; set false for read-like POSTs (database queries, tests). */
  audit?: boolean;
  /**
   * The property naming what this request creates (`'name'`, `'id'`): taken from the answer's `data`, else from the
   * request body, it becomes the audit record's `resource_id` (and its `deployment` when the route has tenancy
   * `create`, i.e. it creates a deployment). Routes with the resource in their path need nothing.
   */
  creates?: string;
  handler(req: RequestOf<P, Q, B>): unknown | Promise<unknown>;
}

/**
 * Every route declares who may call it: a permission (`deployments:write`), `'authenticated'` (any valid
 * principal, e.g. `/users/me`), or `public: true` (no authentication). A route with none is refused at registration.
 */
export type RouteSpec<P = unknown, Q = unknown, B = unknown> =
  (RouteBase<P, Q, B> & { permission: Permission | 'authenticated'; public?: false }) | (RouteBase<P, Q, B> & { public: true; permission?: undefined });

/** A websocket endpoint; the client sends its token as the first message. */
export interface WebSocketSpec<P = unknown, Q = unknown> {
  path: string;
  summary: string;
  description?: string;
  operationId?: string;
  tag?: string;
  permission: Permission | 'authenticated';
  params?: P;
  query?: Q;
  deployment?: string | ((req: { params: StaticOr<P, Record<string, string>>; query: StaticOr<Q, Record<string, never>> }) => string | undefined);
  deploymentLevel?: AccessLevel;
  /** See `Tenancy`. */
  tenancy?: Tenancy;
  handler(
    conn: WebSocketConnection,
    req: {
      params: StaticOr<P, Record<string, string>>;
      query: StaticOr<Q, Record<string, never>>;
      principal: Principal;
      ip: string;
    },
  ): void | Promise<void>;
}

export interface WebSocketConnection {
  /**
   * Sends a text message: a string as is, a `Uint8Array` as text already encoded in UTF-8 (one encoding for a message
   * sent to many connections), anything else as JSON. Resolves when written (backpressure aware).
   */
  send(message: unknown): Promise<void>;
  /** Closes with a code (1000 normal, 1011 server error, …). */
  close(code?: number, reason?: string): void;
  /**
   * Aborted when the peer leaves or the connection is closed, also by the kernel when the principal's rights are
   * taken away (closed with 4401 or 4403): `req.principal` is the principal as it was when the socket opened.
   */
  readonly signal: AbortSignal;
  onMessage(listener: (text: string) => void): void;
}

/** Koa middleware a plugin adds in front of its own routes (`ctx.use`): koa's context, and `next` to go on. */
export type HttpMiddleware = (ctx: KoaContext, next: KoaNext) => unknown;

/**
 * A static site a plugin serves at `/` (`ctx.site`): the built files of a web client, answered for `GET` and
 * `HEAD` of every path outside `/api`, same origin as the API. The kernel adds the headers every page it serves
 * carries (a Content-Security-Policy without inline scripts and with `frame-ancestors 'none'`, `nosniff`, a
 * `Referrer-Policy`) and the caching rules below; files are read without following links out of `root`.
 */
export interface SiteSpec {
  /** Absolute folder of the built files. */
  root: string;
  /** Answered (200, never cached) for a path that names no file: a single-page app's own routes. Default `index.html`. */
  fallback?: string;
  /**
   * Folders below `root` (e.g. `assets/`) whose file names carry a hash of their content: cached for a year as
   * `immutable`. Everything else is revalidated at every load (`no-cache`).
   */
  immutable?: string[];
}
