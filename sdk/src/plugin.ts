import type { Static, TObject, TSchema } from '@sinclair/typebox';
import type { EventBus } from './events.js';
import type { ErrorCodes, HttpMiddleware, RouteSpec, SiteSpec, WebSocketSpec } from './http.js';
import type { JobHandle, JobSpec, Scheduler } from './jobs.js';
import type { ServiceRef } from './services.js';
import type { PluginStore, Sealer } from './store.js';
import type { PluginSettings } from './core-services.js';
import type { AuditEventInput } from './audit.js';
import type { Permission } from './principal.js';
import type { DoctorCheck } from './doctor.js';
import type { AppDefinition } from './app-plugins.js';

export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
}

/** A permission resource a plugin introduces, and what the role presets get on it. */
export interface ResourceDeclaration {
  description: string;
  /** Default `write`. */
  operator?: 'none' | 'read' | 'write';
  /** Default `read`. */
  viewer?: 'none' | 'read';
  /**
   * Who owns what this resource covers, for the tenancy model (`GET /api/auth/validate`, README): `deployment`
   * (everything of it hangs on a deployment), `global`, or `both` (say which part is which in the description).
   */
  owner?: 'deployment' | 'global' | 'both';
}

/**
 * What a plugin can deploy: `POST /api/plugins/<name>/deployments {name, config}` validates `config` against
 * `config` and creates a compose deployment from what `render` returns.
 */
export interface DeployableDefinition<T extends TObject = TObject> {
  summary: string;
  config: T;
  render(
    config: Static<T>,
  ):
    | { compose_content: string; env_vars?: { key: string; value: string }[] }
    | Promise<{ compose_content: string; env_vars?: { key: string; value: string }[] }>;
}

export interface AgentInfo {
  version: string;
  /** The agent's data folder (absolute). */
  dataDir: string;
  /** Base URL of the agent's API, e.g. `http://127.0.0.1:8090`. Known once listening. */
  url(): string;
}

export interface PluginContext<C = Record<string, unknown>> {
  readonly name: string;
  /** The plugin's config sections, validated and with defaults applied. */
  readonly config: C;
  readonly log: Logger;
  readonly events: EventBus;
  readonly store: PluginStore;
  readonly scheduler: Scheduler;
  readonly agent: AgentInfo;
  /** The plugin's own data folder, `<data>/plugins/<name>` (created on first use). */
  readonly dataDir: string;
  /** The plugin's package folder (to find bundled files such as templates). */
  readonly packageDir: string;
  /** AES-256-GCM with the agent's data key. */
  readonly sealer: Sealer;
  route<P extends TSchema | undefined = undefined, Q extends TSchema | undefined = undefined, B extends TSchema | undefined = undefined>(
    spec: RouteSpec<P, Q, B>,
  ): void;
  websocket<P extends TSchema | undefined = undefined, Q extends TSchema | undefined = undefined>(spec: WebSocketSpec<P, Q>): void;
  /**
   * Adds koa middleware in front of this plugin's own routes only (after authentication and the body are read,
   * before the checks and the handler): other plugins' routes never see it.
   */
  use(middleware: HttpMiddleware): void;
  /**
   * Serves a static site at `/`: `GET`/`HEAD` of paths outside `/api` answered from `spec.root` with the kernel's
   * security headers (see `SiteSpec`). One plugin of an agent at most (a second is refused at its setup).
   */
  site(spec: SiteSpec): void;
  /** Shorthand for `scheduler.job`. */
  job(spec: JobSpec): JobHandle;
  /**
   * Records an audit event (background work; requests are audited by the core). Resolves once the record is
   * durable; a failure is also logged, so a caller that does not wait loses nothing but the error.
   */
  audit(event: Omit<AuditEventInput, 'actor_type' | 'actor_id'> & Partial<Pick<AuditEventInput, 'actor_type' | 'actor_id'>>): Promise<void>;
  /** Runtime settings of this plugin, editable through `PUT /api/settings`. */
  settings<T extends TObject>(
    schema: T,
    options?: {
      restart?: (keyof Static<T> & string)[];
      secret?: (keyof Static<T> & string)[];
      /** Keys that need a permission beyond `settings:write` to change. */
      permissions?: Partial<Record<keyof Static<T> & string, Permission>>;
    },
  ): PluginSettings<T>;
  /** Called in reverse order at shutdown, after `stop`. */
  onClose(fn: () => void | Promise<void>): void;
  /**
   * Adds a check of an external part this plugin uses (a program, a daemon, a remote API) to `agentctl doctor`:
   * what works, what does not, and the command that fixes it. Runs only when asked, never at start.
   */
  doctor(check: DoctorCheck): void;
}

/** What `deps` of a plugin may hold: a service it needs, or one it uses when present (`optional(ref)`). */
export type Dependency = ServiceRef<unknown> | OptionalDependency<unknown>;

export interface OptionalDependency<T> {
  readonly optional: true;
  readonly ref: ServiceRef<T>;
}

/** Marks a dependency as optional: the plugin gets `undefined` while no enabled plugin provides it. */
export const optional = <T>(ref: ServiceRef<T>): OptionalDependency<T> => Object.freeze({ optional: true as const, ref });

/** The services a plugin receives for its `deps`: required ones resolved, optional ones looked up when read. */
export type ResolvedDeps<D extends Record<string, Dependency>> = {
  readonly [K in keyof D]: D[K] extends OptionalDependency<infer T> ? T | undefined : D[K] extends ServiceRef<infer T> ? T : never;
};

/** The implementations a plugin returns for the services it `provides`. */
export type ProvidedServices<P extends Record<string, ServiceRef<unknown>>> = {
  [K in keyof P]: P[K] extends ServiceRef<infer T> ? T : never;
};

/**
 * A plugin, once set up: the services it provides and its lifecycle. Setup (provision) registers routes and jobs
 * and must not do slow I/O; `start` opens connections and begins background work (a plugin whose start throws is
 * reported and disabled); `stop` ends them, in reverse dependency order. State lives here (in setup's closure),
 * never in module variables: a plugin can be loaded by two agents of one process.
 */
export interface PluginInstance<P extends Record<string, ServiceRef<unknown>> = Record<string, never>> {
  provides?: ProvidedServices<P>;
  start?(): void | Promise<void>;
  stop?(): void | Promise<void>;
}

export interface PluginDefinition<
  C extends TObject | undefined = undefined,
  D extends Record<string, Dependency> = Record<string, never>,
  P extends Record<string, ServiceRef<unknown>> = Record<string, never>,
> {
  /** `[a-z][a-z0-9-]*`; also the default OpenAPI tag and the app proxy segment. */
  name: string;
  version: string;
  description?: string;
  /**
   * Config sections the plugin owns: each top-level property is a top-level key of `agent.yaml`
   * (e.g. `{ proxy: {...}, certificates: {...} }`). Validated at start; defaults applied.
   */
  config?: C;
  /** Permission resources introduced by this plugin. */
  resources?: Record<string, ResourceDeclaration>;
  /**
   * The services it uses, by the name it gets them under: `{ docker: dockerService, notify: optional(notifyService) }`.
   * It is set up after their providers; a required one missing disables it with a clear error naming the service.
   */
  deps?: D;
  /** The services it provides, by the key its instance's `provides` returns them under. */
  provides?: P;
  /** Registers routes, jobs and settings, and builds the plugin's instance from its dependencies. */
  setup(
    ctx: PluginContext<C extends TObject ? Static<C> : Record<string, never>>,
    deps: ResolvedDeps<D>,
  ): PluginInstance<P> | void | Promise<PluginInstance<P> | void>;
  /** Makes this plugin an app: a separate process the `apps` plugin runs and the core proxies to. */
  app?: AppDefinition;
  /** Lets operators create deployments from this plugin. */
  deployable?: DeployableDefinition<any>;
  /** Answers every route of the plugin may give (see `RouteSpec.errors`), e.g. `{ 503: ['DOCKER_UNAVAILABLE'] }`. */
  errors?: ErrorCodes;
}

/**
 * A plugin definition whatever its config, `deps` and services: what the kernel and the test harness hold (any
 * `definePlugin(...)` result is one).
 */
export type AnyPluginDefinition = PluginDefinition<TObject | undefined, Record<string, Dependency>, Record<string, ServiceRef<unknown>>>;

/** Declares a plugin. The identity function exists for type inference. */
export function definePlugin<
  C extends TObject | undefined = undefined,
  D extends Record<string, Dependency> = Record<string, never>,
  P extends Record<string, ServiceRef<unknown>> = Record<string, never>,
>(definition: PluginDefinition<C, D, P>): PluginDefinition<C, D, P> {
  if (!/^[a-z][a-z0-9-]*$/.test(definition.name)) throw new Error(`invalid plugin name '${definition.name}'`);
  return definition;
}
