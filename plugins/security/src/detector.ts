/**
 * Detects attacks from the traffic records the proxy logged: per source, sliding windows (on the log's own
 * timestamps, so a periodic scan finds what real-time capture would have) of 4xx answers (scans), failed logins
 * on protected routes, all requests (rate), plus single requests for well-known attack paths and hits of blocked
 * addresses. One event per source and type per window, so a burst does not flood the journal.
 */
import type { TrafficRecord } from '@agent/plugin-edge/api';
import type { SecuritySettings } from './config.js';
import type { EventType, SecurityEventInput, Severity } from './events.js';

/** Paths probed by scanners and exploit kits; matched against the lower-cased path. */
const ATTACK_PATHS: RegExp[] = [
  /\/\.env(\b|$)/,
  /\/\.git\//,
  /\/\.aws\//,
  /\/\.ssh\//,
  /\/wp-login\.php/,
  /\/wp-admin/,
  /\/xmlrpc\.php/,
  /\/phpmyadmin/,
  /\/pma\//,
  /\/etc\/passwd/,
  /\.\.(\/|%2f)/,
  /%2e%2e/,
  /\/boaform/,
  /\/hnap1/,
  /\/actuator\/(env|heapdump)/,
  /\/vendor\/phpunit/,
  /\/shell\?/,
  /\/console\/?$/,
  /\/server-status/,
  /\/\.ds_store/,
  /\/config\.php/,
  /\/setup\.php/,
  /<script/,
  /union(\s|%20|\+)+select/,
  /\/solr\/admin/,
  /\/manager\/html/,
];

/** All of them in one expression: one pass over the path per record instead of one per pattern. */
const ANY_ATTACK_PATH = new RegExp(ATTACK_PATHS.map((re) => `(?:${re.source})`).join('|'));

/**
 * `/cgi-bin/….sh|.cgi|.pl`, without the expression it was (`/\/cgi-bin\/.*\.(sh|cgi|pl)/`): from every
 * `/cgi-bin/` of a path its `.*` ran to the end and back, so a path of 900 `/cgi-bin/` took ≈19 ms — a line of the
 * access log anyone on the internet can write, detected inside the ingest's synchronous batch. A script after the
 * first `/cgi-bin/` is the same question, answered in one pass.
 */
const cgiScript = (path: string) => {
  const at = path.indexOf('/cgi-bin/');
  return at !== -1 && /\.(?:sh|cgi|pl)/.test(path.slice(at + '/cgi-bin/'.length));
};

/**
 * Whether a path is a well-known probe. Every expression above runs in time linear in the path (literal
 * alternatives; `(\s|%20|\+)+` has disjoint branches): the paths are the internet's.
 */
export const isAttackPath = (path: string) => {
  const lower = path.toLowerCase();
  return ANY_ATTACK_PATH.test(lower) || cgiScript(lower);
};

interface SourceState {
  errors: number[];
  authFailures: number[];
  requests: number[];
  lastRaised: Partial<Record<EventType, number>>;
  seen: number;
}

const SEVERITY: Record<EventType, Severity> = {
  scan: 'medium',
  auth_failure: 'high',
  attack_path: 'high',
  blocked_ip_hit: 'low',
  rate_limit: 'medium',
};

/** Types whose source is blocked automatically when auto-block is on. */
export const BLOCKABLE: ReadonlySet<EventType> = new Set(['scan', 'auth_failure', 'attack_path', 'rate_limit']);

export class Detector {
  private readonly sources = new Map<string, SourceState>();
  /** Sources tracked before the next prune: doubles past what a prune keeps, so pruning stays linear overall. */
  private pruneAt = 10_000;

  constructor(private readonly settings: () => SecuritySettings) {}

  /** Feeds records in time order; returns the events they raise. */
  observe(records: readonly TrafficRecord[]): SecurityEventInput[] {
    const s = this.settings();
    const window = s.window_seconds * 1000;
    const out: SecurityEventInput[] = [];
    // Appends a time to a source's window and drops the times that left it; returns how many remain.
    const push = (list: number[], time: number) => {
      list.push(time);
      const since = time - window;
      while (list.length && list[0]! < since) list.shift();
      return list.length;
    };
    // One event per source and type per window.
    const raise = (r: TrafficRecord, st: SourceState, type: EventType, details: Record<string, unknown>) => {
      const last = st.lastRaised[type];
      if (last !== undefined && r.time_ms - last < window) return;
      st.lastRaised[type] = r.time_ms;
      out.push({
        time_ms: r.time_ms,
        type,
        severity: SEVERITY[type],
        source_ip: r.source_ip,
        deployment: r.deployment || null,
        host: r.host,
        path: r.path,
        details: { ...details, status: r.status, method: r.method, user_agent: r.user_agent },
        auto_blocked: false,
      });
    };
    for (const r of records) {
      if (!r.source_ip) continue;
      let st = this.sources.get(r.source_ip);
      if (!st) this.sources.set(r.source_ip, (st = { errors: [], authFailures: [], requests: [], lastRaised: {}, seen: 0 }));
      st.seen = r.time_ms;

      if (r.blocked) {
        raise(r, st, 'blocked_ip_hit', { reason: 'request from a blocked address' });
        continue;
      }
      const requests = push(st.requests, r.time_ms);
      if (requests >= s.rate_threshold) raise(r, st, 'rate_limit', { requests, window_seconds: s.window_seconds, threshold: s.rate_threshold });
      if (r.status === 401 && r.protected && r.user) {
        const n = push(st.authFailures, r.time_ms);
        if (n >= s.auth_failure_threshold) raise(r, st, 'auth_failure', { failures: n, window_seconds: s.window_seconds, user: r.user });
      }
      if (r.status >= 400 && r.status < 500 && r.status !== 401 && r.status !== 429) {
        const n = push(st.errors, r.time_ms);
        if (n >= s.scan_threshold) raise(r, st, 'scan', { client_errors: n, window_seconds: s.window_seconds, threshold: s.scan_threshold });
      }
      if (s.attack_paths && isAttackPath(r.path)) raise(r, st, 'attack_path', { reason: 'request for a well-known attack path' });
    }
    this.prune(records.at(-1)?.time_ms ?? Date.now(), window);
    return out;
  }

  /** Forgets sources quiet for longer than a window (bounded memory under many sources). */
  private prune(now: number, window: number): void {
    if (this.sources.size < this.pruneAt) return;
    for (const [ip, st] of this.sources) if (now - st.seen > window) this.sources.delete(ip);
    this.pruneAt = Math.max(10_000, 2 * this.sources.size);
  }
}
