/**
 * `@agent/sdk/testing`: a plugin's tests in-process. `startTestPlugin(plugin, options)` starts the agent's kernel
 * in the test's own process, on a temporary data folder and a loopback port, with the plugin under test, fakes of
 * the services it depends on and any other plugins; requests then meet everything a real agent does (routing,
 * authentication, validation, permission and tenancy checks, plans, audit). No root, no Docker, no nginx.
 *
 * The SDK declares the harness; `@agent/testing` (`testing/src/index.ts`, on the kernel) implements it and is
 * loaded here at the first call. The kernel depends on the SDK, so the SDK cannot depend on it (a cycle of project
 * references, and every plugin would carry the kernel): the harness's module is named in a variable, which neither
 * tsc nor esbuild follows, and only the types below are shared. A plugin outside this repository installs
 * `@agent/testing` as a devDependency to use it.
 */
import type { TObject } from '@sinclair/typebox';
import type { EventBus } from './events.js';
import type { AnyPluginDefinition, Dependency, OptionalDependency, PluginDefinition } from './plugin.js';
import type { AccessLevel, Role, Scope } from './principal.js';
import type { ServiceRef } from './services.js';

/** Fakes of a plugin's dependencies, by the key it declares them under in `deps` (a partial fake: cast it). */
export type FakeDeps<D extends Record<string, Dependency>> = {
  [K in keyof D]?: D[K] extends OptionalDependency<infer T> ? T : D[K] extends ServiceRef<infer T> ? T : never;
};

/** A user of the test agent, made (in the access plugin, as the API makes one) at its first use. */
export interface TestUser {
  /** Its username: one user per name in a test agent. */
  user: string;
  /** Default `operator`. */
  role?: Role;
  /** `global`, or `deployments` (the default for every role but admin): then it reaches only its grants. */
  scope?: Scope;
  /** Permissions beyond its role's, e.g. `settings:write`. */
  permissions?: string[];
  /** Its grants: deployment name → level. */
  deployments?: Record<string, AccessLevel>;
}

/** An API key of the test agent, made at its first use. A key never exceeds its owner. */
export interface TestKey {
  /** Its name: one key per name in a test agent. */
  key: string;
  /** Default: the first admin. */
  owner?: 'admin' | TestUser;
  /** Default: its owner's role. */
  role?: Role;
  permissions?: string[];
  /** Limits the key to these deployments, at its owner's level on each (a key limited so is at most an operator). */
  deployments?: string[];
}

/** Who a request is made as: the agent's first admin, nobody, a user or an API key. */
export type TestPrincipal = 'admin' | 'anonymous' | TestUser | TestKey;

export interface TestPluginOptions<D extends Record<string, Dependency> = Record<string, Dependency>> {
  /**
   * Fakes of the plugin's dependencies, by their key in its `deps`: provided under the refs it declares, by a plugin
   * of their own (`test-fakes`), so the kernel orders and hands them over as it does any provider's. A required
   * dependency neither faked nor provided by one of `plugins` fails the start with the kernel's reason.
   */
  deps?: FakeDeps<D>;
  /**
   * `agent.yaml` as an object: plugins' sections (`{ hello: { greeting: 'Hi' } }`) and core keys
   * (`{ plans: { ttl: '1h' } }`). The harness sets `listen`, `data_dir`, `admin_password` and `plugins.enabled`.
   */
  config?: Record<string, unknown>;
  /**
   * Other plugins: definitions (a fixture, a provider of fakes for another plugin) or what `plugins.enabled` takes
   * (a built-in's name, a path). `access`, the principal directory and audit journal, is always loaded.
   */
  plugins?: (AnyPluginDefinition | string)[];
  /** Who `request` and `websocket` act as unless told otherwise. Default `admin`. */
  principal?: TestPrincipal;
  /** The plugin's package folder (`ctx.packageDir`, for files it ships). Default: the working folder. */
  packageDir?: string;
  /** The agent's log level (JSON lines on stdout). Default `warn`. */
  log?: 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'silent';
}

export interface TestRequestOptions {
  /** Sent as JSON. */
  body?: unknown;
  /** Sent as it is (give its `content-type` in `headers`), instead of `body`. */
  raw?: string | Uint8Array | FormData;
  query?: Record<string, string | number | boolean | undefined>;
  headers?: Record<string, string>;
  /** Default: the harness's `principal`. */
  principal?: TestPrincipal;
  /** A bearer credential as it is, instead of `principal`; `null` sends none. */
  token?: string | null;
}

export interface TestResponse<T = any> {
  status: number;
  /** The answer parsed as JSON (`{data}` or `{error, code}`), or its text when it is not JSON. */
  body: T;
  text: string;
  headers: Headers;
}

/** A websocket of the test agent, whose first message (the credential) was sent. */
export interface TestSocket {
  /** Every message received so far, parsed as JSON when it is (`{type: 'ready'}` first, once admitted). */
  readonly messages: unknown[];
  /** The next message not yet taken by `next`; rejects when the socket closes first or after `timeoutMs` (5 s). */
  next(timeoutMs?: number): Promise<unknown>;
  /** Sends text as it is, anything else as JSON. */
  send(message: unknown): void;
  close(): void;
  /** The close code and reason (4401/4403 when the kernel ends it, 1008 when it refuses the credential). */
  readonly closed: Promise<{ code: number; reason: string }>;
}

export interface TestPlugin {
  /** Base URL of the agent (`http://127.0.0.1:<port>`), for clients of your own. */
  readonly url: string;
  /** Its temporary data folder (removed by `close`). */
  readonly dataDir: string;
  /** A request under `/api` (`/hello/greetings` or `/api/hello/greetings`) as `principal`. */
  request<T = any>(method: string, path: string, options?: TestRequestOptions): Promise<TestResponse<T>>;
  /** Opens a websocket endpoint and sends the credential of `principal` (or `token`) as its first message. */
  websocket(path: string, options?: Pick<TestRequestOptions, 'query' | 'principal' | 'token'>): Promise<TestSocket>;
  /** Makes the principal (once per name) and gives its id (`user:3`, `api_key:2`) and bearer credential. */
  principal(who: Exclude<TestPrincipal, 'anonymous'>): Promise<{ id: string; token: string }>;
  /** The services the kernel and the plugins provide, by ref. */
  readonly services: { get<T>(ref: ServiceRef<T>): T | undefined };
  /** The agent's event bus: emit what another plugin would, watch what the plugin emits. */
  readonly events: EventBus;
  /** Stops the agent (its plugins' `stop`, in order) and removes its data folder. */
  close(): Promise<void>;
}

export type StartTestPlugin = <C extends TObject | undefined, D extends Record<string, Dependency>, P extends Record<string, ServiceRef<unknown>>>(
  plugin: PluginDefinition<C, D, P>,
  options?: TestPluginOptions<D>,
) => Promise<TestPlugin>;

// A variable, not a literal: neither tsc nor esbuild resolves it, so the SDK never depends on the kernel.
const HARNESS = '@agent/testing';

/** Starts `plugin` in an agent of this process; `close()` it after the tests. */
export const startTestPlugin: StartTestPlugin = async (plugin, options) => {
  let harness: { startTestPlugin: StartTestPlugin };
  try {
    harness = (await import(HARNESS)) as typeof harness;
  } catch (err) {
    // Not installed; a harness that is there but fails to load says why itself.
    const { code, message } = err as { code?: string; message?: string };
    if (code === 'ERR_MODULE_NOT_FOUND' && String(message).includes("'@agent/testing'")) {
      throw new Error(`@agent/sdk/testing runs the agent's kernel in this process: install @agent/testing (a devDependency of the plugin)`, { cause: err });
    }
    throw err;
  }
  return harness.startTestPlugin(plugin, options);
};
