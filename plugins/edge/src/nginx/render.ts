/**
 * Pure rendering of the nginx configuration the agent owns: given the desired state, the exact content of every
 * generated file (relative path → text). The applier compares this with what is on disk, so a render is also
 * the plan preview. Every value written here was validated against strict patterns before (see validate.ts); the
 * snippets other plugins contribute (see `ProxySnippets` in api.ts) are theirs to validate.
 */
import { compareText } from '@agent/sdk';
import { createHash } from 'node:crypto';
import { LOG_FIELDS } from '../traffic/parse.js';
import type { ProxyLocation } from '../api.js';

export interface ProxyLayout {
  configDir: string;
  webroot: string;
  accessLog: string;
  httpPort: number;
  httpsPort: number;
  listenAddress: string;
  defaultServer: boolean;
  /**
   * The default server also holds the HTTPS port, refusing TLS handshakes for unknown names
   * (`ssl_reject_handshake`, nginx 1.19.4+): the own instance keeps both its ports from its start, so another
   * agent's instance cannot take the second one before a first HTTPS site needs it. Not for the host's nginx,
   * whose other servers may hold a default server there.
   */
  holdHttps: boolean;
}

export interface SiteRoute {
  domainId: string;
  prefix: string;
  strip: boolean;
  /**
   * `ip:port`, or null when the service has no running container (the route answers 503); several separated by
   * commas (a swarm service's tasks): an upstream block balances over them.
   */
  upstream: string | null;
}

/** One file per host name: the domain plus its aliases, all routes of its deployment on that host. */
export interface Site {
  host: string;
  deployment: string;
  names: string[];
  routes: SiteRoute[];
  tls: { cert: string; key: string } | null;
}

/** A contributor's snippets, resolved for one render (see `ProxySnippets` in api.ts). */
export interface Contribution {
  /** Its folder below the config folder. */
  name: string;
  http: string | null;
  /** Files of its folder (relative to the config folder) → content. */
  files: Map<string, string>;
  server(deployment: string): string[];
  locations(deployment: string): ProxyLocation[];
}

export interface RenderInput {
  layout: ProxyLayout;
  sites: Site[];
  /** Sorted by name: their snippets come in this order. */
  contributions: Contribution[];
}

export const LOG_FORMAT_NAME = 'agent_json';

export const siteFile = (host: string) => `sites/${host}.conf`;

const q = (value: string) => `"${value}"`;
const listen = (layout: ProxyLayout, port: number, extra = '') =>
  `    listen ${layout.listenAddress ? `${layout.listenAddress.includes(':') ? `[${layout.listenAddress}]` : layout.listenAddress}:` : ''}${port}${extra};`;

function acmeLocation(layout: ProxyLayout): string[] {
  return [
    '    location ^~ /.well-known/acme-challenge/ {',
    `        root ${q(layout.webroot)};`,
    '        default_type "text/plain";',
    '        try_files $uri =404;',
    '    }',
  ];
}

/**
 * Variables every agent server sets, then the contributors' server directives: the variables feed the JSON access
 * log (`blocked`, `protected`: 0 unless a contributor's rule says otherwise).
 */
function serverPreamble(input: RenderInput, deployment: string): string[] {
  const lines = [`    set $agent_deployment ${q(deployment)};`, '    set $agent_protected 0;', '    set $agent_block_hit 0;'];
  for (const c of input.contributions) for (const line of c.server(deployment)) lines.push(`    ${line}`);
  lines.push(`    access_log ${q(input.layout.accessLog)} ${LOG_FORMAT_NAME};`);
  return lines;
}

/** The upstream block of a route with several addresses (its name is the route's: domain ids are unique). */
const poolName = (route: SiteRoute) => `agent_route_${route.domainId}`;
const servers = (route: SiteRoute) => (route.upstream ?? '').split(',').filter(Boolean);

/**
 * Every server is always tried (`max_fails=0`: a task that stopped is not a reason to refuse the others for a
 * while), and a request whose connection failed or timed out goes to the next: a task of a rolling update may stop
 * before the configuration without it is in force. A connection to a task that is gone may get no answer at all
 * (its address left the bridge), hence a connect timeout far below the default minute; 3 s, not less: a busy
 * server's full accept queue drops a SYN, which the kernel sends again after 1 s.
 */
function poolBlock(route: SiteRoute): string[] {
  return [`upstream ${poolName(route)} {`, ...servers(route).map((s) => `    server ${s} max_fails=0;`), '}'];
}

function proxyBlock(route: SiteRoute, uri: string, prefix: string | null): string[] {
  const upstream = route.upstream;
  if (!upstream) return ['        return 503;'];
  const pooled = servers(route).length > 1;
  const lines = [
    `        proxy_pass http://${pooled ? poolName(route) : upstream}${uri};`,
    ...(pooled ? ['        proxy_next_upstream error timeout;', '        proxy_connect_timeout 3s;'] : []),
    '        proxy_http_version 1.1;',
    '        proxy_set_header Host $host;',
    '        proxy_set_header Upgrade $http_upgrade;',
    '        proxy_set_header Connection $agent_connection_upgrade;',
    '        proxy_set_header X-Real-IP $remote_addr;',
    '        proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;',
    '        proxy_set_header X-Forwarded-Proto $scheme;',
    '        proxy_set_header X-Forwarded-Host $host;',
    '        proxy_set_header X-Forwarded-Port $server_port;',
  ];
  if (prefix) lines.push(`        proxy_set_header X-Forwarded-Prefix ${q(prefix)};`);
  lines.push('        proxy_read_timeout 3600s;', '        proxy_send_timeout 3600s;');
  return lines;
}

interface LocationOut {
  key: string;
  route: SiteRoute;
  uri: string;
  extras: ProxyLocation[];
}

/** The locations of one site: each route's prefix, then contributed paths inside a route (longest prefix wins). */
function siteLocations(site: Site, extras: ProxyLocation[]): LocationOut[] {
  const out: LocationOut[] = [];
  const byKey = new Map<string, LocationOut>();
  const add = (loc: LocationOut) => {
    const existing = byKey.get(loc.key);
    if (existing) existing.extras.push(...loc.extras);
    else {
      byKey.set(loc.key, loc);
      out.push(loc);
    }
  };
  const routes = [...site.routes].sort((a, b) => b.prefix.length - a.prefix.length || compareText(a.prefix, b.prefix));
  for (const r of routes) {
    if (r.prefix === '/') add({ key: '/', route: r, uri: '', extras: [] });
    else {
      add({ key: `^~ ${r.prefix}/`, route: r, uri: r.strip ? '/' : '', extras: [] });
      add({ key: `= ${r.prefix}`, route: r, uri: r.strip ? '/' : '', extras: [] });
    }
  }
  for (const o of extras) {
    const r = routes.find((x) => x.prefix === '/' || o.path === x.prefix || o.path.startsWith(`${x.prefix}/`));
    if (!r) continue;
    if (o.path === r.prefix) {
      for (const key of r.prefix === '/' ? ['/'] : [`^~ ${r.prefix}/`, `= ${r.prefix}`]) byKey.get(key)!.extras.push(o);
      continue;
    }
    const rest = r.prefix === '/' ? o.path : o.path.slice(r.prefix.length);
    add({ key: `^~ ${o.path}`, route: r, uri: r.strip ? rest : '', extras: [o] });
  }
  return out.sort((a, b) => compareText(a.key, b.key));
}

export function renderSite(input: RenderInput, site: Site): string {
  const { layout } = input;
  const names = site.names.join(' ');
  const extras = input.contributions.flatMap((c) => c.locations(site.deployment));
  const lines = [`# Generated by the agent for deployment '${site.deployment}': do not edit, changes are overwritten.`];
  const locations: string[] = [];
  for (const loc of siteLocations(site, extras)) {
    const prefix = loc.route.strip && loc.route.prefix !== '/' ? loc.route.prefix : null;
    const directives = loc.extras.flatMap((o) => o.directives.map((d) => `        ${d}`));
    locations.push(`    location ${loc.key} {`, ...directives, ...proxyBlock(loc.route, loc.uri, prefix), '    }');
  }
  for (const route of site.routes) if (servers(route).length > 1) lines.push(...poolBlock(route));
  if (site.tls) {
    const port = layout.httpsPort === 443 ? '' : `:${layout.httpsPort}`;
    lines.push(
      'server {',
      listen(layout, layout.httpPort),
      `    server_name ${names};`,
      ...serverPreamble(input, site.deployment),
      ...acmeLocation(layout),
      '    location / {',
      `        return 301 https://$host${port}$request_uri;`,
      '    }',
      '}',
      'server {',
      listen(layout, layout.httpsPort, ' ssl'),
      `    server_name ${names};`,
      `    ssl_certificate ${q(site.tls.cert)};`,
      `    ssl_certificate_key ${q(site.tls.key)};`,
      '    ssl_protocols TLSv1.2 TLSv1.3;',
      '    ssl_session_cache shared:agent_ssl:10m;',
      ...serverPreamble(input, site.deployment),
      ...locations,
      '}',
    );
  } else {
    lines.push(
      'server {',
      listen(layout, layout.httpPort),
      `    server_name ${names};`,
      ...serverPreamble(input, site.deployment),
      ...acmeLocation(layout),
      ...locations,
      '}',
    );
  }
  return `${lines.join('\n')}\n`;
}

/** The file of a contributor's `http {}` directives. */
export const httpFile = (contributor: string) => `${contributor}/http.conf`;

export function renderEntry(input: RenderInput): string {
  const dir = input.layout.configDir;
  // The traffic parser reads lines of exactly this shape quickly (traffic/parse.ts owns the list).
  const fields = LOG_FIELDS.map(([key, variable]) => `"${key}":"${variable}"`);
  return [
    '# Generated by the agent. Include this file inside the http {} block of nginx.conf:',
    `#     include ${dir}/agent.conf;`,
    `log_format ${LOG_FORMAT_NAME} escape=json '{${fields.join(',')}}';`,
    'map $http_upgrade $agent_connection_upgrade {',
    '    default upgrade;',
    "    '' close;",
    '}',
    // The servers set the variables the log format and the contributors' maps use; with no server at all (no
    // default server, no site yet) nginx would refuse them as unknown, so they are declared here until one exists.
    ...(input.layout.defaultServer || input.sites.length
      ? []
      : [
          'map $host $agent_deployment {',
          '    default "";',
          '}',
          ...['protected', 'block_hit'].flatMap((v) => [`map $host $agent_${v} {`, '    default 0;', '}']),
        ]),
    ...input.contributions.filter((c) => c.http !== null).map((c) => `include ${q(`${dir}/${httpFile(c.name)}`)};`),
    `include ${q(`${dir}/sites/*.conf`)};`,
    ...(input.layout.defaultServer ? [`include ${q(`${dir}/default.conf`)};`] : []),
    '',
  ].join('\n');
}

/** Path on the default server that answers the configuration generation (the agent polls it after a reload). */
export const GENERATION_PATH = '/.well-known/agent-config-generation';

export function renderDefaultServer(input: RenderInput, generation: string): string {
  const { layout } = input;
  return [
    '# Generated by the agent: requests for host names no deployment owns (counted as unknown domains).',
    'server {',
    listen(layout, layout.httpPort, ' default_server'),
    '    server_name _;',
    ...serverPreamble(input, ''),
    ...acmeLocation(layout),
    `    location = ${GENERATION_PATH} {`,
    '        allow 127.0.0.1;',
    '        allow ::1;',
    '        deny all;',
    '        access_log off;',
    `        return 200 "${generation}";`,
    '    }',
    '    location / {',
    '        return 404;',
    '    }',
    '}',
    ...(layout.holdHttps
      ? ['server {', listen(layout, layout.httpsPort, ' ssl default_server'), '    server_name _;', '    ssl_reject_handshake on;', '}']
      : []),
    '',
  ].join('\n');
}

/** Every generated file, relative to the config folder. */
export function renderAll(input: RenderInput): Map<string, string> {
  const files = new Map<string, string>();
  files.set('agent.conf', renderEntry(input));
  for (const c of input.contributions) {
    if (c.http !== null) files.set(httpFile(c.name), c.http);
    for (const [path, content] of c.files) files.set(path, content);
  }
  for (const site of [...input.sites].sort((a, b) => compareText(a.host, b.host))) files.set(siteFile(site.host), renderSite(input, site));
  if (input.layout.defaultServer) files.set('default.conf', renderDefaultServer(input, generationOf(files)));
  return files;
}

/** Hash of every other generated file: what the default server reports once nginx runs this configuration. */
export function generationOf(files: Map<string, string>): string {
  const h = createHash('sha256');
  for (const [path, content] of [...files].sort(([a], [b]) => compareText(a, b))) {
    if (path !== 'default.conf') h.update(`${path}\0${content}\0`);
  }
  return h.digest('hex').slice(0, 16);
}
