import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import type { Logger, PluginSettings, SqlDatabase } from '@agent/sdk';
import type { TrafficRecord } from '@agent/plugin-edge/api';
import { Detector, isAttackPath } from '../src/detector.js';
import { Detection } from '../src/detection.js';
import { SecurityEvents } from '../src/events.js';
import { snippets } from '../src/render.js';
import { checkCidr, checkIp, checkText, checkUrlPath, cidrContains } from '../src/validate.js';
import { emptyState, type SecurityState } from '../src/state.js';
import { Rules } from '../src/rules.js';
import type { SecuritySettings } from '../src/config.js';

const settings = {
  realtime_capture: true,
  auto_block: false,
  auto_block_duration: 3600,
  window_seconds: 60,
  scan_threshold: 5,
  auth_failure_threshold: 3,
  rate_threshold: 50,
  attack_paths: true,
  event_retention_days: 30,
};
const rec = (over: Partial<TrafficRecord>): TrafficRecord => ({
  time_ms: 1_700_000_000_000,
  deployment: 'app',
  host: 'a.test',
  method: 'GET',
  path: '/',
  status: 200,
  bytes: 1,
  duration_ms: 1,
  source_ip: '10.0.0.1',
  user_agent: 'ua',
  blocked: false,
  protected: false,
  user: '',
  ...over,
});

describe('security units', () => {
  it('validates addresses, ranges, paths and text strictly (what it writes into nginx)', () => {
    expect(checkIp('::1', 'ip')).toBe('::1');
    expect(() => checkIp('1.2.3.256', 'ip')).toThrow();
    expect(checkCidr('10.0.0.0/8', 'c')).toBe('10.0.0.0/8');
    for (const bad of ['10.0.0.0/33', '10.0.0.0', 'x/8', '::/129']) expect(() => checkCidr(bad, 'c')).toThrow();
    expect(checkUrlPath('/api/', 'p')).toBe('/api');
    for (const bad of ['api', '/a/../b', '/a//b', '/a b', '/a;b', '/a{b', '/a"b', "/a'b", '/a$b', '/a\nb']) expect(() => checkUrlPath(bad, 'p')).toThrow();
    expect(() => checkText('line\nbreak', 'reason')).toThrow();
  });

  it('matches addresses against ranges', () => {
    expect(cidrContains('127.0.0.0/29', '127.0.0.5')).toBe(true);
    expect(cidrContains('127.0.0.0/29', '127.0.0.9')).toBe(false);
    expect(cidrContains('10.0.0.0/8', '10.255.1.1')).toBe(true);
    expect(cidrContains('2001:db8::/32', '2001:db8:1::5')).toBe(true);
    expect(cidrContains('2001:db8::/32', '2001:db9::5')).toBe(false);
    expect(cidrContains('10.0.0.0/8', '::1')).toBe(false);
  });

  it('matches addresses, not texts (net.BlockList): mapped IPv4, host bits, other spellings of one address', () => {
    // What the hand-written byte comparison did not see: a dual-stack socket reports IPv4 clients as ::ffff:a.b.c.d.
    expect(cidrContains('10.0.0.0/8', '::ffff:10.1.2.3')).toBe(true);
    expect(cidrContains('::ffff:10.0.0.0/104', '10.1.2.3')).toBe(true);
    expect(cidrContains('10.0.0.0/8', '::ffff:11.1.2.3')).toBe(false);
    // A range written with host bits set is the network it names (checkCidr accepts it).
    expect(cidrContains('10.1.2.3/8', '10.200.0.1')).toBe(true);
    expect(cidrContains('0.0.0.0/0', '203.0.113.9')).toBe(true);
    expect(cidrContains('2001:DB8::/32', '2001:0db8:0000::1')).toBe(true);
    expect(cidrContains('10.0.0.0/8', 'not-an-ip')).toBe(false);

    let state = { ...emptyState() };
    const entry = (id: number, type: 'ip' | 'cidr' | 'path', value: string) => ({ id, type, value, description: '', created_at: '' });
    state.whitelist = [entry(1, 'ip', '2001:db8::1'), entry(2, 'cidr', '192.168.0.0/16'), entry(3, 'path', '/health')];
    const rules = new Rules(() => state, null as never, null as never, null as never);
    expect(rules.whitelisted('2001:db8:0:0:0:0:0:1')).toBe(true);
    expect(rules.whitelisted('192.168.7.7')).toBe(true);
    expect(rules.whitelisted('::ffff:192.168.7.7')).toBe(true);
    expect(rules.whitelisted('192.169.0.1')).toBe(false);
    // A saved change replaces the list: the next check reads the new one.
    state = { ...state, whitelist: [entry(4, 'ip', '192.169.0.1')] };
    expect(rules.whitelisted('192.168.7.7')).toBe(false);
    expect(rules.whitelisted('192.169.0.1')).toBe(true);
  });

  it('recognises attack paths as the expression with /cgi-bin/.* did, in one pass however many /cgi-bin/ a path has', () => {
    const before = /\/cgi-bin\/.*\.(sh|cgi|pl)/;
    for (const path of [
      '/cgi-bin/test.sh',
      '/CGI-BIN/a/b.PL',
      '/cgi-bin/x.cgi?y',
      '/x/cgi-bin/a.sh',
      '/cgi-bin/',
      '/cgi-bin.sh',
      '/a.sh/cgi-bin/x',
      '/cgi-bin/.s',
    ]) {
      expect(isAttackPath(path), path).toBe(before.test(path.toLowerCase()));
    }
    // 900 × `/cgi-bin/` (8 kB, what nginx lets through): ≈19 ms a line with the expression; 200 lines now.
    const crafted = '/cgi-bin/'.repeat(900);
    const started = performance.now();
    for (let i = 0; i < 200; i++) expect(isAttackPath(crafted)).toBe(false);
    expect(performance.now() - started).toBeLessThan(400);
  });

  it('detects scans, auth failures, attack paths, rates and blocked hits once per window', () => {
    const d = new Detector(() => settings);
    const scan = Array.from({ length: 12 }, (_, i) => rec({ status: 404, path: `/m${i}`, time_ms: 1_700_000_000_000 + i }));
    const events = d.observe(scan);
    expect(events.map((e) => e.type)).toEqual(['scan']);
    const auth = Array.from({ length: 4 }, (_, i) =>
      rec({ source_ip: '10.0.0.2', status: 401, protected: true, user: 'admin', time_ms: 1_700_000_000_100 + i }),
    );
    expect(d.observe(auth).map((e) => e.type)).toEqual(['auth_failure']);
    expect(d.observe([rec({ source_ip: '10.0.0.3', path: '/wp-login.php' })]).map((e) => e.type)).toEqual(['attack_path']);
    expect(d.observe([rec({ source_ip: '10.0.0.4', blocked: true, status: 403 })]).map((e) => e.type)).toEqual(['blocked_ip_hit']);
    const burst = Array.from({ length: 60 }, (_, i) => rec({ source_ip: '10.0.0.5', time_ms: 1_700_000_000_000 + i }));
    expect(d.observe(burst).map((e) => e.type)).toEqual(['rate_limit']);
    // A new window raises again.
    expect(d.observe(Array.from({ length: 6 }, (_, i) => rec({ status: 404, time_ms: 1_700_000_100_000 + i }))).map((e) => e.type)).toEqual(['scan']);
    expect(isAttackPath('/index.html')).toBe(false);
    expect(isAttackPath('/.git/config')).toBe(true);
  });

  it('renders its rules as snippets: http maps, server denies, locations, password files', () => {
    const state: SecurityState = {
      ...emptyState(),
      blocked: [
        { ip: '1.2.3.4', reason: 'x', deployment: null, auto: false, created_at: '', expires_at: null },
        { ip: '9.9.9.9', reason: 'gone', deployment: null, auto: true, created_at: '', expires_at: '2000-01-01T00:00:00.000Z' },
      ],
      whitelist: [
        { id: 1, type: 'cidr', value: '10.0.0.0/8', description: '', created_at: '' },
        { id: 2, type: 'path', value: '/health', description: '', created_at: '' },
      ],
      protected: [
        {
          id: 7,
          path: '/admin',
          method: 'POST',
          auth_type: 'basic',
          username: 'u',
          password_hash: '$2a$09$hash',
          deployment: 'app',
          enabled: true,
          created_at: '',
          updated_at: '',
        },
      ],
      deployment_security: {
        app: {
          enabled: true,
          blocked_ips: ['5.6.7.8'],
          protected_paths: [{ pattern: '/closed', enabled: true }],
          rate_limits: [{ path: '/api/v1', rate: 5, burst: 0, enabled: true }],
        },
      },
    };
    const s = snippets(state, '/etc/nginx/agent/security');
    expect(s.http).toContain('1.2.3.4 1;');
    expect(s.http).not.toContain('9.9.9.9'); // expired
    expect(s.http).toContain('10.0.0.0/8 1;');
    expect(s.http).toContain('"~^/health" 1;');
    expect(s.http).toContain('POST "Restricted";');
    expect(s.http).toMatch(/limit_req_zone \$binary_remote_addr zone=agent_rl_[0-9a-f]{10}_0:1m rate=5r\/s;/);
    expect(s.files).toEqual({ 'htpasswd/route-7': { content: 'u:$2a$09$hash\n', secret: true } });
    expect(s.server!('app').join('\n')).toMatch(
      /^set \$agent_block_hit \$agent_deny;\nif \(\$agent_ddeny_[0-9a-f]{10}\) \{\n {4}set \$agent_block_hit 1;\n\}\nif \(\$agent_block_hit\) \{\n {4}return 403;\n\}$/,
    );
    expect(s.server!('')).toEqual(['set $agent_block_hit $agent_deny;', 'if ($agent_block_hit) {', '    return 403;', '}']);
    const locations = s.locations!('app');
    expect(locations.map((l) => l.path)).toEqual(['/closed', '/api/v1', '/admin']);
    expect(locations[0]!.directives).toEqual(['if ($agent_allowed_ip = 0) {', '    return 403;', '}']);
    expect(locations[1]!.directives[0]).toMatch(/^limit_req zone=agent_rl_[0-9a-f]{10}_0 nodelay;$/);
    expect(locations[2]!.directives).toEqual([
      'set $agent_protected 1;',
      'auth_basic $agent_auth_7;',
      'auth_basic_user_file "/etc/nginx/agent/security/htpasswd/route-7";',
    ]);
    expect(s.locations!('other')).toEqual([]);
  });

  it('commits the events of a read with its stream position: a read repeated after a crash adds none twice', () => {
    const db = new Database(':memory:') as unknown as SqlDatabase;
    const events = new SecurityEvents(db);
    const log = { error: () => undefined, warn: () => undefined, info: () => undefined, debug: () => undefined } as unknown as Logger;
    const s = { get: () => settings } as unknown as PluginSettings<typeof SecuritySettings>;
    const rules = { activeBlock: () => undefined, whitelisted: () => false } as unknown as Rules;
    const scan = (ip: string, from: number) => Array.from({ length: 6 }, (_, i) => rec({ source_ip: ip, status: 404, path: `/m${i}`, time_ms: from + i }));

    // A read of two groups: the events commit with the position of its last record.
    const first = new Detection(events, rules, s, log);
    first.observe({ stream: 'st', seq: 1, records: scan('10.0.0.1', 1_700_000_000_000) });
    first.observe({ stream: 'st', seq: 7, records: scan('10.0.0.2', 1_700_000_000_000) });
    first.commit();
    first.end();
    expect(events.position()).toEqual({ stream: 'st', seq: 12 });
    expect(events.list({}, 10, 0).total).toBe(2);

    // A read whose rows the edge did not commit (it failed before): nothing of it is kept.
    first.observe({ stream: 'st', seq: 13, records: scan('10.0.0.3', 1_700_000_000_000) });
    first.end();
    expect(events.list({}, 10, 0).total).toBe(2);
    expect(events.position()).toEqual({ stream: 'st', seq: 12 });

    // After a crash (a new detector, fresh windows), the edge reads the same lines again under the same numbers:
    // those up to the position are skipped, the rest counted.
    const again = new Detection(events, rules, s, log);
    again.observe({ stream: 'st', seq: 7, records: [...scan('10.0.0.2', 1_700_000_000_000), ...scan('10.0.0.4', 1_700_000_000_000)] });
    again.commit();
    expect(
      events
        .list({}, 10, 0)
        .items.map((e) => e.source_ip)
        .sort(),
    ).toEqual(['10.0.0.1', '10.0.0.2', '10.0.0.4']);
    expect(events.position()).toEqual({ stream: 'st', seq: 18 });

    // A new stream (the edge's journal started over) numbers from 1 again: nothing is skipped.
    again.observe({ stream: 'new', seq: 1, records: scan('10.0.0.5', 1_700_000_100_000) });
    again.commit();
    expect(events.list({ source_ip: '10.0.0.5' }, 10, 0).total).toBe(1);
  });
});
