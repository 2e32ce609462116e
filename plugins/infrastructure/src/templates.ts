/**
 * Built-in infrastructure templates. A template declares its settings (typed, validated, secrets generated when
 * empty) and renders a compose document as an object, serialised by the YAML library: setting values are data
 * and can never add keys to the file.
 */
import { randomBytes } from 'node:crypto';
import { isIP } from 'node:net';
import { errors } from '@agent/sdk';

export type SettingValue = string | number | boolean;

export interface SettingSpec {
  type: 'string' | 'integer' | 'boolean';
  default: SettingValue;
  description: string;
  pattern?: RegExp;
  min?: number;
  max?: number;
  /** Masked in answers, kept in the encrypted state document and in the project's 0600 `.env`. */
  secret?: boolean;
  /** Generated (random) when empty at first start. */
  generate?: boolean;
}

export type NetworkKey = 'proxy' | 'shared';

/** The shared networks: `proxy` for the reverse proxy and published apps, `shared` for the shared services. */
export const SHARED_NETWORKS: { key: NetworkKey; description: string }[] = [
  { key: 'proxy', description: 'the reverse proxy network: deployments reachable by a containerised proxy' },
  { key: 'shared', description: 'the shared services network: shared database, cache, DNS server' },
];

/** What rendering needs besides the settings: the real network names and labels every container gets. */
export interface RenderContext {
  networks: Record<NetworkKey, string>;
  labels: Record<string, string>;
}

export interface Template {
  name: string;
  description: string;
  /** `compose`: a compose project; `network`: only a shared network (nothing runs). */
  kind: 'compose' | 'network';
  settings: Record<string, SettingSpec>;
  /** Shared networks the project joins. */
  networks: NetworkKey[];
  /** Compose services of the project. */
  services: string[];
  /** The compose document and the variables of its `.env` (secrets go there, not into the compose file). */
  render?(settings: Record<string, SettingValue>, context: RenderContext): { compose: Record<string, unknown>; env: Record<string, string> };
}

const IMAGE = /^[a-z0-9][a-z0-9._\/:@-]{0,254}$/;
const BIND = /^[0-9a-f.:]{2,45}$/i;

const image = (def: string): SettingSpec => ({ type: 'string', default: def, pattern: IMAGE, description: 'container image' });
const port = (def: number, what: string): SettingSpec => ({
  type: 'integer',
  default: def,
  min: 0,
  max: 65535,
  description: `host port of ${what} (0: not published)`,
});
const bind = (def: string): SettingSpec => ({ type: 'string', default: def, pattern: BIND, description: 'host address ports are published on' });
const secret = (description: string): SettingSpec => ({
  type: 'string',
  default: '',
  secret: true,
  generate: true,
  pattern: /^[A-Za-z0-9_.~+\/=-]{0,256}$/,
  description,
});

const sharedNetworks = (keys: NetworkKey[], c: RenderContext) => Object.fromEntries(keys.map((k) => [k, { external: true, name: c.networks[k] }]));

const publish = (host: SettingValue, hostPort: SettingValue, containerPort: number, proto = '') =>
  Number(hostPort) > 0 ? [`${String(host).includes(':') ? `[${host}]` : host}:${hostPort}:${containerPort}${proto}`] : [];

const label = (name: string, c: RenderContext) => ({ ...c.labels, 'agent.infrastructure': name });

export const TEMPLATES: Template[] = [
  {
    name: 'proxy-network',
    description: 'The proxy network: a shared bridge network deployments join so a containerised reverse proxy reaches them',
    kind: 'network',
    settings: {},
    networks: ['proxy'],
    services: [],
  },
  {
    name: 'database',
    description: 'Shared PostgreSQL server on the shared network (reach it as "database" from attached deployments)',
    kind: 'compose',
    settings: {
      image: image('postgres:16-alpine'),
      password: secret('password of the postgres superuser'),
      port: port(0, 'PostgreSQL'),
      bind: bind('127.0.0.1'),
    },
    networks: ['shared'],
    services: ['database'],
    render: (s, c) => ({
      compose: {
        version: '3.8',
        services: {
          database: {
            image: s.image,
            restart: 'unless-stopped',
            // An init process forwards signals, so a server started as PID 1 still stops on SIGTERM.
            init: true,
            environment: { POSTGRES_PASSWORD: '${POSTGRES_PASSWORD}' },
            volumes: ['data:/var/lib/postgresql/data'],
            ports: publish(s.bind!, s.port!, 5432),
            networks: { shared: { aliases: ['database'] } },
            labels: label('database', c),
            healthcheck: { test: ['CMD', 'pg_isready', '-U', 'postgres'], interval: '5s', timeout: '5s', retries: 5, start_period: '10s' },
          },
        },
        networks: sharedNetworks(['shared'], c),
        volumes: { data: {} },
      },
      env: { POSTGRES_PASSWORD: String(s.password) },
    }),
  },
  {
    name: 'cache',
    description: 'Shared Redis cache on the shared network (reach it as "cache" from attached deployments)',
    kind: 'compose',
    settings: {
      image: image('redis:7-alpine'),
      password: secret('password clients give with AUTH'),
      port: port(0, 'Redis'),
      bind: bind('127.0.0.1'),
      max_memory_mb: { type: 'integer', default: 256, min: 16, max: 65536, description: 'memory limit of the cache (LRU eviction beyond it)' },
    },
    networks: ['shared'],
    services: ['cache'],
    render: (s, c) => ({
      compose: {
        version: '3.8',
        services: {
          cache: {
            image: s.image,
            restart: 'unless-stopped',
            init: true,
            // `$$` keeps the variable for the container's shell; compose substitutes nothing here.
            command: ['sh', '-c', `exec redis-server --requirepass "$$REDIS_PASSWORD" --maxmemory ${Number(s.max_memory_mb)}mb --maxmemory-policy allkeys-lru`],
            environment: { REDIS_PASSWORD: '${REDIS_PASSWORD}' },
            ports: publish(s.bind!, s.port!, 6379),
            networks: { shared: { aliases: ['cache'] } },
            labels: label('cache', c),
            healthcheck: { test: ['CMD-SHELL', 'redis-cli -a "$$REDIS_PASSWORD" ping | grep -q PONG'], interval: '5s', timeout: '5s', retries: 5 },
          },
        },
        networks: sharedNetworks(['shared'], c),
      },
      env: { REDIS_PASSWORD: String(s.password) },
    }),
  },
  {
    name: 'dns',
    description: 'Authoritative DNS server (PowerDNS with its HTTP API), managed through /api/dns/dnsserver',
    kind: 'compose',
    settings: {
      image: image('powerdns/pdns-auth-48:latest'),
      api_key: secret('PowerDNS API key (the dns plugin hands over its own)'),
      api_port: port(8081, 'the HTTP API'),
      api_bind: bind('127.0.0.1'),
      dns_port: port(53, 'DNS (UDP and TCP)'),
      dns_bind: bind('0.0.0.0'),
    },
    networks: ['shared'],
    services: ['dns'],
    render: (s, c) => ({
      compose: {
        version: '3.8',
        services: {
          dns: {
            image: s.image,
            restart: 'unless-stopped',
            init: true,
            environment: { PDNS_AUTH_API_KEY: '${PDNS_AUTH_API_KEY}' },
            volumes: ['data:/var/lib/powerdns'],
            ports: [
              ...publish(s.api_bind!, s.api_port!, 8081),
              ...publish(s.dns_bind!, s.dns_port!, 53, '/udp'),
              ...publish(s.dns_bind!, s.dns_port!, 53, '/tcp'),
            ],
            networks: { shared: { aliases: ['dns'] } },
            labels: label('dns', c),
            healthcheck: { test: ['CMD', 'pdns_control', 'rping'], interval: '5s', timeout: '5s', retries: 5, start_period: '5s' },
          },
        },
        networks: sharedNetworks(['shared'], c),
        volumes: { data: {} },
      },
      env: { PDNS_AUTH_API_KEY: String(s.api_key) },
    }),
  },
];

export const templateOf = (name: string): Template | undefined => TEMPLATES.find((t) => t.name === name);

/** Validates a partial settings update against the template; returns the merged settings. */
export function mergeSettings(template: Template, current: Record<string, SettingValue>, patch: Record<string, unknown>): Record<string, SettingValue> {
  const merged: Record<string, SettingValue> = { ...current };
  for (const [key, value] of Object.entries(patch)) {
    const spec = template.settings[key];
    const field = `settings.${key}`;
    if (!spec)
      throw errors.badRequest(
        `${field}: '${template.name}' has no setting '${key}' (known: ${Object.keys(template.settings).join(', ') || 'none'})`,
        'VALIDATION_FAILED',
        { field },
      );
    if (spec.type === 'integer') {
      if (typeof value !== 'number' || !Number.isInteger(value) || value < (spec.min ?? -Infinity) || value > (spec.max ?? Infinity)) {
        throw errors.badRequest(`${field}: must be an integer between ${spec.min} and ${spec.max}`, 'VALIDATION_FAILED', { field });
      }
    } else if (spec.type === 'boolean') {
      if (typeof value !== 'boolean') throw errors.badRequest(`${field}: must be a boolean`, 'VALIDATION_FAILED', { field });
    } else {
      if (typeof value !== 'string' || (spec.pattern && !spec.pattern.test(value))) {
        throw errors.badRequest(`${field}: invalid value${spec.secret ? '' : ` '${String(value).slice(0, 80)}'`}`, 'VALIDATION_FAILED', { field });
      }
      if (spec.pattern === BIND && !isIP(value)) throw errors.badRequest(`${field}: must be an IP address`, 'VALIDATION_FAILED', { field });
    }
    merged[key] = value as SettingValue;
  }
  return merged;
}

/** Defaults, with generated secrets filled in. */
export function initialSettings(template: Template): Record<string, SettingValue> {
  const out: Record<string, SettingValue> = {};
  for (const [key, spec] of Object.entries(template.settings)) {
    out[key] = spec.generate && spec.default === '' ? randomBytes(24).toString('base64url') : spec.default;
  }
  return out;
}

export function maskSettings(template: Template, settings: Record<string, SettingValue>): Record<string, SettingValue> {
  const out: Record<string, SettingValue> = {};
  for (const [key, value] of Object.entries(settings)) out[key] = template.settings[key]?.secret && value !== '' ? '[redacted]' : value;
  return out;
}
