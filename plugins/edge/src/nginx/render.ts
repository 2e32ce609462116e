/**
 * Pure rendering of the nginx configuration the agent owns: given the desired state, the exact content of every
 * generated file (relative path → text). The applier compares this with what is on disk, so a render is also
 * the plan preview. Every value written here was validated against strict patterns before (see validate.ts).
 */
import { compareText } from '@agent/sdk';
import { createHash } from 'node:crypto';
import { LOG_FIELDS } from '../traffic/parse.js';

export interface ProxyLayout {
  configDir: string;
  webroot: string;
  accessLog: string;
  httpPort: number;
  httpsPort: number;
  listenAddress: string;
  defaultServer: boolean;
}

export interface SiteRoute {
  domainId: string;
  prefix: string;
  strip: boolean;
  /** `ip:port`, or null when the service has no running container (the route answers 503). */
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

export interface Overlay {
  path: string;
  auth?: { id: string; methods: string[] | 'ALL'; file: string };
  deny?: boolean;
  rate?: { zone: string; burst: number };
}

export interface SecurityModel {
  /** Blocked addresses or ranges (global). */
  blocked: string[];
  /** Whitelisted addresses or ranges: never denied. */
  allowNets: string[];
  /** Whitelisted path prefixes: never denied. */
  allowPaths: string[];
  /** Per-deployment blocked addresses. */
  deploymentBlocks: Record<string, string[]>;
  /** Per-deployment locations with auth, deny or rate limits. */
  overlays: Record<string, Overlay[]>;
  rateZones: { zone: string; rate: number }[];
  /** htpasswd files, relative to the config folder. */
  htpasswd: Record<string, string>;
}

export interface RenderInput {
  layout: ProxyLayout;
  sites: Site[];
  security: SecurityModel;
}

export const LOG_FORMAT_NAME = 'agent_json';

/** Short stable suffix for per-deployment variable names (names may hold `-`, variables may not). */
export const tag = (name: string) => createHash('sha1').update(name).digest('hex').slice(0, 10);

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

/** Variables every agent server sets: they feed the JSON access log and the security checks. */
function serverPreamble(layout: ProxyLayout, deployment: string, security: SecurityModel): string[] {
  const lines = [`    set $agent_deployment ${q(deployment)};`, '    set $agent_protected 0;', '    set $agent_block_hit $agent_deny;'];
  if (deployment && (security.deploymentBlocks[deployment]?.length ?? 0) > 0) {
    lines.push(`    if ($agent_ddeny_${tag(deployment)}) {`, '        set $agent_block_hit 1;', '    }');
  }
  lines.push('    if ($agent_block_hit) {', '        return 403;', '    }');
  lines.push(`    access_log ${q(layout.accessLog)} ${LOG_FORMAT_NAME};`);
  return lines;
}

function proxyBlock(upstream: string | null, uri: string, prefix: string | null): string[] {
  if (!upstream) return ['        return 503;'];
  const lines = [
    `        proxy_pass http://${upstream}${uri};`,
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

function overlayDirectives(overlays: Overlay[]): string[] {
  const lines: string[] = [];
  for (const o of overlays) {
    if (o.deny) lines.push('        if ($agent_allowed_ip = 0) {', '            return 403;', '        }');
    if (o.rate)
      lines.push(`        limit_req zone=${o.rate.zone}${o.rate.burst > 0 ? ` burst=${o.rate.burst}` : ''} nodelay;`, '        limit_req_status 429;');
    if (o.auth) {
      lines.push('        set $agent_protected 1;');
      lines.push(o.auth.methods === 'ALL' ? '        auth_basic "Restricted";' : `        auth_basic $agent_auth_${o.auth.id};`);
      lines.push(`        auth_basic_user_file ${q(o.auth.file)};`);
    }
  }
  return lines;
}

interface LocationOut {
  key: string;
  route: SiteRoute;
  uri: string;
  overlays: Overlay[];
}

/** The locations of one site: each route's prefix, then overlay paths inside a route (longest prefix wins). */
function siteLocations(site: Site, overlays: Overlay[]): LocationOut[] {
  const out: LocationOut[] = [];
  const byKey = new Map<string, LocationOut>();
  const add = (loc: LocationOut) => {
    const existing = byKey.get(loc.key);
    if (existing) existing.overlays.push(...loc.overlays);
    else {
      byKey.set(loc.key, loc);
      out.push(loc);
    }
  };
  const routes = [...site.routes].sort((a, b) => b.prefix.length - a.prefix.length || compareText(a.prefix, b.prefix));
  for (const r of routes) {
    if (r.prefix === '/') add({ key: '/', route: r, uri: '', overlays: [] });
    else {
      add({ key: `^~ ${r.prefix}/`, route: r, uri: r.strip ? '/' : '', overlays: [] });
      add({ key: `= ${r.prefix}`, route: r, uri: r.strip ? '/' : '', overlays: [] });
    }
  }
  for (const o of overlays) {
    const r = routes.find((x) => x.prefix === '/' || o.path === x.prefix || o.path.startsWith(`${x.prefix}/`));
    if (!r) continue;
    if (o.path === r.prefix) {
      for (const key of r.prefix === '/' ? ['/'] : [`^~ ${r.prefix}/`, `= ${r.prefix}`]) byKey.get(key)!.overlays.push(o);
      continue;
    }
    const rest = r.prefix === '/' ? o.path : o.path.slice(r.prefix.length);
    add({ key: `^~ ${o.path}`, route: r, uri: r.strip ? rest : '', overlays: [o] });
  }
  return out.sort((a, b) => compareText(a.key, b.key));
}

export function renderSite(input: RenderInput, site: Site): string {
  const { layout, security } = input;
  const names = site.names.join(' ');
  const overlays = security.overlays[site.deployment] ?? [];
  const lines = [`# Generated by the agent for deployment '${site.deployment}': do not edit, changes are overwritten.`];
  const locations: string[] = [];
  for (const loc of siteLocations(site, overlays)) {
    const prefix = loc.route.strip && loc.route.prefix !== '/' ? loc.route.prefix : null;
    locations.push(`    location ${loc.key} {`, ...overlayDirectives(loc.overlays), ...proxyBlock(loc.route.upstream, loc.uri, prefix), '    }');
  }
  if (site.tls) {
    const port = layout.httpsPort === 443 ? '' : `:${layout.httpsPort}`;
    lines.push(
      'server {',
      listen(layout, layout.httpPort),
      `    server_name ${names};`,
      ...serverPreamble(layout, site.deployment, security),
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
      ...serverPreamble(layout, site.deployment, security),
      ...locations,
      '}',
    );
  } else {
    lines.push(
      'server {',
      listen(layout, layout.httpPort),
      `    server_name ${names};`,
      ...serverPreamble(layout, site.deployment, security),
      ...acmeLocation(layout),
      ...locations,
      '}',
    );
  }
  return `${lines.join('\n')}\n`;
}

export function renderSecurity(input: RenderInput): string {
  const { security } = input;
  const lines = ['# Generated by the agent: blocked addresses, whitelist, protected routes and rate limits.'];
  const geo = (name: string, nets: string[]) => {
    lines.push(`geo $${name} {`, '    default 0;', ...[...new Set(nets)].sort().map((n) => `    ${n} 1;`), '}');
  };
  geo('agent_blocked_ip', security.blocked);
  geo('agent_allowed_ip', security.allowNets);
  lines.push('map $uri $agent_allowed_path {', '    default 0;');
  for (const p of [...new Set(security.allowPaths)].sort()) lines.push(`    "~^${p.replace(/[.+]/g, '\\$&')}" 1;`);
  lines.push('}');
  lines.push('map "$agent_blocked_ip$agent_allowed_ip$agent_allowed_path" $agent_deny {', '    default 0;', '    100 1;', '}');
  for (const [deployment, nets] of Object.entries(security.deploymentBlocks).sort(([a], [b]) => compareText(a, b))) {
    if (nets.length === 0) continue;
    const t = tag(deployment);
    lines.push(`# deployment '${deployment}'`);
    geo(`agent_dblock_${t}`, nets);
    lines.push(`map "$agent_dblock_${t}$agent_allowed_ip$agent_allowed_path" $agent_ddeny_${t} {`, '    default 0;', '    100 1;', '}');
  }
  const authIds = new Set<string>();
  for (const overlays of Object.values(security.overlays)) {
    for (const o of overlays) {
      if (!o.auth || o.auth.methods === 'ALL' || authIds.has(o.auth.id)) continue;
      authIds.add(o.auth.id);
      lines.push(`map $request_method $agent_auth_${o.auth.id} {`, '    default off;', ...o.auth.methods.map((m) => `    ${m} "Restricted";`), '}');
    }
  }
  for (const z of security.rateZones) lines.push(`limit_req_zone $binary_remote_addr zone=${z.zone}:1m rate=${z.rate}r/s;`);
  return `${lines.join('\n')}\n`;
}

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
    `include ${q(`${dir}/security/http.conf`)};`,
    `include ${q(`${dir}/sites/*.conf`)};`,
    ...(input.layout.defaultServer ? [`include ${q(`${dir}/default.conf`)};`] : []),
    '',
  ].join('\n');
}

/** Path on the default server that answers the configuration generation (the agent polls it after a reload). */
export const GENERATION_PATH = '/.well-known/agent-config-generation';

export function renderDefaultServer(input: RenderInput, generation: string): string {
  const { layout, security } = input;
  return [
    '# Generated by the agent: requests for host names no deployment owns (counted as unknown domains).',
    'server {',
    listen(layout, layout.httpPort, ' default_server'),
    '    server_name _;',
    ...serverPreamble(layout, '', security),
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
    '',
  ].join('\n');
}

/** Every generated file, relative to the config folder. */
export function renderAll(input: RenderInput): Map<string, string> {
  const files = new Map<string, string>();
  files.set('agent.conf', renderEntry(input));
  files.set('security/http.conf', renderSecurity(input));
  for (const [path, content] of Object.entries(input.security.htpasswd)) files.set(path, content);
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
