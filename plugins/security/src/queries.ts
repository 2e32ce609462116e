/** The reads of the security routes: rules, settings and events as the caller may see them. */
import { canReach, errors, reply, visibleDeployments, type Principal, type Static } from '@agent/sdk';
import { filterScope, timeParam } from './access.js';
import { defaultDeploymentSecurity, isExpired, type BlockedIp, type ProtectedRoute } from './state.js';
import { checkIp } from './validate.js';
import type { EventQuery, PageQuery, Stats } from './schemas.js';
import type { SecurityRuntime } from './runtime.js';

export const blockedView = (b: BlockedIp) => ({
  ...b,
  remaining_seconds: b.expires_at ? Math.max(0, Math.round((Date.parse(b.expires_at) - Date.now()) / 1000)) : null,
});
export const protectedView = ({ password_hash: _hash, ...r }: ProtectedRoute) => r;

export class SecurityQueries {
  constructor(private readonly rt: SecurityRuntime) {}

  private get state() {
    return this.rt.rules.state;
  }

  blocked(p: Principal) {
    return this.state.blocked.filter((b) => !isExpired(b) && canReach(p, b.deployment)).map(blockedView);
  }

  whitelist() {
    return this.state.whitelist;
  }

  protectedRoutes(p: Principal) {
    return this.state.protected.filter((r) => p.canAccessDeployment(r.deployment)).map(protectedView);
  }

  deployment(name: string) {
    if (!this.rt.deployments.get(name)) throw errors.notFound(`deployment '${name}' not found`);
    return this.state.deployment_security[name] ?? defaultDeploymentSecurity();
  }

  settings() {
    return this.rt.settings.get();
  }

  capture() {
    const s = this.rt.settings.get();
    return { enabled: s.realtime_capture, mode: s.realtime_capture ? 'realtime' : 'periodic', source: this.rt.traffic.capture.source };
  }

  events(q: Static<typeof EventQuery>, p: Principal) {
    const visible = filterScope(p, q.deployment);
    const limit = q.limit ?? 50;
    const offset = q.offset ?? 0;
    const filter = {
      type: q.type,
      source_ip: q.source_ip ? checkIp(q.source_ip, 'source_ip') : undefined,
      deployment: q.deployment,
      deployments: visible,
      start_ms: timeParam(q.start_time, 'start_time'),
      end_ms: timeParam(q.end_time, 'end_time'),
    };
    const { items, total } = this.rt.events.list(filter, limit, offset);
    return reply.page(items, { total, limit, offset });
  }

  event(id: number, p: Principal) {
    const e = this.rt.events.get(id);
    if (!e || !canReach(p, e.deployment)) throw errors.notFound(`security event ${id} not found`);
    return e;
  }

  /** Events of one address, with whether it is blocked (for a scoped principal: by its deployments' blocks). */
  ipEvents(value: string, q: Static<typeof PageQuery>, p: Principal) {
    const ip = checkIp(value, 'ip');
    const limit = q.limit ?? 50;
    const offset = q.offset ?? 0;
    const visible = visibleDeployments(p);
    const { items, total } = this.rt.events.list({ source_ip: ip, deployments: visible }, limit, offset);
    const blocked = visible
      ? this.state.blocked.some((b) => b.ip === ip && !isExpired(b) && !!b.deployment && visible.includes(b.deployment))
      : !!this.rt.rules.activeBlock(ip);
    return reply.ok(items, blocked ? `${ip} is blocked` : `${ip} is not blocked`, {
      total,
      limit,
      offset,
      blocked,
      whitelisted: visible ? null : this.rt.rules.whitelisted(ip),
    });
  }

  stats(p: Principal): Static<typeof Stats> {
    const active = this.state.blocked.filter((b) => !isExpired(b) && canReach(p, b.deployment));
    const s = this.rt.settings.get();
    return {
      events: this.rt.events.stats({ deployments: visibleDeployments(p) }, Date.now() - 86_400_000),
      blocked_ips: active.length,
      auto_blocked_ips: active.filter((b) => b.auto).length,
      whitelist_entries: p.isGlobal ? this.state.whitelist.length : null,
      protected_routes: this.state.protected.filter((r) => p.canAccessDeployment(r.deployment)).length,
      auto_block: p.isGlobal ? s.auto_block : null,
      realtime_capture: p.isGlobal ? s.realtime_capture : null,
    };
  }
}
