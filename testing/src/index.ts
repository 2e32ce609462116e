/**
 * The in-process test harness behind `@agent/sdk/testing` (`@agent/testing`; the types are the SDK's, see
 * sdk/src/testing.ts). A package of its own, not the kernel's: the agent never runs it, a plugin's tests do. It is
 * the agent itself: the kernel's composition root (`startAgent` of `@agent/core`) on a configuration
 * read by `loadConfig` from a temporary folder, listening on a loopback port, with the plugin under test, a plugin
 * providing its fakes and any other plugins handed over as definitions. So every request meets the kernel's own
 * pipeline (routing, authentication by the access plugin, validation, permission and tenancy checks, plans, the
 * audit journal), and answers are held to their routes' schemas as in the other tests. Nothing here needs root:
 * the data folder is a temporary one and no built-in plugin is loaded but those asked for (and `access` and `apps`,
 * always loaded: neither touches the host).
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import WebSocket from 'ws';
import { definePlugin, type AccessLevel, type Dependency, type AnyPluginDefinition, type Role, type Scope, type ServiceRef } from '@agent/sdk';
import type { StartTestPlugin, TestPlugin, TestPrincipal, TestRequestOptions, TestResponse, TestSocket, TestUser } from '@agent/sdk/testing';
import { loadConfig } from '@agent/core/config';
import { startAgent, type RunningAgent } from '@agent/core/agent';

/**
 * What the harness uses of the access plugin's identity service (`identityService` of `@agent/plugin-access/api`,
 * id `identity`): the kernel knows no plugin's contract, so this part of it is restated here.
 */
interface Identity {
  users: {
    findByUsername(username: string): { id: number } | undefined;
    create(input: { username: string; email: string; password: string; role: Role; permissions?: string[]; scope?: Scope }): Promise<{ id: number }>;
    issueToken(id: number): Promise<string>;
  };
  grants: { set(user_id: number, deployment: string, level: AccessLevel): Promise<unknown> };
  apiKeys: {
    create(input: {
      user_id: number;
      name: string;
      role: Role;
      permissions?: string[];
      deployments?: string[];
    }): Promise<{ record: { id: number }; key: string }>;
  };
}

interface Credential {
  id: string;
  token: string;
  user_id: number;
  role: Role;
}

/**
 * The fakes as a plugin that provides them under the refs the plugin under test declares for those keys: the host
 * orders it first and hands them over as it would any provider's services.
 */
function fakeProvider(plugin: AnyPluginDefinition, fakes: Record<string, unknown>): AnyPluginDefinition | null {
  const declared = (plugin.deps ?? {}) as Record<string, Dependency>;
  const provides: Record<string, ServiceRef<unknown>> = {};
  const given: Record<string, unknown> = {};
  for (const [key, fake] of Object.entries(fakes)) {
    if (fake === undefined) continue;
    const dep = declared[key];
    if (!dep)
      throw new Error(`deps.${key}: plugin '${plugin.name}' declares no dependency '${key}' (it declares: ${Object.keys(declared).join(', ') || 'none'})`);
    provides[key] = 'ref' in dep && dep.optional ? dep.ref : (dep as ServiceRef<unknown>);
    given[key] = fake;
  }
  if (Object.keys(provides).length === 0) return null;
  return definePlugin({ name: 'test-fakes', version: '0.0.0', description: 'fakes given to startTestPlugin', provides, setup: () => ({ provides: given }) });
}

/** A principal's description with its keys sorted: the same principal asked for twice compares equal. */
const canonical = (value: unknown): string =>
  JSON.stringify(value, (_key, v: unknown) =>
    v && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v as Record<string, unknown>).sort(([a], [b]) => a.localeCompare(b)))
      : v,
  );

const apiPath = (path: string): string => (path === '/api' || path.startsWith('/api/') ? path : `/api${path.startsWith('/') ? '' : '/'}${path}`);

export const startTestPlugin: StartTestPlugin = async (plugin, options = {}) => {
  const fakes = fakeProvider(plugin, (options.deps ?? {}) as Record<string, unknown>);
  const others = options.plugins ?? [];
  const dir = options.packageDir ?? process.cwd();
  const inline = [...(fakes ? [fakes] : []), ...others.filter((p) => typeof p !== 'string'), plugin].map((definition) => ({ definition, dir }));
  const names = inline.map((p) => p.definition.name);
  const twice = names.filter((name, i) => names.indexOf(name) !== i);
  if (twice.length > 0) throw new Error(`two plugins named ${twice.map((n) => `'${n}'`).join(', ')} given to startTestPlugin`);
  const work = mkdtempSync(join(tmpdir(), 'agent-plugin-test-'));
  // The first admin's password is set, not generated: a generated one is announced in the log, at any log level.
  const config = {
    ...options.config,
    listen: '127.0.0.1:0',
    data_dir: join(work, 'data'),
    admin_password: `Test-${randomBytes(18).toString('base64url')}-1`,
    log: { level: options.log ?? 'warn', format: 'json' },
    plugins: { ...(options.config?.plugins as Record<string, unknown> | undefined), enabled: others.filter((p) => typeof p === 'string') },
  };
  // JSON is YAML: the agent reads its configuration as `npm start` does (the environment left out: the test's own).
  writeFileSync(join(work, 'agent.yaml'), JSON.stringify(config), { mode: 0o600 });
  let running: RunningAgent;
  try {
    running = await startAgent(loadConfig(['--config', join(work, 'agent.yaml')], {}), () => undefined, { plugins: inline, validateResponses: true });
  } catch (err) {
    rmSync(work, { recursive: true, force: true });
    throw err;
  }
  const sockets = new Set<WebSocket>();
  let closing: Promise<void> | null = null;
  const close = () =>
    (closing ??= (async () => {
      for (const ws of sockets) ws.terminate();
      await running.stop();
      rmSync(work, { recursive: true, force: true });
    })());

  const identity = (): Identity => {
    const found = running.services.get<Identity>('identity');
    if (!found) throw new Error('no identity service: the access plugin is not running');
    return found;
  };
  const made = new Map<string, { spec: string; credential: Promise<Credential> }>();
  const userCredential = async (u: TestUser): Promise<Credential> => {
    const role = u.role ?? 'operator';
    const password = `Test-${randomBytes(18).toString('base64url')}-1`;
    const user = await identity().users.create({
      username: u.user,
      email: `${u.user}@example.test`,
      password,
      role,
      permissions: u.permissions,
      scope: u.scope,
    });
    for (const [deployment, level] of Object.entries(u.deployments ?? {})) await identity().grants.set(user.id, deployment, level);
    return { id: `user:${user.id}`, token: await identity().users.issueToken(user.id), user_id: user.id, role };
  };
  /** The principal's credential, made at its first use; the same name asked for as another principal is an error. */
  const credential = (who: Exclude<TestPrincipal, 'anonymous'>): Promise<Credential> => {
    const name = who === 'admin' ? 'user:admin' : 'user' in who ? `user:${who.user}` : `key:${who.key}`;
    const spec = canonical(who);
    const known = made.get(name);
    if (known) {
      if (known.spec !== spec) return Promise.reject(new Error(`${name} was made as ${known.spec}, not ${spec}`));
      return known.credential;
    }
    let making: Promise<Credential>;
    if (who === 'admin') {
      const admin = identity().users.findByUsername('admin')!;
      making = identity()
        .users.issueToken(admin.id)
        .then((token) => ({ id: `user:${admin.id}`, token, user_id: admin.id, role: 'admin' as const }));
    } else if ('user' in who) making = userCredential(who);
    else {
      making = credential(who.owner ?? 'admin').then(async (owner) => {
        const { record, key } = await identity().apiKeys.create({
          user_id: owner.user_id,
          name: who.key,
          role: who.role ?? owner.role,
          permissions: who.permissions,
          deployments: who.deployments,
        });
        return { id: `api_key:${record.id}`, token: key, user_id: owner.user_id, role: who.role ?? owner.role };
      });
    }
    made.set(name, { spec, credential: making });
    return making;
  };
  const asDefault: TestPrincipal = options.principal ?? 'admin';
  const bearer = async (options: Pick<TestRequestOptions, 'principal' | 'token'>): Promise<string | null> => {
    if (options.token !== undefined) return options.token;
    const who = options.principal ?? asDefault;
    return who === 'anonymous' ? null : (await credential(who)).token;
  };

  const request = async <T>(method: string, path: string, options: TestRequestOptions = {}): Promise<TestResponse<T>> => {
    const url = new URL(apiPath(path), running.url);
    for (const [k, v] of Object.entries(options.query ?? {})) if (v !== undefined) url.searchParams.set(k, String(v));
    const headers: Record<string, string> = { ...options.headers };
    const token = await bearer(options);
    if (token) headers.authorization = `Bearer ${token}`;
    let body: string | Uint8Array | FormData | undefined = options.raw;
    if (body === undefined && options.body !== undefined) {
      body = JSON.stringify(options.body);
      headers['content-type'] ??= 'application/json';
    }
    const res = await fetch(url, { method, headers, body });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch {
      // not JSON: the text as it is
    }
    return { status: res.status, body: parsed as T, text, headers: res.headers };
  };

  const websocket = async (path: string, options: Pick<TestRequestOptions, 'query' | 'principal' | 'token'> = {}): Promise<TestSocket> => {
    const url = new URL(apiPath(path), running.url.replace(/^http/, 'ws'));
    for (const [k, v] of Object.entries(options.query ?? {})) if (v !== undefined) url.searchParams.set(k, String(v));
    const token = await bearer(options);
    const ws = new WebSocket(url);
    sockets.add(ws);
    const messages: unknown[] = [];
    let taken = 0;
    const waiting = new Set<() => void>();
    ws.on('message', (data, isBinary) => {
      let message: unknown = data;
      if (!isBinary) {
        try {
          message = JSON.parse(String(data));
        } catch {
          message = String(data);
        }
      }
      messages.push(message);
      for (const wake of waiting) wake();
    });
    let ended = false;
    const closed = new Promise<{ code: number; reason: string }>((resolve) =>
      ws.once('close', (code, reason) => {
        ended = true;
        sockets.delete(ws);
        for (const wake of waiting) wake();
        resolve({ code, reason: reason.toString() });
      }),
    );
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    // The kernel authenticates a websocket by its first message; an empty one is no credential.
    ws.send(token ?? '');
    const next = (timeoutMs = 5000) =>
      new Promise<unknown>((resolve, reject) => {
        const check = () => {
          if (taken < messages.length) resolve(messages[taken++]);
          else if (ended) reject(new Error(`websocket ${path} closed before another message`));
          else return false;
          waiting.delete(check);
          clearTimeout(timer);
          return true;
        };
        const timer = setTimeout(() => {
          waiting.delete(check);
          reject(new Error(`no message on websocket ${path} in ${timeoutMs} ms`));
        }, timeoutMs);
        if (!check()) waiting.add(check);
      });
    return {
      messages,
      next,
      send: (message) => ws.send(typeof message === 'string' ? message : JSON.stringify(message)),
      close: () => ws.close(),
      closed,
    };
  };

  const harness: TestPlugin = {
    url: running.url,
    dataDir: join(work, 'data'),
    request,
    websocket,
    principal: async (who) => {
      const { id, token } = await credential(who);
      return { id, token };
    },
    services: { get: <T>(ref: ServiceRef<T>) => running.services.get<T>(ref.id) },
    events: running.events,
    close,
  };

  // The kernel only reports a plugin whose setup or start failed (the agent keeps running), and only logs one it
  // ignored because a plugin of its name was loaded first (`access` and `apps` always are): here either is the
  // test's failure, with the kernel's reason.
  try {
    const listed = await request<{ data: { name: string; status: string; error: string | null; builtin: boolean; source: string }[] }>('GET', '/plugins', {
      principal: 'admin',
    });
    const reasons = listed.body.data.filter((p) => p.status !== 'running').map((p) => `${p.name}: ${p.error ?? p.status}`);
    for (const { definition } of inline) {
      const loaded = listed.body.data.find((p) => p.name === definition.name);
      if (loaded && (loaded.builtin || loaded.source !== definition.name)) {
        reasons.push(`${definition.name}: not loaded, a plugin of that name was (${loaded.builtin ? 'the built-in' : loaded.source})`);
      }
    }
    if (reasons.length > 0) throw new Error(`plugins did not start: ${reasons.join('; ')}`);
  } catch (err) {
    await close();
    throw err;
  }
  return harness;
};
