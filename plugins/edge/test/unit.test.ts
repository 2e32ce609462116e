import { describe, expect, it } from 'vitest';
import { checkHostname, checkIp, checkUrlPath } from '../src/validate.js';
import type { TrafficRecord } from '../src/traffic/journal.js';
import { invalidPathPattern, pathMatcher } from '../src/traffic/pattern.js';
import { parseLine } from '../src/traffic/parse.js';
import { renderAll, type Contribution, type RenderInput } from '../src/nginx/render.js';
import { resolveProxy } from '../src/settings.js';
import type { EdgeConfig } from '../src/config.js';

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
    expect(checkUrlPath('/api/', 'p')).toBe('/api');
    expect(checkUrlPath('/', 'p')).toBe('/');
    for (const bad of ['api', '/a/../b', '/a//b', '/a b', '/a;b', '/a{b', '/a"b', "/a'b", '/a$b', '/a\nb']) expect(() => checkUrlPath(bad, 'p')).toThrow();
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

  it('renders vhosts with prefixes, overlays and TLS', () => {
    const security: Contribution = {
      name: 'security',
      http: [
        'geo $agent_blocked_ip {',
        '    default 0;',
        '    1.2.3.4 1;',
        '}',
        'map $uri $agent_allowed_path {',
        '    "~^/health" 1;',
        '}',
        'map $request_method $agent_auth_7 {',
        '    default off;',
        '    POST "Restricted";',
        '}',
        '',
      ].join('\n'),
      files: new Map([['security/htpasswd/route-7', 'u:$2a$09$hash\n']]),
      server: (deployment) => [
        'set $agent_block_hit $agent_deny;',
        ...(deployment === 'app' ? ['if ($agent_ddeny_x) {', '    set $agent_block_hit 1;', '}'] : []),
        'if ($agent_block_hit) {',
        '    return 403;',
        '}',
      ],
      locations: (deployment) =>
        deployment === 'app'
          ? [
              {
                path: '/admin',
                directives: ['set $agent_protected 1;', 'auth_basic $agent_auth_7;', 'auth_basic_user_file "/etc/nginx/agent/security/htpasswd/route-7";'],
              },
              { path: '/api/v1', directives: ['limit_req zone=z nodelay;', 'limit_req_status 429;'] },
            ]
          : [],
    };
    const input: RenderInput = {
      layout: {
        configDir: '/etc/nginx/agent',
        webroot: '/var/www/acme',
        accessLog: '/var/log/a.log',
        httpPort: 80,
        httpsPort: 443,
        listenAddress: '',
        defaultServer: true,
        holdHttps: false,
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
      // What the security plugin contributes for these rules (its own unit test checks it renders exactly this).
      contributions: [security],
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
    // The contributor's parts: its http file included, its server lines before the access log, its files written.
    expect(files.get('agent.conf')).toContain('include "/etc/nginx/agent/security/http.conf";');
    expect(site).toMatch(/set \$agent_block_hit 0;\n {4}set \$agent_block_hit \$agent_deny;\n {4}if \(\$agent_ddeny_x\) \{\n {8}set \$agent_block_hit 1;/);
    expect(files.get('security/htpasswd/route-7')).toBe('u:$2a$09$hash\n');
    // Without contributors: no include, no rule, the flags the access log carries stay 0.
    const bare = renderAll({ ...input, contributions: [] });
    expect(bare.get('agent.conf')).not.toContain('security');
    expect([...bare.keys()].filter((f) => f.startsWith('security/'))).toEqual([]);
    expect(bare.get('sites/a.test.conf')).not.toMatch(/auth_basic|limit_req|agent_deny|return 403/);
    expect(bare.get('sites/a.test.conf')).toContain('set $agent_block_hit 0;');
    expect(files.get('default.conf')).toMatch(/return 200 "[0-9a-f]{16}";/);
  });
  it('resolves the proxy mode: own by default, system when set or when a key names the host nginx', () => {
    const base = { nginx: 'nginx', listen_address: '', default_server: true, webroot: '', upstream: 'container_ip', worker_group: 'www-data' } as const;
    const cfg = (over: Partial<EdgeConfig['proxy']> = {}): EdgeConfig['proxy'] => ({ ...base, ...over });
    const own = resolveProxy(cfg(), '/var/lib/agent/plugins/edge');
    expect(own).toMatchObject({
      mode: 'own',
      configDir: '/var/lib/agent/plugins/edge/nginx/agent',
      accessLog: '/var/lib/agent/plugins/edge/nginx/logs/access.log',
      errorLog: '/var/lib/agent/plugins/edge/nginx/logs/error.log',
      webroot: '/var/lib/agent/plugins/edge/nginx/agent/acme-webroot',
      httpPort: 8080,
      httpsPort: 8443,
      testCommand: null,
      reloadCommand: null,
      own: {
        prefix: '/var/lib/agent/plugins/edge/nginx',
        conf: '/var/lib/agent/plugins/edge/nginx/nginx.conf',
        pidFile: '/var/lib/agent/plugins/edge/nginx/nginx.pid',
      },
    });
    expect(resolveProxy(cfg({ http_port: 9080 }), '/d').mode).toBe('own');
    expect(resolveProxy(cfg({ mode: 'system' }), '/d')).toMatchObject({
      mode: 'system',
      configDir: '/etc/nginx/agent',
      httpPort: 80,
      httpsPort: 443,
      accessLog: '/var/log/nginx/agent-access.log',
      testCommand: ['nginx', '-t'],
      reloadCommand: ['nginx', '-s', 'reload'],
      own: null,
    });
    // A configuration written for the host's nginx before the mode existed keeps driving it.
    expect(resolveProxy(cfg({ config_dir: '/srv/nginx' }), '/d')).toMatchObject({
      mode: 'system',
      configDir: '/srv/nginx',
      reason: expect.stringContaining('proxy.config_dir'),
    });
    expect(resolveProxy(cfg({ test_command: ['true'] }), '/d').mode).toBe('system');
    expect(() => resolveProxy(cfg({ mode: 'own', reload_command: ['true'] }), '/d')).toThrow('proxy.reload_command applies to proxy.mode: system only');
    expect(() => resolveProxy(cfg({ http_port: 9000, https_port: 9000 }), '/d')).toThrow('both 9000');
    expect(() => resolveProxy(cfg(), '/srv/a$b/plugins/edge')).toThrow('cannot be written');
  });

  it('declares the variables of the log format when no server sets them', () => {
    const layout = {
      configDir: '/c',
      webroot: '/w',
      accessLog: '/a.log',
      httpPort: 80,
      httpsPort: 443,
      listenAddress: '',
      defaultServer: false,
      holdHttps: false,
    };
    expect(renderAll({ layout, sites: [], contributions: [] }).get('agent.conf')).toContain('map $host $agent_deployment {');
    const withDefault = renderAll({ layout: { ...layout, defaultServer: true, holdHttps: true }, sites: [], contributions: [] });
    expect(withDefault.get('agent.conf')).not.toContain('$agent_deployment {');
    expect(withDefault.get('default.conf')).toContain('    listen 443 ssl default_server;\n    server_name _;\n    ssl_reject_handshake on;');
  });

  it("balances a route over a swarm service's tasks, retrying a failed connection on the next", () => {
    const layout = {
      configDir: '/c',
      webroot: '/w',
      accessLog: '/a.log',
      httpPort: 80,
      httpsPort: 443,
      listenAddress: '',
      defaultServer: false,
      holdHttps: false,
    };
    const site = (upstream: string) => ({
      host: 's.test',
      deployment: 'stack',
      names: ['s.test'],
      routes: [{ domainId: '7', prefix: '/', strip: false, upstream }],
      tls: null,
    });
    const pooled = renderAll({ layout, sites: [site('10.1.0.2:80,10.1.0.3:80')], contributions: [] }).get('sites/s.test.conf')!;
    expect(pooled).toContain('upstream agent_route_7 {\n    server 10.1.0.2:80 max_fails=0;\n    server 10.1.0.3:80 max_fails=0;\n}');
    expect(pooled).toContain('        proxy_pass http://agent_route_7;\n        proxy_next_upstream error timeout;\n        proxy_connect_timeout 3s;\n');
    // One address: proxied to directly, as a compose container is.
    const single = renderAll({ layout, sites: [site('10.1.0.2:80')], contributions: [] }).get('sites/s.test.conf')!;
    expect(single).not.toContain('upstream ');
    expect(single).toContain('        proxy_pass http://10.1.0.2:80;\n        proxy_http_version 1.1;');
  });
});
