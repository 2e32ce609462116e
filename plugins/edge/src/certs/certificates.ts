/**
 * Certificates: issuance (ACME, through the proxy), renewal of those close to expiry, the background issuance behind
 * `ssl.enabled` on a domain (the vhost switches to HTTPS once the certificate exists), and who may change which.
 */
import { canReach, errors, globalScopeRequired, Nullable, Type, type PluginContext, type Principal } from '@agent/sdk';
import type { EdgeConfig } from '../config.js';
import { namesOf } from '../state.js';
import type { Runtime } from '../runtime.js';
import type { AcmeIssuer } from './acme.js';
import type { CertInfo } from './store.js';

export const Certificate = Type.Object({
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

  /**
   * The deployment a certificate is bound to for the caller: the one whose domain it is, when the caller reaches
   * it. Another tenant's domain and a name no deployment uses look alike (global: 403 GLOBAL_SCOPE_REQUIRED to a
   * scoped principal), so neither the other deployment's name nor whether it exists leaks.
   */
  boundTo(principal: Principal, domain: string): string | undefined {
    const owner = this.deploymentOf(domain);
    return owner && principal.deploymentLevel(owner) ? owner : undefined;
  }

  /** Checked again in the operation: the domain may have moved since the core checked the deployment. */
  assertMayChange(principal: Principal, domain: string): void {
    const owner = this.deploymentOf(domain);
    if (owner ? !principal.canAccessDeployment(owner, 'write') : !principal.isGlobal) throw globalScopeRequired(`the certificate of ${domain}`);
  }

  /** The certificates the caller reaches: its deployments' domains', and for global principals all. */
  async list(principal: Principal) {
    const out = [];
    for (const domain of await this.rt.edge.certs.domains()) {
      if (!canReach(principal, this.deploymentOf(domain))) continue;
      const info = this.rt.edge.certs.info(domain);
      if (info) out.push(this.view(info));
    }
    return out;
  }

  /** Deletes a certificate (the files, then its metadata with a render: SSL domains fall back to HTTP). */
  async remove(domain: string): Promise<void> {
    await this.rt.edge.certs.remove(domain);
    await this.rt.edge.mutate((draft) => {
      draft.certificates = draft.certificates.filter((c) => c.domain !== domain);
    });
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

/** The daily job: renews the certificates close to expiry and obtains missing ones. */
export function renewalJob(ctx: PluginContext<EdgeConfig>, certs: Certificates): void {
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
