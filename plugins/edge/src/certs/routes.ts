/**
 * Certificates: list, request, renew those close to expiry, delete; a daily renewal job; and the
 * background issuance behind `ssl.enabled` on a domain (the vhost switches to HTTPS once the certificate exists).
 */
import { canReach, errors, globalScopeRequired, HOSTNAME, Nullable, reply, Type, type Principal } from '@agent/sdk';
import { checkHostname } from '../validate.js';
import { namesOf } from '../state.js';
import type { Runtime } from '../runtime.js';
import type { AcmeIssuer } from './acme.js';
import type { CertInfo } from './store.js';

const Certificate = Type.Object({
  domain: Type.String(),
  names: Type.Array(Type.String()),
  issuer: Type.String(),
  not_before: Type.String(),
  not_after: Type.String(),
  days_left: Type.Integer(),
  status: Type.Union([Type.Literal('valid'), Type.Literal('expiring'), Type.Literal('expired')]),
  auto_renew: Type.Boolean(),
  deployment: Nullable(Type.String()),
  last_error: Nullable(Type.String()),
});

export class Certificates {
  private readonly inflight = new Map<string, Promise<CertInfo>>();

  constructor(
    private readonly rt: Runtime,
    private readonly issuer: AcmeIssuer,
  ) {}

  /** The names a certificate for `domain` must cover: the domain and the aliases of its entries. */
  namesFor(domain: string): string[] {
    const names = new Set([domain]);
    for (const d of this.rt.edge.state.domains) if (d.domain === domain) for (const n of namesOf(d)) names.add(n);
    return [...names];
  }

  deploymentOf(domain: string): string | null {
    return this.rt.edge.state.domains.find((d) => d.domain === domain)?.deployment ?? null;
  }

  /** Issues (or renews) the certificate of `domain`, then re-renders so vhosts with SSL switch to HTTPS. */
  obtain(domain: string): Promise<CertInfo> {
    const running = this.inflight.get(domain);
    if (running) return running;
    const job = (async () => {
      const { edge, ctx } = this.rt;
      const names = this.namesFor(domain);
      const attempt = new Date().toISOString();
      try {
        const { key, chain } = await this.issuer.issue(names);
        await edge.certs.save(domain, key, chain);
      } catch (err) {
        const message = (err as Error).message;
        await edge.doc.update((d) => {
          const meta = d.certificates.find((c) => c.domain === domain);
          if (meta) Object.assign(meta, { last_error: message, last_attempt_at: attempt });
          else d.certificates.push({ domain, names, auto_renew: true, deployment: this.deploymentOf(domain), last_error: message, last_attempt_at: attempt });
        });
        throw errors.badGateway(`certificate for ${domain} not obtained: ${message}`, 'CERTIFICATE_FAILED');
      }
      // nginx reads the new files on reload; the render switches SSL domains to HTTPS.
      await edge.mutate(
        (draft) => {
          const meta = draft.certificates.find((c) => c.domain === domain);
          const fields = { names, deployment: this.deploymentOf(domain), last_error: null, last_attempt_at: attempt };
          if (meta) Object.assign(meta, fields);
          else draft.certificates.push({ domain, auto_renew: true, ...fields });
        },
        { force: true },
      );
      ctx.events.emit('certificate.issued', { domain });
      return edge.certs.info(domain)!;
    })().finally(() => this.inflight.delete(domain));
    this.inflight.set(domain, job);
    return job;
  }

  /** SSL domains without a certificate (or whose certificate misses a name): obtain them in the background. */
  ensure(reason: string): void {
    const { edge, ctx } = this.rt;
    const hosts = [...new Set(edge.state.domains.filter((d) => d.ssl.enabled).map((d) => d.domain))];
    for (const host of hosts) {
      const info = edge.certs.info(host);
      const missing = !info || this.namesFor(host).some((n) => !info.names.includes(n));
      if (!missing || this.inflight.has(host)) continue;
      ctx.log.info('obtaining a certificate', { domain: host, reason });
      this.obtain(host).catch((err) => ctx.log.warn('certificate not obtained', { domain: host, error: (err as Error).message }));
    }
  }

  /** Renews every auto-renewed certificate within `renew_before_days` of expiry. */
  async renewDue(withinDays?: number): Promise<{ renewed: string[]; failed: { domain: string; error: string }[]; checked: number }> {
    const { edge, ctx } = this.rt;
    const renewed: string[] = [];
    const failed: { domain: string; error: string }[] = [];
    const domains = await edge.certs.domains();
    for (const domain of domains) {
      const info = edge.certs.info(domain);
      const meta = edge.state.certificates.find((c) => c.domain === domain);
      const due = withinDays === undefined ? info?.status !== 'valid' : (info?.days_left ?? 0) < withinDays;
      if (!info || !due || meta?.auto_renew === false) continue;
      try {
        await this.obtain(domain);
        renewed.push(domain);
      } catch (err) {
        const error = (err as Error).message;
        failed.push({ domain, error });
        ctx.events.emit('certificate.renewal_failed', { domain, error });
      }
    }
    for (const domain of domains) {
      const info = edge.certs.info(domain);
      if (info && info.status !== 'valid') ctx.events.emit('certificate.expiring', { domain, days_left: info.days_left });
    }
    return { renewed, failed, checked: domains.length };
  }

  view(info: CertInfo) {
    const meta = this.rt.edge.state.certificates.find((c) => c.domain === info.domain);
    return {
      ...info,
      auto_renew: meta?.auto_renew ?? true,
      deployment: this.deploymentOf(info.domain) ?? meta?.deployment ?? null,
      last_error: meta?.last_error ?? null,
    };
  }
}

export function certificateRoutes(rt: Runtime, certs: Certificates): void {
  const { ctx, edge } = rt;
  /**
   * The deployment a certificate is bound to for the caller: the one whose domain it is, when the caller reaches
   * it. Another tenant's domain and a name no deployment uses look alike (global: 403 GLOBAL_SCOPE_REQUIRED to a
   * scoped principal), so neither the other deployment's name nor whether it exists leaks.
   */
  const boundTo = (principal: Principal, domain: string) => {
    const owner = certs.deploymentOf(domain);
    return owner && principal.deploymentLevel(owner) ? owner : undefined;
  };
  /** Re-checked in the handler: the domain may have moved since the core checked the deployment. */
  const assertMayChange = (principal: Principal, domain: string) => {
    const owner = certs.deploymentOf(domain);
    if (owner ? !principal.canAccessDeployment(owner, 'write') : !principal.isGlobal) throw globalScopeRequired(`the certificate of ${domain}`);
  };

  ctx.route({
    method: 'GET',
    path: '/certificates',
    permission: 'certificates:read',
    operationId: 'certificates.list',
    tag: 'certificates',
    tenancy: 'filtered',
    summary: 'Certificates with validity, status (valid, expiring, expired) and the deployment using them',
    response: Type.Array(Certificate),
    description:
      "A principal limited to deployments sees the certificates of its deployments' domains; those of names no deployment uses (or a deleted one used) are global.",
    handler: async (req) => {
      const out = [];
      for (const domain of await edge.certs.domains()) {
        if (!canReach(req.principal, certs.deploymentOf(domain))) continue;
        const info = edge.certs.info(domain);
        if (info) out.push(certs.view(info));
      }
      return out;
    },
  });

  ctx.route({
    method: 'POST',
    path: '/certificates',
    permission: 'certificates:write',
    operationId: 'certificates.request',
    tag: 'certificates',
    status: 201,
    creates: 'domain',
    summary: 'Obtain a certificate (ACME HTTP-01 through the proxy) for a domain and its aliases',
    description: 'Bound to the deployment whose domain it is; for a name no deployment uses, global.',
    body: Type.Object({ domain: Type.String({ maxLength: 253, pattern: HOSTNAME }) }),
    deployment: (req) => boundTo(req.principal, req.body.domain),
    response: Certificate,
    handler: async (req) => {
      const domain = checkHostname(req.body.domain, 'domain');
      assertMayChange(req.principal, domain);
      const info = await certs.obtain(domain);
      return reply.created(certs.view(info));
    },
  });

  ctx.route({
    method: 'POST',
    path: '/certificates/renew',
    permission: 'certificates:write',
    operationId: 'certificates.renew',
    tag: 'certificates',
    summary: 'Renew every certificate that expires within certificates.renew_before_days (or `within_days`)',
    query: Type.Object({
      within_days: Type.Optional(Type.Integer({ minimum: 1, maximum: 100_000, description: 'renew those expiring within this many days' })),
    }),
    response: Type.Object({
      renewed: Type.Array(Type.String()),
      failed: Type.Array(Type.Object({ domain: Type.String(), error: Type.String() })),
      checked: Type.Integer(),
    }),
    handler: (req) => certs.renewDue(req.query.within_days),
  });

  ctx.route({
    method: 'DELETE',
    path: '/certificates/:domain',
    permission: 'certificates:write',
    operationId: 'certificates.delete',
    tag: 'certificates',
    summary: 'Delete a certificate (domains using it fall back to HTTP)',
    description: 'Bound to the deployment whose domain it is; for a name no deployment uses, global.',
    params: Type.Object({ domain: Type.String({ maxLength: 253, pattern: HOSTNAME }) }),
    deployment: (req) => boundTo(req.principal, req.params.domain),
    handler: async (req) => {
      const domain = checkHostname(req.params.domain, 'domain');
      assertMayChange(req.principal, domain);
      if (!edge.certs.has(domain)) throw errors.notFound(`no certificate for ${domain}`);
      await edge.certs.remove(domain);
      const fallback = edge.state.domains.some((d) => d.domain === domain && d.ssl.enabled);
      await edge.mutate((draft) => {
        draft.certificates = draft.certificates.filter((c) => c.domain !== domain);
      });
      return reply.ok(
        null,
        fallback ? `certificate of ${domain} deleted; the domain is served over HTTP until a new one is obtained` : `certificate of ${domain} deleted`,
      );
    },
  });

  ctx.job({
    name: 'certificates-renew',
    cron: ctx.config.certificates.renew_cron,
    description: 'renews certificates close to expiry and obtains missing ones',
    run: async (run) => {
      certs.ensure('daily job');
      const r = await certs.renewDue();
      run.output(`${r.checked} checked, ${r.renewed.length} renewed, ${r.failed.length} failed`);
      for (const f of r.failed) run.output(`${f.domain}: ${f.error}`);
      if (r.failed.length) throw new Error(`${r.failed.length} renewal(s) failed`);
    },
  });
}
