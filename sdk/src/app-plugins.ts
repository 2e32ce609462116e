/**
 * App plugins: a plugin whose definition has `app` runs as a separate process behind `/api/plugin/<name>/…`. The
 * kernel proxies to that process and shows it in the plugin list, but it does not run it: a plugin (the built-in
 * `apps`, always loaded) does, and provides the app directory the kernel reads. Without one, every app reads as not
 * running.
 */
import type { TSchema } from '@sinclair/typebox';
import { createServiceRef } from './services.js';
import type { ErrorCodes, HttpMethod, Tenancy } from './http.js';
import type { Permission } from './principal.js';

/** A route of an app plugin, served by its own process behind `/api/plugin/<name>/`. */
export interface AppRouteSpec {
  method: HttpMethod;
  /** Path inside the app, e.g. `/metrics/latest`. */
  path: string;
  summary: string;
  description?: string;
  operationId?: string;
  permission: Permission | 'authenticated';
  /** See `Tenancy`: apps receive the principal (with its scope and deployments) and filter themselves. */
  tenancy?: Tenancy;
  params?: TSchema;
  query?: TSchema;
  body?: TSchema;
  response?: TSchema;
  status?: number;
  produces?: string;
  /**
   * The answers the app gives besides its success and what the proxy answers itself (400 validation, 401, 403, 404
   * for a deployment the principal may not see, 500, 502 when the app is not running): as `RouteSpec.errors`.
   */
  errors?: ErrorCodes;
}

export interface AppDefinition {
  /** Script run with Node, relative to the plugin's package folder (e.g. `dist/app.js`). */
  entry: string;
  /** Every route the app serves; anything else is refused by the proxy (deny by default). */
  routes: AppRouteSpec[];
  /** Extra environment for the process. */
  env?: Record<string, string>;
}

/** A running plugin that is an app, with what it takes to run its process (`coreServices.plugins`). */
export interface AppPlugin {
  plugin: string;
  /** Its package folder: the app's working folder, where `app.entry` is found. */
  packageDir: string;
  app: AppDefinition;
  /** Its config sections, validated and with defaults applied. */
  config: Record<string, unknown>;
}

/** One app's process, as its runner last saw it. */
export interface AppState {
  name: string;
  status: 'starting' | 'running' | 'crashed' | 'stopped';
  pid: number | null;
  /** The loopback port it listens on. */
  port: number | null;
  restarts: number;
  last_exit: { code: number | null; signal: string | null; at: string } | null;
  /** This run's key of the principal header the proxy signs; never shown. */
  secret: string;
}

/** What the kernel asks about app processes: at most one plugin provides it. */
export interface AppDirectory {
  /** The state of a plugin's app, or undefined when none was started for it. */
  state(plugin: string): AppState | undefined;
}

export const appDirectory = createServiceRef<AppDirectory>('agent.apps', "the state of the app plugins' processes (for the plugin proxy and list)");
