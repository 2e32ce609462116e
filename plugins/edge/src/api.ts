/**
 * What the edge plugin offers the others: its events (certificates), and the two contracts through which a plugin
 * works with the proxy without knowing how the edge does it:
 * - `proxyExtensions`: a plugin contributes nginx snippets (inside `http {}`, at the top of each server, in
 *   locations of a deployment's sites, and files of its own folder); the edge renders them with the sites, tests
 *   the whole configuration, reloads nginx and lets the contributor save its state, in one transaction;
 * - `trafficStream`: the access-log records the edge parses, handed to observers as they are ingested.
 * The security plugin is built on both (rules enforced in nginx, events detected from the traffic).
 */
import { createServiceRef, type ErrorCodes } from '@agent/sdk';

/**
 * What a change of the proxy answers when nginx refuses it (`ProxyContribution.mutate` and the edge's own changes):
 * for the `errors` of the routes that make one.
 */
export const PROXY_APPLY_ERRORS = {
  400: ['PROXY_CONFIG_INVALID'],
  502: ['PROXY_RELOAD_FAILED'],
  503: ['NGINX_UNAVAILABLE'],
} as const satisfies ErrorCodes;

declare module '@agent/sdk' {
  interface AgentEvents {
    'certificate.issued': { domain: string };
    'certificate.renewal_failed': { domain: string; error: string };
    'certificate.expiring': { domain: string; days_left: number };
  }
}

// --- proxy extensions ----------------------------------------------------------------------------------------

/** Directives for a path prefix of a deployment's sites; the edge makes the location inside the route serving it. */
export interface ProxyLocation {
  /** A path prefix (`/admin`), validated by the contributor: it is written into a `location` as is. */
  path: string;
  /** Directives, one per line, relative to the location block (nested blocks carry their own indentation). */
  directives: string[];
}

/**
 * What a contributor adds to the proxy configuration. Every value ends up in nginx's files as written: the
 * contributor validates what it takes from requests. The variables every agent server sets, for snippets to use:
 * `$agent_deployment` (the site's deployment, '' on the default server); `$agent_block_hit` and
 * `$agent_protected` (0; set them to 1 for a request a rule denied, or a location behind authentication: the access
 * log and the traffic records carry them as `blocked` and `protected`).
 */
export interface ProxySnippets {
  /** Directives inside `http {}`, before the sites (`geo`, `map`, `limit_req_zone`): `<folder>/http.conf`. */
  http?: string;
  /** Other files of the contributor's folder (path relative to it → content); `secret` files are readable by nginx's workers only (0640 with group `proxy.worker_group` for the host's nginx, 0600 for the agent's own). */
  files?: Record<string, { content: string; secret?: boolean }>;
  /** Directives at the top of every server of a deployment's sites (`''`: the default server of unknown hosts). */
  server?(deployment: string): string[];
  /** Locations of a deployment's sites. */
  locations?(deployment: string): ProxyLocation[];
}

export interface ProxyContributor<S> {
  /** Its folder below the agent's nginx folder (`proxy.config_dir`, or the own instance's; also its name in logs): lower case letters, digits and `-`. */
  name: string;
  /** Its current state (read at every render of the configuration, its own changes or any other). */
  state(): S;
  /** Its snippets for a state: pure, no I/O (`dir`: the absolute path of its folder). */
  snippets(state: S, dir: string): ProxySnippets;
  /** Saves a state nginx accepted; runs inside the transaction, after the reload. */
  save(state: S): Promise<void>;
  /**
   * Drops what it holds for a deleted deployment from a draft; true when something changed. Runs in the same
   * transaction as the removal of the deployment's sites (one reload), before the traffic records are retired.
   */
  forget?(draft: S, deployment: string): boolean;
}

/** What nginx was given. */
export interface ProxyApplyResult {
  changed: string[];
  removed: string[];
  reloaded: boolean;
}

/** A contributor's handle on the proxy configuration. */
export interface ProxyContribution<S> {
  /** Absolute path of its folder. */
  readonly dir: string;
  /**
   * Runs `change` on a copy of its state, renders the whole configuration with it, tests it (`nginx -t`), reloads
   * nginx, waits until the new workers answer, then saves the copy (`save`). A test or reload that fails restores
   * the previous files and rejects (400 PROXY_CONFIG_INVALID, 502 PROXY_RELOAD_FAILED, 503 NGINX_UNAVAILABLE) with
   * nothing saved. Serialised with every other change of the proxy. `force`: reload even when no file changed.
   */
  mutate<T>(change: (draft: S) => T | Promise<T>, options?: { force?: boolean }): Promise<{ result: T; applied: ProxyApplyResult }>;
  /** What `change` would do to the files (unified diff), without doing it. */
  preview(change: (draft: S) => unknown): Promise<{ diff: string; changed: string[]; removed: string[] }>;
}

/**
 * What the security plugin's data looked like when the edge kept it (before the security plugin existed): handed
 * over once, then released. Legacy only: nothing else uses these shapes.
 */
export interface LegacySecurityData {
  state: {
    next_id: number;
    blocked: unknown[];
    whitelist: unknown[];
    protected: unknown[];
    deployment_security: Record<string, unknown>;
  };
  /** The runtime settings stored under `edge` (thresholds, auto-block, capture, retention). */
  settings: Record<string, unknown>;
  /** Security events with ids above `afterId`, in id order (rows of the old `security_events` table). */
  events(afterId: number, limit: number): Record<string, unknown>[];
  /** The edge forgets them: the state fields and the events table go (the settings at its next start). */
  release(): Promise<void>;
}

export interface ProxyExtensions {
  /** Registers a contributor (in `setup`: the edge renders the contributions of every plugin from its start on). */
  contribute<S>(contributor: ProxyContributor<S>): ProxyContribution<S>;
  /** The security data of an older edge, while it still holds some (null after `release`). */
  legacySecurity(): LegacySecurityData | null;
}

export const proxyExtensions = createServiceRef<ProxyExtensions>('proxy-extensions', 'nginx snippets plugins contribute to the proxy configuration');

// --- traffic stream ------------------------------------------------------------------------------------------

/** One request nginx served through an agent server, as the access log says. */
export interface TrafficRecord {
  time_ms: number;
  /** The deployment whose site served it; '' for unknown hosts (the default server). */
  deployment: string;
  host: string;
  method: string;
  path: string;
  status: number;
  bytes: number;
  duration_ms: number;
  source_ip: string;
  user_agent: string;
  /** Denied by a rule (`$agent_block_hit`). */
  blocked: boolean;
  /** Served by a location behind authentication (`$agent_protected`). */
  protected: boolean;
  /** The basic-auth user name sent, if any. */
  user: string;
}

/** Records of one read of the access log, in log order. */
export interface TrafficBatch {
  /** The stream: a new traffic journal starts a new one, whose numbers start again. */
  stream: string;
  /** Number of the first record; the others follow. Increasing over a stream, and the same when lines are read again. */
  seq: number;
  records: readonly TrafficRecord[];
}

export interface TrafficObserver {
  /**
   * Records as they are ingested, inside the read's transaction: synchronous and quick (it holds the ingest). After
   * a crash the edge reads again the lines whose rows it had not committed, with the same numbers: an observer that
   * keeps its position (`stream`, `seq`) with what it derived knows what it already saw.
   */
  observe(batch: TrafficBatch): void;
  /** Every record of the read was observed and the edge commits its rows next: commit what was derived now. */
  commit?(): void;
  /** After each read: whether the edge's rows were committed. */
  end?(committed: boolean): void;
  /**
   * A deleted deployment's records up to `untilMs` (every one of them observed by now) are kept under `retiredAs`,
   * which only global principals reach.
   */
  retire?(deployment: string, retiredAs: string, untilMs: number): void | Promise<void>;
}

export interface TrafficStream {
  /** Observers see every record read from now on; returns the unsubscribe function. */
  subscribe(observer: TrafficObserver): () => void;
  /** Reads what nginx logged since the last read now (the observers see it); resolves with how many records. */
  readNew(): Promise<number>;
  /** How the access log is read: followed continuously (real time, the default) or by the periodic `traffic-scan` job. */
  capture: {
    realtime(): boolean;
    setRealtime(enabled: boolean): void;
    /** The access log's path. */
    source: string;
  };
}

export const trafficStream = createServiceRef<TrafficStream>('traffic-stream', 'records of the requests the proxy served, as they are read');
