/**
 * Helpers for app plugins: separate processes the agent runs (its `apps` plugin) and reaches through
 * `/api/plugin/<name>/`. The core authenticates each request, checks the permission the app declared for the
 * route, and forwards it with the caller's principal in a short-lived HS256 token in the `x-agent-principal` header.
 */
import { principalFrom, type Principal, type PrincipalInfo } from './principal.js';

export const PRINCIPAL_HEADER = 'x-agent-principal';

export interface AppEnvironment {
  /** The plugin's name (also the audience of the principal tokens). */
  name: string;
  /** Where to listen: always loopback. */
  host: string;
  port: number;
  /** Secret shared with the core, to verify principal tokens. */
  secret: string;
  /** The app's own data folder. */
  dataDir: string;
  /** The plugin's config sections. */
  config: Record<string, unknown>;
  /** The agent's API base URL and a token of the app's system principal, for calls back into the agent. */
  agentUrl: string;
  agentToken: string;
}

/** Reads the environment the agent starts an app with; throws a clear error when run outside the agent. */
export function appEnvironment(env: NodeJS.ProcessEnv = process.env): AppEnvironment {
  const need = (key: string): string => {
    const value = env[key];
    if (!value) throw new Error(`${key} is not set: app plugins are started by the agent`);
    return value;
  };
  return {
    name: need('AGENT_APP_NAME'),
    host: env.AGENT_APP_HOST ?? '127.0.0.1',
    port: Number(need('AGENT_APP_PORT')),
    secret: need('AGENT_APP_SECRET'),
    dataDir: need('AGENT_APP_DATA_DIR'),
    config: JSON.parse(env.AGENT_APP_CONFIG ?? '{}') as Record<string, unknown>,
    agentUrl: need('AGENT_URL'),
    agentToken: need('AGENT_APP_TOKEN'),
  };
}

/** Verifies the principal header of a proxied request. Throws when missing, forged or expired. */
export async function verifyPrincipal(
  headers: Record<string, string | string[] | undefined>,
  app: Pick<AppEnvironment, 'name' | 'secret'>,
): Promise<Principal> {
  const raw = headers[PRINCIPAL_HEADER];
  const token = Array.isArray(raw) ? raw[0] : raw;
  if (!token) throw new Error('missing principal header');
  // jose is loaded on first use: the agent itself imports this module for the header name only.
  const { jwtVerify } = await import('jose');
  const { payload } = await jwtVerify(token, new TextEncoder().encode(app.secret), {
    issuer: 'agent',
    audience: `app:${app.name}`,
    algorithms: ['HS256'],
  });
  return principalFrom(payload.principal as PrincipalInfo);
}

/**
 * Calls `stop` when the agent that started this app is gone, however it ended (a `kill -9` included): the agent
 * holds the other end of the app's stdin, which the kernel closes with it. The parent pid is watched too, for an
 * app whose stdin was redirected. Without this an app left behind by a killed agent would keep its port and its
 * files, and overlap the copy the restarted agent starts.
 */
export function onAgentGone(stop: () => void): void {
  let called = false;
  const once = () => {
    if (called) return;
    called = true;
    stop();
  };
  if (!process.stdin.isTTY) {
    process.stdin.on('end', once);
    process.stdin.on('close', once);
    process.stdin.on('error', once);
    // Reading is what makes end-of-file observable; the agent never writes anything.
    process.stdin.resume();
  }
  const parent = process.ppid;
  setInterval(() => {
    if (process.ppid !== parent) once();
  }, 1000).unref();
}
