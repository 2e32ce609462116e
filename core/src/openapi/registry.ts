/**
 * The route registry: every HTTP route, websocket and app route the enabled plugins declared, with compiled
 * validators. It feeds the router, the plan engine and `/api/openapi.json`.
 */
import { match } from 'path-to-regexp';
import type { Middleware } from 'koa';
import type { AppRouteSpec, ErrorCodes, HttpMethod, RouteSpec, SiteSpec, WebSocketSpec } from '@agent/sdk';
import { bodyValidator, paramsValidator, queryValidator, type Validator } from './validation.js';

interface Entry<K extends string, S> {
  kind: K;
  plugin: string;
  tag: string;
  operationId: string;
  /** Path below `/api` (app routes: inside the app), with `:param` segments (`/deployments/:name`). */
  path: string;
  permission: string;
  spec: S;
  validate: { params: Validator; query: Validator };
}

type Matcher = (path: string) => Record<string, string> | null;

export interface RegisteredRoute extends Omit<Entry<'http', RouteSpec<any, any, any>>, 'permission' | 'validate'> {
  /** The operationId was derived from method and path (not given by the plugin). */
  derived?: boolean;
  /** The answers besides success and the kernel's own: the route's `errors` and its plugin's. */
  errors: ErrorCodes;
  method: HttpMethod;
  /** null for public routes. */
  permission: string | null;
  validate: { params: Validator; query: Validator; body: Validator | null };
}

export interface RegisteredSocket extends Entry<'websocket', WebSocketSpec<any, any>> {
  match: Matcher;
}

export interface RegisteredAppRoute extends Entry<'app', AppRouteSpec> {
  method: HttpMethod;
  match: Matcher;
}

type Registered = RegisteredRoute | RegisteredSocket | RegisteredAppRoute;

const PARAM = /:([A-Za-z_][A-Za-z0-9_]*)/g;

const pathParams = (path: string): string[] => [...path.matchAll(PARAM)].map((m) => m[1]!);

const camel = (parts: string[]): string =>
  parts
    .flatMap((p) => p.split(/[-_.]/))
    .filter(Boolean)
    .map((p, i) => (i === 0 ? p.toLowerCase() : p[0]!.toUpperCase() + p.slice(1).toLowerCase()))
    .join('');

/**
 * `GET /deployments` → `list`, `GET /deployments/:name` → `get`, `POST /deployments/:name/start` → `start`,
 * `GET /security/events/:id` → `securityEventsGet` (the tag's own first segment is dropped).
 */
function deriveOperationName(tag: string, method: HttpMethod, path: string): string {
  const segments = path.split('/').filter(Boolean);
  const literals = segments.filter((s) => !s.startsWith(':'));
  if (literals[0] === tag) literals.shift();
  const endsWithParam = segments.length > 0 && segments[segments.length - 1]!.startsWith(':');
  const lastIsAction = !endsWithParam && segments.length >= 2 && segments[segments.length - 2]!.startsWith(':');
  let verb = '';
  if (method === 'GET') verb = endsWithParam ? 'get' : literals.length === 0 ? 'list' : '';
  else if (method === 'POST') verb = endsWithParam ? 'post' : lastIsAction || literals.length > 0 ? '' : 'create';
  else if (method === 'PUT') verb = 'update';
  else if (method === 'PATCH') verb = 'patch';
  else if (method === 'DELETE') verb = 'delete';
  return camel([...literals, verb]) || verb;
}

/**
 * A path matcher for paths with `:param` segments (`/metrics/:id`), used where the route table is not (sockets, app
 * routes). Unlike the route table it is case-sensitive, and a param that does not decode matches nothing.
 */
function pathMatcher(path: string): Matcher {
  const matches = match<Record<string, string>>(path, { decode: decodeURIComponent, sensitive: true, strict: false, end: true });
  return (candidate) => {
    try {
      const found = matches(candidate);
      return found ? { ...found.params } : null;
    } catch {
      return null;
    }
  };
}

function paramsSchemaFor(path: string, declared: unknown): unknown {
  const names = pathParams(path);
  if (declared) {
    const props = (declared as { properties?: Record<string, unknown> }).properties ?? {};
    for (const n of names) if (!(n in props)) throw new Error(`path param ':${n}' is missing from the params schema`);
    return declared;
  }
  return {
    type: 'object',
    properties: Object.fromEntries(names.map((n) => [n, { type: 'string', minLength: 1, maxLength: 256 }])),
    required: names,
  };
}

/** Identity of an entry for duplicate detection: param names do not matter, `/a/:x` and `/a/:y` clash. */
const entryKey = (e: Registered): string => {
  const path = e.path.replace(PARAM, ':');
  return e.kind === 'http' ? `http ${e.method} ${path}` : e.kind === 'websocket' ? `ws ${path}` : `app ${e.plugin} ${e.method} ${path}`;
};

function checkPath(path: string): void {
  if (!/^(\/[A-Za-z0-9._:-]+)+\/?$|^\/$/.test(path)) throw new Error(`invalid route path '${path}'`);
}

type CommonSpec = { path: string; tag?: string; operationId?: string; params?: unknown; query?: unknown };

/** What every kind of entry shares: tag, operationId (derived when not given), params and query validators. */
function common(plugin: string, spec: CommonSpec, method: HttpMethod) {
  const tag = spec.tag ?? plugin;
  return {
    plugin,
    tag,
    path: spec.path,
    operationId: spec.operationId ?? `${tag}.${deriveOperationName(tag, method, spec.path)}`,
    validate: { params: paramsValidator(paramsSchemaFor(spec.path, spec.params)), query: queryValidator(spec.query ?? { type: 'object', properties: {} }) },
  };
}

export class RouteRegistry {
  readonly routes: RegisteredRoute[] = [];
  readonly sockets: RegisteredSocket[] = [];
  readonly appRoutes: RegisteredAppRoute[] = [];
  /** Koa middleware each plugin added for its own routes (`ctx.use`). */
  readonly middleware = new Map<string, Middleware[]>();
  /** The static site served at `/` (`ctx.site`) and the plugin that serves it: one per agent. */
  site: { plugin: string; spec: SiteSpec } | null = null;

  /** Compiles a route without registering it (plugins commit their routes only when setup succeeds). */
  prepareRoute(plugin: string, spec: RouteSpec<any, any, any>, pluginErrors: ErrorCodes = {}): RegisteredRoute {
    checkPath(spec.path);
    const permission = spec.public === true ? null : spec.permission;
    if (!spec.public && !permission) throw new Error(`route ${spec.method} ${spec.path} declares no permission (deny by default)`);
    if (permission && permission !== 'authenticated' && !/^([a-z][a-z0-9-]*|\*):(read|write)$/.test(permission)) {
      throw new Error(`route ${spec.method} ${spec.path}: invalid permission '${permission}'`);
    }
    if (spec.plan && spec.method === 'GET') throw new Error(`route GET ${spec.path}: a GET cannot be plannable`);
    if (spec.body && spec.method === 'GET') throw new Error(`route GET ${spec.path}: a GET has no body`);
    // A plan stores its request to run it later: it cannot hold the files of an upload.
    if (spec.multipart && (spec.plan || spec.rawBody || spec.method === 'GET' || !spec.multipart.files.length || !(spec.multipart.maxFileSize > 0))) {
      throw new Error(`route ${spec.method} ${spec.path}: a multipart route takes files (a positive maxFileSize), no plan, no raw body, and is not a GET`);
    }
    const base = common(plugin, spec, spec.method);
    const body = spec.body ? bodyValidator(spec.body) : null;
    const errors: Record<string, string[]> = {};
    for (const source of [pluginErrors, spec.errors ?? {}])
      for (const [status, codes] of Object.entries(source)) errors[status] = [...new Set([...(errors[status] ?? []), ...(codes ?? [])])];
    return {
      ...base,
      kind: 'http',
      derived: !spec.operationId,
      method: spec.method,
      permission,
      spec,
      errors: errors as ErrorCodes,
      validate: { ...base.validate, body },
    };
  }

  prepareSocket(plugin: string, spec: WebSocketSpec<any, any>): RegisteredSocket {
    checkPath(spec.path);
    if (!spec.permission) throw new Error(`websocket ${spec.path} declares no permission (deny by default)`);
    return { ...common(plugin, spec, 'GET'), kind: 'websocket', permission: spec.permission, spec, match: pathMatcher(spec.path) };
  }

  prepareAppRoute(plugin: string, spec: AppRouteSpec): RegisteredAppRoute {
    checkPath(spec.path);
    if (!spec.permission) throw new Error(`app route ${spec.method} ${spec.path} declares no permission (deny by default)`);
    return { ...common(plugin, spec, spec.method), kind: 'app', method: spec.method, permission: spec.permission, spec, match: pathMatcher(spec.path) };
  }

  /** Registers prepared entries atomically: all or none (duplicate ids or method+path refuse the batch). */
  commit(entries: Registered[]): void {
    const registered = [...this.routes, ...this.sockets, ...this.appRoutes];
    const owners = new Map(registered.map((e) => [e.operationId, e.plugin]));
    const keys = new Set(registered.map(entryKey));
    const seenIds = new Set<string>();
    const seenKeys = new Set<string>();
    for (const e of entries) {
      // A derived id that clashes (GET and POST on one collection) gets the method's verb appended.
      if (e.kind === 'http' && e.derived && (owners.has(e.operationId) || seenIds.has(e.operationId))) {
        e.operationId += { GET: 'List', POST: 'Create', PUT: 'Update', PATCH: 'Patch', DELETE: 'Delete' }[e.method];
      }
      const owner = owners.get(e.operationId);
      if (owner) throw new Error(`operationId '${e.operationId}' is already used by plugin '${owner}'`);
      if (seenIds.has(e.operationId)) throw new Error(`operationId '${e.operationId}' is declared twice`);
      seenIds.add(e.operationId);
      const key = entryKey(e);
      if (keys.has(key) || seenKeys.has(key)) throw new Error(`route ${key.slice(key.indexOf(' ') + 1)} is declared twice`);
      seenKeys.add(key);
    }
    for (const e of entries) {
      if (e.kind === 'http') this.routes.push(e);
      else if (e.kind === 'websocket') this.sockets.push(e);
      else this.appRoutes.push(e);
    }
  }

  /** The middleware a plugin adds in front of its own routes, after authentication and the body, before its handlers. */
  use(plugin: string, middleware: Middleware[]): void {
    if (middleware.length) this.middleware.set(plugin, [...(this.middleware.get(plugin) ?? []), ...middleware]);
  }

  /** Refuses a second site (before anything of the plugin is committed, so it fails whole). */
  checkSite(plugin: string): void {
    if (this.site && this.site.plugin !== plugin) throw new Error(`the site at / is already served by plugin '${this.site.plugin}'`);
  }

  serveSite(plugin: string, spec: SiteSpec): void {
    this.checkSite(plugin);
    this.site = { plugin, spec };
  }

  /** Withdraws every entry of a plugin (one that failed to start). */
  removePlugin(plugin: string): void {
    this.middleware.delete(plugin);
    if (this.site?.plugin === plugin) this.site = null;
    for (const list of [this.routes, this.sockets, this.appRoutes] as { plugin: string }[][]) {
      for (let i = list.length - 1; i >= 0; i--) if (list[i]!.plugin === plugin) list.splice(i, 1);
    }
  }

  byOperationId(operationId: string): RegisteredRoute | undefined {
    return this.routes.find((r) => r.operationId === operationId);
  }

  forPlugin(plugin: string) {
    return {
      routes: this.routes.filter((r) => r.plugin === plugin),
      sockets: this.sockets.filter((s) => s.plugin === plugin),
      appRoutes: this.appRoutes.filter((a) => a.plugin === plugin),
    };
  }
}
