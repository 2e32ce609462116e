import { describe, expect, it } from 'vitest';
import { checkCidr, checkHostname, checkIp, checkUrlPath, cidrContains } from '../src/validate.js';
import type { TrafficRecord } from '../src/traffic/journal.js';
import { invalidPathPattern, pathMatcher } from '../src/traffic/pattern.js';
import { parseLine } from '../src/traffic/parse.js';
import { Detector, isAttackPath } from '../src/security/detector.js';
import { renderAll, type RenderInput } from '../src/nginx/render.js';

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

describe('edge units', () => {
  it('validates names, addresses and paths strictly', () => {
    expect(checkHostname('a.example.com', 'd')).toBe('a.example.com');
    for (const bad of ['A.example.com', 'a..b', 'x', 'a.b;', 'a b.c', '-a.b', 'a.b\n']) expect(() => checkHostname(bad, 'd')).toThrow();
    expect(checkIp('::1', 'ip')).toBe('::1');
    expect(() => checkIp('1.2.3.256', 'ip')).toThrow();
    expect(checkCidr('10.0.0.0/8', 'c')).toBe('10.0.0.0/8');
    for (const bad of ['10.0.0.0/33', '10.0.0.0', 'x/8', '::/129']) expect(() => checkCidr(bad, 'c')).toThrow();
    expect(checkUrlPath('/api/', 'p')).toBe('/api');
    expect(checkUrlPath('/', 'p')).toBe('/');
    for (const bad of ['api', '/a/../b', '/a//b', '/a b', '/a;b', '/a{b', '/a"b', "/a'b", '/a$b', '/a\nb']) expect(() => checkUrlPath(bad, 'p')).toThrow();
  });

  it('matches addresses against ranges', () => {
    expect(cidrContains('127.0.0.0/29', '127.0.0.5')).toBe(true);
    expect(cidrContains('127.0.0.0/29', '127.0.0.9')).toBe(false);
    expect(cidrContains('10.0.0.0/8', '10.255.1.1')).toBe(true);
    expect(cidrContains('2001:db8::/32', '2001:db8:1::5')).toBe(true);
    expect(cidrContains('2001:db8::/32', '2001:db9::5')).toBe(false);
    expect(cidrContains('10.0.0.0/8', '::1')).toBe(false);
  });

  it('parses access-log lines and path patterns', () => {
    const r = parseLine(
      '{"time":"1700000000.250","deployment":"app","host":"a.test","method":"GET","path":"/x?a=\\"1\\"","status":"404","bytes":"12","duration":"0.015","ip":"1.2.3.4","ua":"u","blocked":"1","protected":"0","user":""}',
    );
    expect(r).toMatchObject({ time_ms: 1_700_000_000_250, status: 404, bytes: 12, duration_ms: 15, path: '/x?a="1"', blocked: true, protected: false });
    expect(parseLine('not json')).toBeNull();
    expect(parseLine('{"time":"x","status":"200"}')).toBeNull();
    const m = (pattern: string, paths: string[]) => paths.filter(pathMatcher(pattern));
    const paths = ['/api/items', '/API/Items?q=1', '/v1/api/x', '/login', '/100%_x', '/100ab', '/a/b/c.js', '/é/É'];
    expect(m('/api/*', paths)).toEqual(['/api/items', '/API/Items?q=1']);
    expect(m('api', paths)).toEqual(['/api/items', '/API/Items?q=1', '/v1/api/x']);
    expect(m('100%_x', paths)).toEqual(['/100%_x']);
    expect(m('*.js', paths)).toEqual(['/a/b/c.js']);
    expect(m('/*/*/*', paths)).toEqual(['/v1/api/x', '/a/b/c.js']); // `*` crosses `/`
    expect(m('/é*', paths)).toEqual(['/é/É']);
    expect(m('/É*', paths)).toEqual([]); // only A–Z fold, as in SQLite's LIKE
    expect(m('*', paths)).toEqual(paths);
    expect(m('', paths)).toEqual(paths);
    expect(invalidPathPattern('*a'.repeat(16))).toBeNull();
    expect(invalidPathPattern('*a'.repeat(17))).toMatch(/more than 16 \* wildcards/);
    expect(invalidPathPattern('x'.repeat(513))).toMatch(/longer than 512/);
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

  it('renders vhosts with prefixes, overlays and TLS', () => {
    const input: RenderInput = {
      layout: {
        configDir: '/etc/nginx/agent',
        webroot: '/var/www/acme',
        accessLog: '/var/log/a.log',
        httpPort: 80,
        httpsPort: 443,
        listenAddress: '',
        defaultServer: true,
      },
      sites: [
        {
          host: 'a.test',
          deployment: 'app',
          names: ['a.test', 'www.a.test'],
          tls: { cert: '/c.pem', key: '/k.pem' },
          routes: [
            { domainId: '1', prefix: '/', strip: false, upstream: '172.17.0.2:80' },
            { domainId: '2', prefix: '/api', strip: true, upstream: null },
          ],
        },
      ],
      security: {
        blocked: ['1.2.3.4'],
        allowNets: ['10.0.0.0/8'],
        allowPaths: ['/health'],
        deploymentBlocks: { app: ['5.6.7.8'] },
        overlays: {
          app: [
            { path: '/admin', auth: { id: '7', methods: ['POST'], file: '/etc/nginx/agent/security/htpasswd/route-7' } },
            { path: '/api/v1', rate: { zone: 'z', burst: 0 } },
          ],
        },
        rateZones: [{ zone: 'z', rate: 5 }],
        htpasswd: {},
      },
    };
    const files = renderAll(input);
    const site = files.get('sites/a.test.conf')!;
    expect(site).toContain('server_name a.test www.a.test;');
    expect(site).toContain('listen 443 ssl;');
    expect(site).toContain('return 301 https://$host$request_uri;');
    expect(site).toContain('location ^~ /api/ {');
    expect(site).toContain('return 503;');
    expect(site).toContain('location ^~ /admin {');
    expect(site).toContain('auth_basic $agent_auth_7;');
    expect(site).toContain('limit_req zone=z nodelay;');
    const sec = files.get('security/http.conf')!;
    expect(sec).toContain('1.2.3.4 1;');
    expect(sec).toContain('"~^/health" 1;');
    expect(sec).toContain('POST "Restricted";');
    expect(files.get('default.conf')).toMatch(/return 200 "[0-9a-f]{16}";/);
  });
});
