/**
 * The console's only door to the agent: same-origin `fetch` on `/api` with the bearer token, and websockets that
 * send the token as their first message (never in a URL). The token is kept in this tab's session storage: it
 * survives a reload, is gone when the tab closes, and is never a cookie (so no request is authenticated by the
 * browser on its own, and no CSRF protection is needed).
 */

const TOKEN_KEY = 'agent.token';

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly body: unknown = null,
  ) {
    super(message);
  }
}

export const token = {
  get: (): string | null => sessionStorage.getItem(TOKEN_KEY),
  set: (value: string) => sessionStorage.setItem(TOKEN_KEY, value),
  clear: () => sessionStorage.removeItem(TOKEN_KEY),
};

/** Called when the agent answers 401 to a request that carried a token (expired, revoked): back to the login. */
let onUnauthorized: () => void = () => undefined;
export const setUnauthorizedHandler = (fn: () => void) => {
  onUnauthorized = fn;
};

export type Query = Record<string, string | number | boolean | undefined | null>;

export function withQuery(path: string, query?: Query): string {
  if (!query) return path;
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== null && v !== '') params.set(k, String(v));
  const text = params.toString();
  return text ? `${path}${path.includes('?') ? '&' : '?'}${text}` : path;
}

export interface Envelope<T> {
  data: T;
  message?: string;
  meta?: { total: number; limit: number; offset: number; next_token?: string };
}

export async function call<T = any>(method: string, path: string, options: { body?: unknown; query?: Query; signal?: AbortSignal } = {}): Promise<Envelope<T>> {
  const headers: Record<string, string> = { accept: 'application/json' };
  const bearer = token.get();
  if (bearer) headers.authorization = `Bearer ${bearer}`;
  let body: string | undefined;
  if (options.body !== undefined) {
    headers['content-type'] = 'application/json';
    body = JSON.stringify(options.body);
  }
  const res = await fetch(withQuery(`/api${path}`, options.query), { method, headers, body, signal: options.signal, credentials: 'omit' });
  const text = await res.text();
  let parsed: any = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    parsed = { error: text };
  }
  if (!res.ok) {
    if (res.status === 401 && bearer) onUnauthorized();
    throw new ApiError(res.status, parsed?.code ?? 'ERROR', parsed?.error ?? `${res.status} ${res.statusText}`, parsed);
  }
  return (parsed ?? { data: null }) as Envelope<T>;
}

export const get = <T = any>(path: string, query?: Query, signal?: AbortSignal) => call<T>('GET', path, { query, signal }).then((r) => r.data);

/** A file the agent streams (an audit export): fetched with the token, handed to the browser as a download. */
export async function download(method: string, path: string, body: unknown, filename: string): Promise<void> {
  const res = await fetch(`/api${path}`, {
    method,
    headers: { authorization: `Bearer ${token.get() ?? ''}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
    credentials: 'omit',
  });
  if (!res.ok) {
    const err = (await res.json().catch(() => ({}))) as { error?: string; code?: string };
    throw new ApiError(res.status, err.code ?? 'ERROR', err.error ?? res.statusText);
  }
  const url = URL.createObjectURL(await res.blob());
  const a = document.createElement('a');
  a.href = url;
  a.download = filename;
  a.click();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

export interface Socket {
  close(): void;
}

/** Opens a websocket on `/api<path>`, sends the token first, hands every JSON message to `onMessage`. */
export function openSocket(path: string, query: Query, onMessage: (msg: any) => void, onClose: (code: number, reason: string) => void): Socket {
  const url = new URL(withQuery(`/api${path}`, query), location.href);
  url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  const ws = new WebSocket(url);
  ws.onopen = () => ws.send(token.get() ?? '');
  ws.onmessage = (ev) => {
    try {
      onMessage(JSON.parse(String(ev.data)));
    } catch {
      /* not JSON: ignored */
    }
  };
  ws.onclose = (ev) => onClose(ev.code, ev.reason);
  return { close: () => ws.close() };
}

// ---- who is signed in, and what the description says they may do ----

export interface Principal {
  type: string;
  id: string;
  name: string;
  role: string;
  permissions: string[];
  deployments: Record<string, 'read' | 'write' | 'admin'>;
  scope: 'global' | 'deployments';
}

export interface Operation {
  method: string;
  path: string;
  operationId: string;
  summary?: string;
  permission?: string;
  plan: boolean;
  tenancy?: string;
  deploymentLevel?: string;
  /** The route names a deployment in its path: the deployment's level decides, not the global scope. */
  deploymentScoped: boolean;
  body?: any;
  parameters: any[];
}

export interface Description {
  raw: any;
  ops: Map<string, Operation>;
  /** `METHOD /api/path` → operation. */
  byRoute: Map<string, Operation>;
}

export async function loadDescription(): Promise<Description> {
  const raw = await fetch('/api/openapi.json', { headers: { authorization: `Bearer ${token.get() ?? ''}` }, credentials: 'omit' }).then((r) => r.json());
  const ops = new Map<string, Operation>();
  const byRoute = new Map<string, Operation>();
  for (const [path, item] of Object.entries<any>(raw.paths ?? {})) {
    for (const [method, op] of Object.entries<any>(item)) {
      if (!['get', 'post', 'put', 'patch', 'delete'].includes(method)) continue;
      const entry: Operation = {
        method: method.toUpperCase(),
        path,
        operationId: op.operationId,
        summary: op.summary,
        permission: op['x-permission'],
        plan: op['x-plan'] === true,
        tenancy: op['x-tenancy'],
        deploymentLevel: op['x-deployment-level'],
        deploymentScoped: op['x-deployment-scoped'] === true,
        body: resolveRefs(raw, op.requestBody?.content?.['application/json']?.schema),
        parameters: op.parameters ?? [],
      };
      ops.set(entry.operationId, entry);
      byRoute.set(`${entry.method} ${path}`, entry);
    }
  }
  return { raw, ops, byRoute };
}

function resolveRefs(raw: any, schema: any, depth = 0): any {
  if (!schema || typeof schema !== 'object' || depth > 8) return schema;
  if (typeof schema.$ref === 'string') {
    const target = schema.$ref
      .replace(/^#\//, '')
      .split('/')
      .reduce((node: any, key: string) => node?.[key], raw);
    return resolveRefs(raw, target, depth + 1);
  }
  if (Array.isArray(schema)) return schema.map((s) => resolveRefs(raw, s, depth + 1));
  const out: any = {};
  for (const [k, v] of Object.entries(schema)) out[k] = resolveRefs(raw, v, depth + 1);
  return out;
}

const LEVEL = { read: 1, write: 2, admin: 3 } as const;

/** Whether the principal holds a permission (`x:write` covers `x:read`; `*` any resource). */
export function hasPermission(p: Principal, permission: string | undefined): boolean {
  if (!permission || permission === 'authenticated') return true;
  const [resource, action] = permission.split(':');
  return p.permissions.some((held) => {
    const [r, a] = held.split(':');
    return (r === '*' || r === resource) && (a === action || a === 'write');
  });
}

/** The principal's level on a deployment (`*` for global principals), or null. */
export function deploymentLevel(p: Principal, name: string): 'read' | 'write' | 'admin' | null {
  return p.deployments[name] ?? p.deployments['*'] ?? null;
}

export const isGlobal = (p: Principal) => p.scope === 'global';

/**
 * Whether the principal may call an operation, as far as the console can tell beforehand (the agent checks again):
 * its permission, global routes for global principals only, and the level it needs on the deployment named.
 */
export function may(p: Principal, op: Operation | undefined, deployment?: string): boolean {
  if (!op) return false;
  if (!hasPermission(p, op.permission)) return false;
  if (!op.deploymentScoped && op.tenancy === 'global' && !isGlobal(p)) return false;
  if (deployment && op.deploymentScoped && op.deploymentLevel) {
    const level = deploymentLevel(p, deployment);
    if (!level || LEVEL[level] < LEVEL[op.deploymentLevel as keyof typeof LEVEL]) return false;
  }
  return true;
}
