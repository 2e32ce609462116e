/**
 * The typed HTTP client of the agent: JSON requests with the bearer token, error answers turned into
 * `AgentApiError`, the core endpoints (health, login, description, plans) as methods, and websocket follows.
 */
import { AgentApiError, AgentConnectionError, errorBodyFrom } from './errors.js';
import type { Credentials, Envelope, Health, LoginResult, Plan, PlanApplyResult, QueryValue } from './types.js';

export type { QueryValue };
import { followStream, type FollowOptions } from './stream.js';
import { nodeTransport, type Transport } from './transport.js';

export interface RequestOptions {
  query?: Record<string, QueryValue>;
  /** JSON-encoded unless it is a Buffer/Uint8Array/string with an explicit `contentType`. */
  body?: unknown;
  contentType?: string;
  headers?: Record<string, string>;
  signal?: AbortSignal;
  /** Send no token even if the client has one (public routes). */
  anonymous?: boolean;
}

/** A successful answer: the parsed JSON body, or the raw bytes for non-JSON media types. */
export interface AgentResponse<T = unknown> {
  status: number;
  /** Lower-case header names. */
  headers: Record<string, string>;
  contentType: string;
  /** The parsed JSON answer (`{data, message?, meta?}` for the agent's JSON routes); undefined for raw answers. */
  json?: T;
  /** The body as bytes when it is not JSON (downloads, exports, the description). */
  raw?: Buffer;
}

export interface AgentClientOptions {
  /** Base URL of the agent, e.g. `https://agent.example.com` (a trailing `/api` is accepted). */
  url: string;
  /** JWT or API key. */
  token?: string;
  /** Replaceable for tests or proxies (default: node:http/https). */
  transport?: Transport;
  userAgent?: string;
  /** Per-request timeout in ms (default 60 s); streams are not limited. */
  timeoutMs?: number;
}

/** Normalises a user-given address: scheme required, no trailing slash, no `/api` suffix. */
export function normaliseUrl(input: string): string {
  let url: URL;
  try {
    url = new URL(input);
  } catch {
    throw new AgentConnectionError(`'${input}' is not a URL (expected e.g. https://agent.example.com)`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new AgentConnectionError(`'${input}': only http and https URLs are supported`);
  if (url.username || url.password) throw new AgentConnectionError(`'${input}': put credentials in the login, not in the URL`);
  const path = url.pathname.replace(/\/+$/, '').replace(/\/api$/, '');
  return `${url.protocol}//${url.host}${path}`;
}

export class AgentClient {
  readonly url: string;
  token: string | undefined;
  private readonly transport: Transport;
  private readonly userAgent: string;
  private readonly timeoutMs: number;

  constructor(options: AgentClientOptions) {
    this.url = normaliseUrl(options.url);
    this.token = options.token;
    this.transport = options.transport ?? nodeTransport;
    this.userAgent = options.userAgent ?? 'agent-client';
    this.timeoutMs = options.timeoutMs ?? 60_000;
  }

  /** Absolute URL of an API path (`/deployments` or `/api/deployments`) with its query string. */
  urlFor(path: string, query: Record<string, QueryValue> = {}): URL {
    const apiPath = path.startsWith('/api/') || path === '/api' ? path : `/api${path.startsWith('/') ? '' : '/'}${path}`;
    const url = new URL(this.url + apiPath);
    for (const [key, value] of Object.entries(query)) {
      if (value === undefined || value === null) continue;
      for (const v of Array.isArray(value) ? value : [value]) url.searchParams.append(key, String(v));
    }
    return url;
  }

  /** Sends a request; an error status throws `AgentApiError` with the agent's `{error, code}`. */
  async request<T = unknown>(method: string, path: string, options: RequestOptions = {}): Promise<AgentResponse<T>> {
    const url = this.urlFor(path, options.query);
    const headers: Record<string, string> = { accept: 'application/json', 'user-agent': this.userAgent, ...(options.headers ?? {}) };
    if (this.token && !options.anonymous) headers.authorization = `Bearer ${this.token}`;
    let body: string | Uint8Array | undefined;
    if (options.body !== undefined) {
      if (options.contentType && (typeof options.body === 'string' || options.body instanceof Uint8Array)) {
        body = options.body;
        headers['content-type'] = options.contentType;
      } else {
        body = JSON.stringify(options.body);
        headers['content-type'] = 'application/json';
      }
    }
    const timeout = AbortSignal.timeout(this.timeoutMs);
    const signal = options.signal ? AbortSignal.any([options.signal, timeout]) : timeout;
    let res;
    try {
      res = await this.transport(url, { method, headers, body, signal });
    } catch (err) {
      const e = err as NodeJS.ErrnoException;
      const why = timeout.aborted ? `no answer within ${this.timeoutMs / 1000} s` : (e.code ?? e.message);
      throw new AgentConnectionError(`cannot reach the agent at ${this.url}: ${why}`, { cause: err });
    }
    if (res.status >= 300 && res.status < 400) {
      throw new AgentConnectionError(`${this.url} redirects to ${res.headers.location ?? 'another address'}; use the final address as the agent URL`);
    }
    const contentType = res.headers['content-type'] ?? '';
    const raw = res.body;
    const isJson = /^application\/(.+\+)?json\b/i.test(contentType);
    let parsed: unknown;
    if (isJson && raw.length > 0) {
      try {
        parsed = JSON.parse(raw.toString('utf8'));
      } catch {
        parsed = undefined;
      }
    }
    if (res.status < 200 || res.status >= 300) throw new AgentApiError(res.status, errorBodyFrom(res.status, raw.toString('utf8'), parsed));
    if (isJson) return { status: res.status, headers: res.headers, contentType, json: parsed as T };
    return { status: res.status, headers: res.headers, contentType, raw };
  }

  /** A JSON route's `{data, message, meta}`. */
  async call<T = unknown>(method: string, path: string, options: RequestOptions = {}): Promise<Envelope<T>> {
    const res = await this.request<Envelope<T>>(method, path, options);
    if (res.json === undefined) throw new AgentConnectionError(`${method} ${path}: expected a JSON answer, got '${res.contentType || 'no content type'}'`);
    return res.json;
  }

  async health(): Promise<Health> {
    return (await this.call<Health>('GET', '/health', { anonymous: true })).data;
  }

  /** Logs in and keeps the token for the next requests. */
  async login(credentials: Credentials): Promise<LoginResult> {
    const body = 'apiKey' in credentials ? { api_key: credentials.apiKey } : { username: credentials.username, password: credentials.password };
    const result = (await this.call<LoginResult>('POST', '/auth/login', { body, anonymous: true })).data;
    this.token = result.token;
    return result;
  }

  /** The live OpenAPI description of the agent (needs a token). */
  async description(): Promise<Record<string, unknown>> {
    const res = await this.request('GET', '/openapi.json');
    const text = res.raw?.toString('utf8');
    const doc = res.json ?? (text ? JSON.parse(text) : undefined);
    if (!doc || typeof doc !== 'object' || typeof (doc as { openapi?: unknown }).openapi !== 'string') {
      throw new AgentConnectionError(`${this.url}/api/openapi.json is not an OpenAPI document`);
    }
    return doc as Record<string, unknown>;
  }

  readonly plans = {
    list: async (status?: Plan['status']) => (await this.call<Plan[]>('GET', '/plans', { query: { status } })).data,
    get: async (id: string) => (await this.call<Plan>('GET', `/plans/${encodeURIComponent(id)}`)).data,
    apply: async (id: string) => (await this.call<PlanApplyResult>('POST', `/plans/${encodeURIComponent(id)}/apply`)).data,
    discard: async (id: string) => {
      await this.call('DELETE', `/plans/${encodeURIComponent(id)}`);
    },
  };

  /**
   * Follows a websocket endpoint (e.g. `/deployments/web/logs/stream`): sends the token as the first message,
   * waits for `{"type":"ready"}`, then hands every message to `onMessage` until the server or `signal` closes it.
   */
  follow(path: string, options: Omit<FollowOptions, 'token' | 'url'>): Promise<void> {
    const url = this.urlFor(path, options.query ?? {});
    url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
    return followStream({ ...options, url: url.toString(), token: this.token ?? '' });
  }
}
