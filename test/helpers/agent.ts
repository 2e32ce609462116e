/**
 * Starts the real agent (core/dist/agent.mjs, as npm start runs it) in a child process on a free loopback port with a temporary data
 * folder, and drives it over HTTP. Used by every test suite.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { stringify } from 'yaml';
// The agent as `npm start` runs it: the bundled core with the same Node flags and environment.
import { AGENT_ENTRY, AGENT_ENV, NODE_FLAGS } from '../../scripts/lib.mjs';
import { DescriptionCheck, isPending, MODE as DESCRIPTION_MODE, reportViolation, type DescriptionMode } from './description.js';

export { AGENT_ENTRY };
export const REPO_ROOT = resolve(import.meta.dirname, '../..');
export const ADMIN_PASSWORD = 'Admin-Test-Pass-1';

/**
 * The edge plugin's `proxy` section for an agent that must not touch the host's nginx: it renders into `dir` and its
 * test and reload commands do nothing.
 */
export function scratchProxy(dir: string) {
  return { config_dir: dir, test_command: ['true'], reload_command: ['true'], access_log: join(dir, 'access.log'), error_log: join(dir, 'error.log') };
}

export interface ApiResponse<T = any> {
  status: number;
  body: T;
  text: string;
  headers: Headers;
}

export interface RequestOptions {
  body?: unknown;
  /** Bearer token; defaults to the admin's. `null` sends none. */
  token?: string | null;
  headers?: Record<string, string>;
  query?: Record<string, string | number | boolean | undefined>;
  /** Raw body (sent as is, with the given content type). */
  raw?: string | Buffer;
}

export interface TestAgent {
  url: string;
  dataDir: string;
  workDir: string;
  /** Token of the bootstrap admin, used by `api` unless told otherwise (a test may replace it). */
  token: string;
  /** Everything the agent printed (stdout and stderr). */
  output: () => string;
  api<T = any>(method: string, path: string, options?: RequestOptions): Promise<ApiResponse<T>>;
  login(username: string, password: string): Promise<string>;
  /** Creates a user (via the core identity API) and returns a token; needs a users plugin or uses the admin API. */
  stop(): Promise<number | null>;
  /** Sends SIGKILL (crash) instead of a graceful stop. */
  kill(): Promise<void>;
  process: ChildProcess;
}

export interface StartOptions {
  /** `plugins.enabled`; default: none (core only). */
  plugins?: string[];
  /** Extra config merged into agent.yaml. */
  config?: Record<string, unknown>;
  env?: Record<string, string>;
  /** Reuse a data folder (restart tests). */
  dataDir?: string;
  /** Keep the work folder after stop. */
  keep?: boolean;
  /** Listen address (default 127.0.0.1:0). */
  listen?: string;
  /**
   * What an answer outside the live description does for this agent (see description.ts); by default
   * `AGENT_TEST_DESCRIPTION`, else `strict`: an undocumented answer fails the call that received it.
   */
  description?: DescriptionMode;
}

export async function request<T = any>(
  baseUrl: string,
  method: string,
  path: string,
  options: RequestOptions & { defaultToken?: string } = {},
): Promise<ApiResponse<T>> {
  const url = new URL(path === '/api' || path.startsWith('/api/') ? path : `/api${path}`, baseUrl);
  for (const [k, v] of Object.entries(options.query ?? {})) if (v !== undefined) url.searchParams.set(k, String(v));
  const headers: Record<string, string> = { ...(options.headers ?? {}) };
  const token = options.token === undefined ? options.defaultToken : options.token;
  if (token) headers.authorization = `Bearer ${token}`;
  let body: string | Buffer | undefined;
  if (options.raw !== undefined) body = options.raw;
  else if (options.body !== undefined) {
    body = JSON.stringify(options.body);
    headers['content-type'] ??= 'application/json';
  }
  const res = await fetch(url, { method, headers, body });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    parsed = text;
  }
  return { status: res.status, body: parsed as T, text, headers: res.headers };
}

/**
 * The admin password a first start generated: the `password` of its one `admin.first_password` record (JSON lines:
 * the agent's stdout is a pipe here), or the banner's when the log was a terminal.
 */
export function firstStartPassword(output: string): string | undefined {
  return /"event":"admin\.first_password"[^\n]*?"password":"([^"]+)"/.exec(output)?.[1] ?? /created user "admin" with password: (\S+)/.exec(output)?.[1];
}

export async function startAgent(options: StartOptions = {}): Promise<TestAgent> {
  const workDir = mkdtempSync(join(tmpdir(), 'agent-test-'));
  const dataDir = options.dataDir ?? join(workDir, 'data');
  const config = {
    listen: options.listen ?? '127.0.0.1:0',
    data_dir: dataDir,
    log: { level: 'info' },
    plugins: { enabled: options.plugins ?? [] },
    ...(options.config ?? {}),
  };
  const configPath = join(workDir, 'agent.yaml');
  writeFileSync(configPath, stringify(config));
  const child = spawn(process.execPath, [...NODE_FLAGS, AGENT_ENTRY, '--config', configPath], {
    cwd: workDir,
    env: { ...AGENT_ENV, ...process.env, AGENT_ADMIN_PASSWORD: ADMIN_PASSWORD, AGENT_VALIDATE_RESPONSES: '1', ...(options.env ?? {}) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const url = await new Promise<string>((resolveUrl, reject) => {
    const timer = setTimeout(() => reject(new Error(`agent did not become ready in 60 s:\n${output}`)), 60_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const m = /"url":"(http:\/\/[^"]+)"[^\n]*"msg":"agent ready"/.exec(output);
      if (m) {
        clearTimeout(timer);
        resolveUrl(m[1]!);
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`agent exited with ${code} before it was ready:\n${output}`));
    });
  });
  const login = async (username: string, password: string) => {
    const res = await request(url, 'POST', '/auth/login', { body: { username, password } });
    if (res.status !== 200) throw new Error(`login of ${username} failed: ${res.status} ${res.text}`);
    return res.body.data.token as string;
  };
  // The bootstrap password is ours, unless the agent generated one (AGENT_ADMIN_PASSWORD empty).
  const generated = firstStartPassword(output);
  const token = await login('admin', generated ?? ADMIN_PASSWORD);
  let exited: Promise<number | null> | null = null;
  const waitExit = () =>
    (exited ??= new Promise((done) => {
      if (child.exitCode !== null || child.signalCode !== null) return done(child.exitCode);
      child.once('exit', (code) => done(code));
    }));
  const cleanup = () => {
    if (!options.keep) rmSync(workDir, { recursive: true, force: true });
  };
  // The live description, read once (with the bootstrap admin's token) at the first call that needs it.
  let description: Promise<DescriptionCheck | null> | null = null;
  const describe = () =>
    (description ??= request(url, 'GET', '/openapi.json', { defaultToken: token }).then((r) =>
      r.status === 200 ? new DescriptionCheck(r.body as Record<string, any>) : null,
    ));
  const agent: TestAgent = {
    url,
    dataDir,
    workDir,
    token,
    process: child,
    output: () => output,
    // The token of the moment: a test that signs the admin out (a demotion, a password change) sets a new one.
    api: async (method, path, opts = {}) => {
      const mode = options.description ?? DESCRIPTION_MODE;
      // Asked for with the first request, not after its answer: a test may stop the agent while a request is in flight.
      const described = mode === 'off' ? null : describe();
      const res = await request(url, method, path, { ...opts, defaultToken: agent.token });
      if (described) {
        // Every answer is held to the live description (see description.ts).
        const check = await described;
        const pathname = (path === '/api' || path.startsWith('/api/') ? path : `/api${path}`).split('?')[0]!;
        const violation = check?.check(method, pathname, res.status, res.headers.get('content-type'), res.text);
        if (violation) reportViolation(violation, mode, isPending(check!.operation(method, pathname)));
      }
      return res;
    },
    login,
    stop: async () => {
      child.kill('SIGTERM');
      const code = await waitExit();
      cleanup();
      return code;
    },
    kill: async () => {
      child.kill('SIGKILL');
      await waitExit();
      cleanup();
    },
  };
  return agent;
}
