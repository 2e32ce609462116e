/** Security endpoints: blocked IPs, whitelist, protected routes, deployment settings, events. */
import bcrypt from 'bcryptjs';
import {
  canReach,
  deploymentName,
  deploymentOrRetired,
  errors,
  MAX_SECONDS,
  Nullable,
  Pagination,
  RecordId,
  reply,
  Secret,
  Seconds,
  Type,
  type PluginSettings,
  type Principal,
  type Static,
  visibleDeployments,
} from '@agent/sdk';
import { checkCidr, checkIp, checkText, checkUrlPath } from '../validate.js';
import { defaultDeploymentSecurity, isExpired, type DeploymentSecurity, type ProtectedRoute } from '../state.js';
import { SecuritySettings } from '../config.js';
import { filterScope, TimeQuery, timeParam } from '../access.js';
import type { Runtime } from '../runtime.js';
import type { Blocks } from './rules.js';
import type { SecurityEvents } from './events.js';

const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS', 'ALL'] as const;
const USERNAME = /^[A-Za-z0-9._@-]{1,64}$/;
const BCRYPT_COST = 9;

const Blocked = Type.Object({
  ip: Type.String(),
  reason: Type.String(),
  deployment: Nullable(Type.String()),
  auto: Type.Boolean(),
  created_at: Type.String(),
  expires_at: Nullable(Type.String()),
  remaining_seconds: Nullable(Type.Integer()),
});
const Whitelist = Type.Object({ id: Type.Integer(), type: Type.String(), value: Type.String(), description: Type.String(), created_at: Type.String() });
const Protected = Type.Object({
  id: Type.Integer(),
  path: Type.String(),
  method: Type.String(),
  auth_type: Type.String(),
  username: Type.String(),
  deployment: Type.String(),
  enabled: Type.Boolean(),
  created_at: Type.String(),
  updated_at: Type.String(),
});
const DepSecurity = Type.Object({
  enabled: Type.Boolean(),
  blocked_ips: Type.Array(Type.String({ maxLength: 64 }), { maxItems: 1000 }),
  protected_paths: Type.Array(Type.Object({ pattern: Type.String({ maxLength: 512 }), enabled: Type.Boolean() }), { maxItems: 200 }),
  rate_limits: Type.Array(
    Type.Object({
      path: Type.String({ maxLength: 512 }),
      rate: Type.Integer({ minimum: 1, maximum: 100_000, description: 'requests per second per source' }),
      burst: Type.Integer({ minimum: 0, maximum: 100_000 }),
      enabled: Type.Boolean(),
    }),
    { maxItems: 50 },
  ),
});
const EventSchema = Type.Object({
  id: Type.Integer(),
  time: Type.String(),
  type: Type.String(),
  severity: Type.String(),
  source_ip: Type.String(),
  deployment: Nullable(Type.String()),
  host: Type.String(),
  path: Type.String(),
  details: Type.Record(Type.String(), Type.Unknown()),
  auto_blocked: Type.Boolean(),
});

const ipOrCidr = (value: string, field: string) => (value.includes('/') ? checkCidr(value, field) : checkIp(value, field));

export function securityRoutes(
  rt: Runtime,
  blocks: Blocks,
  events: SecurityEvents,
  settings: PluginSettings<typeof SecuritySettings>,
  refresh: () => Promise<unknown>,
): void {
  const { ctx, edge } = rt;

  const blockedView = (b: (typeof edge.state.blocked)[number]) => ({
    ...b,
    remaining_seconds: b.expires_at ? Math.max(0, Math.round((Date.parse(b.expires_at) - Date.now()) / 1000)) : null,
  });
  const protectedView = ({ password_hash: _hash, ...r }: ProtectedRoute) => r;
  const assertDeployment = (name: string, field = 'deployment') => {
    if (!rt.deployments().get(name)) throw errors.badRequest(`${field}: deployment '${name}' not found`, 'VALIDATION_FAILED', { field });
  };

  // --- blocked IPs -------------------------------------------------------------------------------------------
  ctx.route({
    method: 'GET',
    path: '/security/blocked-ips',
    permission: 'security:read',
    operationId: 'security.listBlockedIps',
    tag: 'security',
    summary: 'Blocked addresses (expired blocks are lifted automatically)',
    response: Type.Array(Blocked),
    tenancy: 'filtered',
    description: 'A principal limited to deployments sees the blocks tied to its deployments; blocks for every site are global.',
    handler: (req) => edge.state.blocked.filter((b) => !isExpired(b) && canReach(req.principal, b.deployment)).map(blockedView),
  });

  ctx.route({
    method: 'POST',
    path: '/security/blocked-ips',
    permission: 'security:write',
    operationId: 'security.blockIp',
    creates: 'ip',
    tag: 'security',
    status: 201,
    summary: 'Block an address or range in the proxy (403), optionally for a duration or one deployment',
    description: 'With `deployment`, bound to that deployment; without, the block applies to every site: global.',
    body: Type.Object({
      ip: Type.String({ maxLength: 64, description: 'IP address (or CIDR range)' }),
      reason: Type.String({ maxLength: 500 }),
      duration: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_SECONDS, description: 'seconds; omitted: permanent' })),
      deployment: Type.Optional(deploymentName({ description: 'only block for this deployment' })),
    }),
    deployment: (req) => req.body.deployment,
    response: Blocked,
    handler: async (req) => {
      const ip = ipOrCidr(req.body.ip, 'ip');
      const reason = checkText(req.body.reason, 'reason');
      if (req.body.deployment) assertDeployment(req.body.deployment);
      const b = await blocks.block({ ip, reason, duration: req.body.duration ?? null, deployment: req.body.deployment ?? null, auto: false });
      return reply.created(blockedView(b));
    },
  });

  ctx.route({
    method: 'DELETE',
    path: '/security/blocked-ips/:ip',
    permission: 'security:write',
    operationId: 'security.unblockIp',
    tag: 'security',
    summary: 'Unblock an address: its block for one deployment (`deployment`), or every block of it',
    description: 'With `deployment`, bound to that deployment and removes only its block; without, removes every block of the address: global.',
    params: Type.Object({ ip: Type.String({ maxLength: 64 }) }),
    query: Type.Object({ deployment: Type.Optional(deploymentName({ description: 'remove only the block tied to this deployment' })) }),
    deployment: (req) => req.query.deployment,
    handler: async (req) => {
      const ip = ipOrCidr(req.params.ip, 'ip');
      const deployment = req.query.deployment;
      const removed = await blocks.unblock(ip, deployment);
      if (removed === 0) throw errors.notFound(deployment ? `${ip} is not blocked for '${deployment}'` : `${ip} is not blocked`);
      return reply.ok(null, deployment ? `${ip} unblocked for '${deployment}'` : `${ip} unblocked`);
    },
  });

  // --- whitelist ---------------------------------------------------------------------------------------------
  ctx.route({
    method: 'GET',
    path: '/security/whitelist',
    permission: 'security:read',
    operationId: 'security.listWhitelist',
    tag: 'security',
    summary: 'Whitelist entries: addresses, ranges and paths never denied',
    response: Type.Array(Whitelist),
    handler: () => edge.state.whitelist,
  });

  ctx.route({
    method: 'POST',
    path: '/security/whitelist',
    permission: 'security:write',
    operationId: 'security.addWhitelist',
    tag: 'security',
    status: 201,
    creates: 'id',
    summary: 'Whitelist an address, a range or a path prefix (overrides blocks)',
    body: Type.Object({
      type: Type.Union([Type.Literal('ip'), Type.Literal('cidr'), Type.Literal('path')]),
      value: Type.String({ maxLength: 512 }),
      description: Type.Optional(Type.String({ maxLength: 500, default: '' })),
    }),
    response: Whitelist,
    handler: async (req) => {
      const { type } = req.body;
      const value =
        type === 'ip' ? checkIp(req.body.value, 'value') : type === 'cidr' ? checkCidr(req.body.value, 'value') : checkUrlPath(req.body.value, 'value');
      const description = checkText(req.body.description ?? '', 'description');
      if (edge.state.whitelist.some((w) => w.type === type && w.value === value))
        throw errors.conflict(`${type} '${value}' is already whitelisted`, 'WHITELIST_EXISTS');
      const { result } = await edge.mutate((draft) => {
        const entry = { id: draft.next_id++, type, value, description, created_at: new Date().toISOString() };
        draft.whitelist.push(entry);
        return entry;
      });
      return reply.created(result);
    },
  });

  ctx.route({
    method: 'DELETE',
    path: '/security/whitelist/:id',
    permission: 'security:write',
    operationId: 'security.removeWhitelist',
    tag: 'security',
    summary: 'Remove a whitelist entry',
    params: Type.Object({ id: RecordId() }),
    handler: async (req) => {
      if (!edge.state.whitelist.some((w) => w.id === req.params.id)) throw errors.notFound(`whitelist entry ${req.params.id} not found`);
      await edge.mutate((draft) => {
        draft.whitelist = draft.whitelist.filter((w) => w.id !== req.params.id);
      });
      return reply.ok(null, `whitelist entry ${req.params.id} removed`);
    },
  });

  // --- protected routes --------------------------------------------------------------------------------------
  const credentials = async (value: string) => {
    const i = value.indexOf(':');
    const user = i > 0 ? value.slice(0, i) : '';
    const password = i > 0 ? value.slice(i + 1) : '';
    // eslint-disable-next-line no-control-regex
    if (!USERNAME.test(user) || password.length < 1 || password.length > 128 || /[\u0000-\u001f\u007f]/.test(password)) {
      throw errors.badRequest(
        "credentials: expected '<user>:<password>' (user: letters, digits, . _ @ -; password: 1-128 printable characters)",
        'VALIDATION_FAILED',
        { field: 'credentials' },
      );
    }
    return { username: user, password_hash: await bcrypt.hash(password, BCRYPT_COST) };
  };
  const ProtectedBody = {
    path: Type.String({ maxLength: 512, description: 'URL path prefix to protect' }),
    method: Type.Union(
      METHODS.map((m) => Type.Literal(m)),
      { description: 'HTTP method, or ALL' },
    ),
    auth_type: Type.Literal('basic'),
    credentials: Secret({ maxLength: 200, description: '<user>:<password> (stored as a bcrypt hash)' }),
    deployment: deploymentName(),
  };
  /**
   * The deployment of a protected route, for the core's check, only when the caller reaches it: another tenant's
   * route then looks like an unknown id (the handler's 404), and its deployment's name does not show.
   */
  const routeDeployment = (principal: Principal, id: number) => {
    const d = edge.state.protected.find((p) => p.id === id)?.deployment;
    return d && principal.deploymentLevel(d) ? d : undefined;
  };
  const routeOr404 = (principal: Principal, id: number) => {
    const r = edge.state.protected.find((p) => p.id === id);
    if (!r || !principal.canAccessDeployment(r.deployment)) throw errors.notFound(`protected route ${id} not found`);
    return r;
  };
  const checkProtectedConflict = (deployment: string, path: string, id: number | null) => {
    const other = edge.state.protected.find((p) => p.deployment === deployment && p.path === path && p.id !== id);
    if (other) throw errors.conflict(`path '${path}' of '${deployment}' is already protected (route ${other.id})`, 'PROTECTED_ROUTE_EXISTS');
  };

  ctx.route({
    method: 'GET',
    path: '/security/protected-routes',
    permission: 'security:read',
    operationId: 'security.listProtectedRoutes',
    tag: 'security',
    summary: 'Routes behind basic authentication in the proxy',
    response: Type.Array(Protected),
    tenancy: 'filtered',
    description: 'Only the routes of deployments the caller reaches.',
    handler: (req) => edge.state.protected.filter((p) => req.principal.canAccessDeployment(p.deployment)).map(protectedView),
  });

  ctx.route({
    method: 'POST',
    path: '/security/protected-routes',
    permission: 'security:write',
    operationId: 'security.addProtectedRoute',
    tag: 'security',
    status: 201,
    creates: 'id',
    summary: "Protect a path of a deployment's domains with basic authentication",
    body: Type.Object({ ...ProtectedBody, enabled: Type.Optional(Type.Boolean({ default: true })) }),
    deployment: (req) => req.body.deployment,
    response: Protected,
    handler: async (req) => {
      const path = checkUrlPath(req.body.path, 'path');
      assertDeployment(req.body.deployment);
      checkProtectedConflict(req.body.deployment, path, null);
      const creds = await credentials(req.body.credentials);
      const { result } = await edge.mutate((draft) => {
        const now = new Date().toISOString();
        const route: ProtectedRoute = {
          id: draft.next_id++,
          path,
          method: req.body.method,
          auth_type: 'basic',
          ...creds,
          deployment: req.body.deployment,
          enabled: req.body.enabled ?? true,
          created_at: now,
          updated_at: now,
        };
        draft.protected.push(route);
        return route;
      });
      return reply.created(protectedView(result));
    },
  });

  ctx.route({
    method: 'PUT',
    path: '/security/protected-routes/:id',
    permission: 'security:write',
    operationId: 'security.updateProtectedRoute',
    tag: 'security',
    summary: 'Update a protected route',
    params: Type.Object({ id: RecordId() }),
    description: "Bound to the route's deployment (and to the new one when `deployment` moves it); an unknown id, or another tenant's, is 404.",
    body: Type.Partial(Type.Object({ ...ProtectedBody, enabled: Type.Boolean() })),
    deployment: (req) => routeDeployment(req.principal, req.params.id),
    tenancy: 'filtered',
    response: Protected,
    handler: async (req) => {
      const existing = routeOr404(req.principal, req.params.id);
      const path = req.body.path !== undefined ? checkUrlPath(req.body.path, 'path') : existing.path;
      const deployment = req.body.deployment ?? existing.deployment;
      if (req.body.deployment !== undefined) {
        // Moving a route needs write on the target too: unseen → 404 as for any deployment, seen but read → 403.
        if (!req.principal.deploymentLevel(deployment)) throw errors.notFound(`deployment '${deployment}' not found`);
        if (!req.principal.canAccessDeployment(deployment, 'write')) throw errors.forbidden(`'write' access to deployment '${deployment}' required`);
        assertDeployment(deployment);
      }
      checkProtectedConflict(deployment, path, existing.id);
      const creds = req.body.credentials !== undefined ? await credentials(req.body.credentials) : null;
      const { result } = await edge.mutate((draft) => {
        const r = draft.protected.find((p) => p.id === req.params.id)!;
        Object.assign(r, { path, deployment, updated_at: new Date().toISOString() }, creds ?? {});
        if (req.body.method !== undefined) r.method = req.body.method;
        if (req.body.enabled !== undefined) r.enabled = req.body.enabled;
        return r;
      });
      return protectedView(result);
    },
  });

  ctx.route({
    method: 'DELETE',
    path: '/security/protected-routes/:id',
    permission: 'security:write',
    operationId: 'security.removeProtectedRoute',
    tag: 'security',
    summary: 'Remove a protected route',
    params: Type.Object({ id: RecordId() }),
    description: "Bound to the route's deployment; an unknown id, or another tenant's, is 404.",
    deployment: (req) => routeDeployment(req.principal, req.params.id),
    tenancy: 'filtered',
    handler: async (req) => {
      routeOr404(req.principal, req.params.id);
      await edge.mutate((draft) => {
        draft.protected = draft.protected.filter((p) => p.id !== req.params.id);
      });
      return reply.ok(null, `protected route ${req.params.id} removed`);
    },
  });

  // --- per-deployment settings -------------------------------------------------------------------------------
  const NameParams = Type.Object({ name: deploymentName() });
  ctx.route({
    method: 'GET',
    path: '/deployments/:name/security',
    permission: 'security:read',
    operationId: 'security.getDeployment',
    tag: 'security',
    summary: "A deployment's security settings (enforced in its vhosts)",
    deployment: 'name',
    params: NameParams,
    response: DepSecurity,
    handler: (req) => {
      if (!rt.deployments().get(req.params.name)) throw errors.notFound(`deployment '${req.params.name}' not found`);
      return edge.state.deployment_security[req.params.name] ?? defaultDeploymentSecurity();
    },
  });

  ctx.route({
    method: 'PUT',
    path: '/deployments/:name/security',
    permission: 'security:write',
    operationId: 'security.updateDeployment',
    tag: 'security',
    summary: "Replace a deployment's security settings: blocked addresses, paths closed to non-whitelisted sources, rate limits",
    deployment: 'name',
    params: NameParams,
    body: Type.Partial(DepSecurity),
    response: DepSecurity,
    handler: async (req) => {
      const name = req.params.name;
      if (!rt.deployments().get(name)) throw errors.notFound(`deployment '${name}' not found`);
      const current = edge.state.deployment_security[name] ?? defaultDeploymentSecurity();
      const next: DeploymentSecurity = {
        enabled: req.body.enabled ?? current.enabled,
        blocked_ips: req.body.blocked_ips ? [...new Set(req.body.blocked_ips.map((ip, i) => ipOrCidr(ip, `blocked_ips[${i}]`)))] : current.blocked_ips,
        protected_paths:
          req.body.protected_paths?.map((p, i) => ({ pattern: checkUrlPath(p.pattern, `protected_paths[${i}].pattern`), enabled: p.enabled })) ??
          current.protected_paths,
        rate_limits:
          req.body.rate_limits?.map((r, i) => ({ path: checkUrlPath(r.path, `rate_limits[${i}].path`), rate: r.rate, burst: r.burst, enabled: r.enabled })) ??
          current.rate_limits,
      };
      await edge.mutate((draft) => {
        draft.deployment_security[name] = next;
      });
      return next;
    },
  });

  // --- settings, capture, refresh ----------------------------------------------------------------------------
  ctx.route({
    method: 'GET',
    path: '/settings/security',
    permission: 'security:read',
    operationId: 'security.getSettings',
    tag: 'security',
    summary: 'Security settings: detection thresholds, auto-block, durations',
    response: SecuritySettings,
    handler: () => settings.get(),
  });

  ctx.route({
    method: 'PUT',
    path: '/settings/security',
    permission: 'security:write',
    operationId: 'security.updateSettings',
    tag: 'security',
    summary: 'Update security settings',
    body: Type.Partial(SecuritySettings),
    response: SecuritySettings,
    handler: async (req) => {
      await settings.set(req.body as Partial<Static<typeof SecuritySettings>>);
      return settings.get();
    },
  });

  const CaptureStatus = Type.Object({ enabled: Type.Boolean(), mode: Type.String(), source: Type.String() });
  const captureStatus = () => ({
    enabled: settings.get().realtime_capture,
    mode: settings.get().realtime_capture ? 'realtime' : 'periodic',
    source: edge.layout.accessLog,
  });
  ctx.route({
    method: 'GET',
    path: '/security/realtime-capture',
    permission: 'security:read',
    operationId: 'security.getRealtimeCapture',
    tag: 'security',
    summary: 'Whether traffic and events are captured in real time (else by a periodic scan)',
    response: CaptureStatus,
    handler: captureStatus,
  });
  ctx.route({
    method: 'PUT',
    path: '/security/realtime-capture',
    permission: 'security:write',
    operationId: 'security.setRealtimeCapture',
    tag: 'security',
    summary: 'Enable or disable real-time capture',
    body: Type.Object({ enabled: Type.Boolean() }),
    response: CaptureStatus,
    handler: async (req) => {
      await settings.set({ realtime_capture: req.body.enabled });
      return captureStatus();
    },
  });

  ctx.route({
    method: 'POST',
    path: '/security/refresh',
    permission: 'security:write',
    operationId: 'security.refresh',
    tag: 'security',
    summary: 'Regenerate every proxy file (vhosts and security includes), test and reload nginx',
    response: Type.Object({
      regenerated: Type.Array(Type.String()),
      removed: Type.Array(Type.String()),
      reloaded: Type.Boolean(),
      errors: Type.Array(Type.String()),
    }),
    handler: async () => {
      try {
        await blocks.sweep();
        const { applied } = await edge.mutate(() => undefined, { force: true });
        await refresh();
        return { regenerated: applied.changed, removed: applied.removed, reloaded: applied.reloaded, errors: [] };
      } catch (err) {
        return { regenerated: [], removed: [], reloaded: false, errors: [(err as Error).message] };
      }
    },
  });

  // --- events ------------------------------------------------------------------------------------------------
  const EventQuery = Type.Object({
    type: Type.Optional(Type.Union(['scan', 'auth_failure', 'attack_path', 'blocked_ip_hit', 'rate_limit'].map((t) => Type.Literal(t)))),
    source_ip: Type.Optional(Type.String({ maxLength: 64 })),
    deployment: Type.Optional(deploymentOrRetired()),
    start_time: TimeQuery(),
    end_time: TimeQuery(),
    ...Pagination(50, 1000),
  });
  ctx.route({
    method: 'GET',
    path: '/security/events',
    permission: 'security:read',
    operationId: 'security.listEvents',
    tag: 'security',
    summary: 'Security events detected from the proxy traffic',
    query: EventQuery,
    response: Type.Array(EventSchema),
    tenancy: 'filtered',
    description:
      "Events of the caller's deployments; events of no deployment (unknown hosts) and of deleted ones (retired names) only for global principals. `deployment` naming one the caller does not reach is 404.",
    handler: (req) => {
      const q = req.query;
      const visible = filterScope(req.principal, q.deployment);
      const limit = q.limit ?? 50;
      const offset = q.offset ?? 0;
      const { items, total } = events.list(
        {
          type: q.type,
          source_ip: q.source_ip ? checkIp(q.source_ip, 'source_ip') : undefined,
          deployment: q.deployment,
          deployments: visible,
          start_ms: timeParam(q.start_time, 'start_time'),
          end_ms: timeParam(q.end_time, 'end_time'),
        },
        limit,
        offset,
      );
      return reply.page(items, { total, limit, offset });
    },
  });

  ctx.route({
    method: 'GET',
    path: '/security/events/:id',
    permission: 'security:read',
    operationId: 'security.getEvent',
    tag: 'security',
    summary: 'One security event',
    params: Type.Object({ id: RecordId() }),
    response: EventSchema,
    tenancy: 'filtered',
    description: 'An event the caller may not see is 404, like an unknown id.',
    handler: (req) => {
      const e = events.get(req.params.id);
      if (!e || !canReach(req.principal, e.deployment)) throw errors.notFound(`security event ${req.params.id} not found`);
      return e;
    },
  });

  ctx.route({
    method: 'GET',
    path: '/security/ips/:ip/events',
    permission: 'security:read',
    operationId: 'security.ipEvents',
    tag: 'security',
    summary: 'Every event of one source address, with its block status',
    description:
      "Events of the caller's deployments. For a principal limited to deployments, `blocked` is about the blocks tied to them, and the whitelist (global) is not shown (`whitelisted: null`).",
    params: Type.Object({ ip: Type.String({ maxLength: 64 }) }),
    query: Type.Object(Pagination(50, 1000)),
    response: Type.Array(EventSchema),
    tenancy: 'filtered',
    handler: (req) => {
      const ip = checkIp(req.params.ip, 'ip');
      const limit = req.query.limit ?? 50;
      const offset = req.query.offset ?? 0;
      const visible = visibleDeployments(req.principal);
      const { items, total } = events.list({ source_ip: ip, deployments: visible }, limit, offset);
      const blocked = visible
        ? edge.state.blocked.some((b) => b.ip === ip && !isExpired(b) && !!b.deployment && visible.includes(b.deployment))
        : !!blocks.activeBlock(ip);
      return reply.ok(items, blocked ? `${ip} is blocked` : `${ip} is not blocked`, {
        total,
        limit,
        offset,
        blocked,
        whitelisted: visible ? null : blocks.whitelisted(ip),
      });
    },
  });

  ctx.route({
    method: 'GET',
    path: '/security/stats',
    permission: 'security:read',
    operationId: 'security.stats',
    tag: 'security',
    summary: 'Overview: events by type and severity, top sources, blocks, whitelist, protected routes, capture mode',
    response: Type.Object({
      events: Type.Object({
        total: Type.Integer(),
        last_24h: Type.Integer(),
        auto_blocked: Type.Integer(),
        by_type: Type.Record(Type.String(), Type.Integer()),
        by_severity: Type.Record(Type.String(), Type.Integer()),
        top_ips: Type.Array(Type.Object({ ip: Type.String(), events: Type.Integer(), last_seen: Type.String() })),
      }),
      blocked_ips: Type.Integer(),
      auto_blocked_ips: Type.Integer(),
      whitelist_entries: Nullable(Type.Integer({ description: 'null for a principal limited to deployments (the whitelist is global)' })),
      protected_routes: Type.Integer(),
      auto_block: Nullable(Type.Boolean({ description: 'null for a principal limited to deployments (a global setting)' })),
      realtime_capture: Nullable(Type.Boolean({ description: 'null for a principal limited to deployments (a global setting)' })),
    }),
    tenancy: 'filtered',
    description:
      'Counts only what the caller sees: events, blocks and protected routes of its deployments; global state (whitelist, settings, blocks for every site) only for global principals.',
    handler: (req) => {
      const p = req.principal;
      const active = edge.state.blocked.filter((b) => !isExpired(b) && canReach(p, b.deployment));
      return {
        events: events.stats({ deployments: visibleDeployments(p) }, Date.now() - 86_400_000),
        blocked_ips: active.length,
        auto_blocked_ips: active.filter((b) => b.auto).length,
        whitelist_entries: p.isGlobal ? edge.state.whitelist.length : null,
        protected_routes: edge.state.protected.filter((r) => p.canAccessDeployment(r.deployment)).length,
        auto_block: p.isGlobal ? settings.get().auto_block : null,
        realtime_capture: p.isGlobal ? settings.get().realtime_capture : null,
      };
    },
  });

  ctx.route({
    method: 'POST',
    path: '/security/cleanup',
    permission: 'security:write',
    operationId: 'security.cleanup',
    tag: 'security',
    summary: 'Remove events older than `older_than` seconds',
    body: Type.Object({ older_than: Seconds({ minimum: 0 }) }),
    response: Type.Object({ events_deleted: Type.Integer() }),
    handler: (req) => ({ events_deleted: events.cleanup(Date.now() - req.body.older_than * 1000) }),
  });
}
